"""Read-only traversal of the model's syntax trees (graphlint/model/syntax.py).

A node's children are the nodes its ``_fields`` hold, in source order.
"""

from __future__ import annotations

from typing import Iterable

from graphlint.model import syntax as cst


def dispatch(visitor: object, roots: Iterable[cst.CSTNode]) -> None:
    """Call ``visitor.visit_<NodeType>(node)`` in source order (pre-order).

    A visit method returning False skips that node's children, as in libcst.
    """
    cls = type(visitor)
    methods = cls.__dict__.get("_visit_methods")
    if methods is None:
        # Node class -> unbound visit method (or None), kept on the visitor class
        # itself so that classes defined in a function die with their cache.
        methods = {}
        cls._visit_methods = methods
    stack = list(reversed(list(roots)))
    while stack:
        node = stack.pop()
        kind = type(node)
        try:
            method = methods[kind]
        except KeyError:
            method = methods[kind] = getattr(cls, "visit_" + kind.__name__, None)
        if method is not None and method(visitor, node) is False:
            continue
        stack.extend(reversed(children(node)))


def descendants(root: cst.CSTNode):
    """``root`` and every node below it (the model's children: formatting left out)."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(children(node))


# Children of each node, computed once. Keyed by id(); each entry keeps its
# node, so an id cannot be reused while cached, and ``analysing`` clears the
# cache per tree.
_children: dict[int, tuple[cst.CSTNode, tuple[cst.CSTNode, ...]]] = {}
_MAX_CACHED = 1_000_000


def children(node: cst.CSTNode) -> tuple[cst.CSTNode, ...]:
    entry = _children.get(id(node))
    if entry is not None and entry[0] is node:
        return entry[1]
    if len(_children) > _MAX_CACHED:
        _children.clear()
    found = []
    for name in node._fields:
        value = getattr(node, name)
        if type(value) is list:
            found.extend(value)
        elif value is not None:
            found.append(value)
    found = tuple(found)
    _children[id(node)] = (node, found)
    return found


class analysing:
    """Context manager scoping the children cache to one tree."""

    def __enter__(self) -> None:
        _children.clear()

    def __exit__(self, *exc) -> None:
        _children.clear()
