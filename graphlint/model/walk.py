"""Read-only traversal of libcst trees.

libcst's ``node.visit(visitor)`` rebuilds every node it passes (it is built for
transformers), which made visiting the slowest part of the analysis. The model
only reads trees, so it walks ``children`` directly.
"""

from __future__ import annotations

import dataclasses
from types import NoneType
from typing import Iterable

import libcst as cst


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


# Children of each node, computed once (see ``_fields_in_visit_order``). Keyed by
# id(); each entry keeps its node, so an id cannot be reused while cached, and
# ``analysing`` clears the cache per tree.
_children: dict[int, tuple[cst.CSTNode, tuple[cst.CSTNode, ...]]] = {}
_MAX_CACHED = 1_000_000


def children(node: cst.CSTNode) -> tuple[cst.CSTNode, ...]:
    entry = _children.get(id(node))
    if entry is not None and entry[0] is node:
        return entry[1]
    if len(_children) > _MAX_CACHED:
        _children.clear()
    fields = _child_fields.get(type(node))
    if fields is None:
        fields = _child_fields[type(node)] = _fields_in_visit_order(type(node))
    found = []
    for name in fields:
        value = getattr(node, name)
        kind = type(value)
        # A visited field holds a node, a sequence of nodes, None or MaybeSentinel:
        # testing for those (not "is a CSTNode", an ABC check) made this five times faster.
        if kind is tuple or kind is list:
            found.extend(value)
        elif kind is not NoneType and kind is not cst.MaybeSentinel:
            found.append(value)
    found = tuple(found)
    _children[id(node)] = (node, found)
    return found


# Node class -> the names of its fields that hold children, in source order.
_child_fields: dict[type, tuple[str, ...]] = {}


def _fields_in_visit_order(cls: type) -> tuple[str, ...]:
    """The fields ``cls._visit_and_replace_children`` visits, in the order it visits them.

    libcst's ``children`` property collects them by running that method with a
    visitor, rebuilding the node: four times slower than reading the fields. The
    method names each field it visits as a string constant
    (``visit_required(self, "func", self.func, visitor)``), and its code object
    lists its constants in the order the source first uses them, which is the
    visiting order (tests/test_walk.py checks this against ``children`` on
    every fixture).
    """
    names = {field.name for field in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()
    method = getattr(cls, "_visit_and_replace_children", None)
    code = getattr(method, "__code__", None)
    if code is None:
        return ()
    ordered: list[str] = []
    for constant in code.co_consts:
        if isinstance(constant, str) and constant in names and constant not in ordered:
            ordered.append(constant)
    return tuple(ordered)


class analysing:
    """Context manager scoping the children cache to one tree."""

    def __enter__(self) -> None:
        _children.clear()

    def __exit__(self, *exc) -> None:
        _children.clear()
