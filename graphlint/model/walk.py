"""Read-only traversal of libcst trees.

libcst's ``node.visit(visitor)`` rebuilds every node it passes (it is built for
transformers), which made visiting the slowest part of the analysis. The model
only reads trees, so it walks ``children`` directly.

The model's children leave out formatting: whitespace, comments, newlines and
punctuation (commas, dots, colons, brackets), which are three nodes in five of
a real file's tree and mean nothing to any analysis. Every walk of the model
(spelling, bindings, the interpreter) visits half as many nodes.
"""

from __future__ import annotations

import dataclasses
import typing
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


def descendants(root: cst.CSTNode):
    """``root`` and every node below it (the model's children: formatting left out)."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(children(node))


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
    """The fields ``cls._visit_and_replace_children`` visits that may hold more than formatting, in order.

    libcst's ``children`` property collects them by running that method with a
    visitor, rebuilding the node: four times slower than reading the fields. The
    method names each field it visits as a string constant
    (``visit_required(self, "func", self.func, visitor)``), and its code object
    lists its constants in the order the source first uses them, which is the
    visiting order (tests/test_walk.py checks this against ``children`` on
    every fixture).
    """
    fields = dataclasses.fields(cls) if dataclasses.is_dataclass(cls) else ()
    names = {field.name for field in fields if not _only_formatting(field.type)}
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


# Node classes that only carry a file's layout: the model's children skip any
# field that can hold nothing else (a Name's parentheses, an Arg's comma, a
# statement's leading comment lines). Operators are kept: they carry meaning.
FORMATTING: tuple[type, ...] = (
    cst.BaseParenthesizableWhitespace,
    cst.TrailingWhitespace,
    cst.EmptyLine,
    cst.Newline,
    cst.Comment,
    cst.Comma,
    cst.Dot,
    cst.Colon,
    cst.Semicolon,
    cst.AssignEqual,
    cst.LeftParen,
    cst.RightParen,
    cst.LeftSquareBracket,
    cst.RightSquareBracket,
    cst.LeftCurlyBrace,
    cst.RightCurlyBrace,
)


def _only_formatting(annotation: object) -> bool:
    """Whether a field's type admits nothing but formatting nodes (and None or MaybeSentinel).

    Anything this cannot read (a forward reference, a string) counts as meaningful.
    """
    classes: list[object] = []
    todo = [annotation]
    while todo:
        current = todo.pop()
        arguments = typing.get_args(current)
        if arguments:
            todo.extend(arguments)  # Optional[...], Union[...], Sequence[...]
        elif current is not NoneType and current is not cst.MaybeSentinel:
            classes.append(current)
    return bool(classes) and all(isinstance(c, type) and issubclass(c, FORMATTING) for c in classes)
