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
        try:
            below = node._children  # (children() inlined: a million nodes on the corpus)
        except AttributeError:
            below = children(node)
        stack.extend(below[::-1])


def descendants(root: cst.CSTNode):
    """``root`` and every node below it (the model's children: formatting left out)."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(children(node))


def children(node: cst.CSTNode) -> tuple[cst.CSTNode, ...]:
    """The nodes ``node``'s fields hold, in source order; computed once, kept on the node."""
    try:
        return node._children
    except AttributeError:  # not asked before (a slot without a value)
        pass
    found = []
    for name in node._fields:
        value = getattr(node, name)
        if type(value) is list:
            found.extend(value)
        elif value is not None:
            found.append(value)
    found = tuple(found)
    node._children = found
    return found
