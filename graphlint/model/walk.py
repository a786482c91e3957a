"""Read-only traversal of libcst trees.

libcst's ``node.visit(visitor)`` rebuilds every node it passes (it is built for
transformers), which made visiting the slowest part of the analysis. The model
only reads trees, so it walks ``children`` directly.
"""

from __future__ import annotations

from typing import Iterable

import libcst as cst


def dispatch(visitor: object, roots: Iterable[cst.CSTNode]) -> None:
    """Call ``visitor.visit_<NodeType>(node)`` in source order (pre-order).

    A visit method returning False skips that node's children, as in libcst.
    """
    stack = list(reversed(list(roots)))
    while stack:
        node = stack.pop()
        method = getattr(visitor, "visit_" + type(node).__name__, None)
        if method is not None and method(node) is False:
            continue
        stack.extend(reversed(children(node)))


# Children of each node, computed once: libcst's ``children`` property runs a full
# visitor pass on every access. Keyed by id(); each entry keeps its node, so an id
# cannot be reused while cached, and ``analysing`` clears the cache per tree.
_children: dict[int, tuple[cst.CSTNode, tuple[cst.CSTNode, ...]]] = {}
_MAX_CACHED = 1_000_000


def children(node: cst.CSTNode) -> tuple[cst.CSTNode, ...]:
    entry = _children.get(id(node))
    if entry is not None and entry[0] is node:
        return entry[1]
    if len(_children) > _MAX_CACHED:
        _children.clear()
    found = tuple(node.children)
    _children[id(node)] = (node, found)
    return found


class analysing:
    """Context manager scoping the children cache to one tree."""

    def __enter__(self) -> None:
        _children.clear()

    def __exit__(self, *exc) -> None:
        _children.clear()
