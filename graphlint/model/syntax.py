"""The syntax tree the analysis reads: libcst's node classes, built from CPython's parser.

The analysis was written against libcst's tree (class names, field names, the
shape of statements and suites). libcst's parse builds every whitespace and
punctuation node of a file in Python and costs about seven times CPython's
``ast.parse`` on real training code, and importing libcst alone costs about
0.3 s, as much as a whole pre-commit run of graphlint may take. So the model
reads this module instead: the same classes, with the same fields and the
same nesting (``SimpleStatementLine`` around small statements, ``Arg`` around
call arguments, ``elif`` as an ``If`` in ``orelse``, ``True`` as a ``Name``),
made from ``ast`` by ``parse``. Formatting is left out, as ``walk`` always
left it out. tests/test_syntax.py compares this tree with libcst's, field by
field, on every fixture. The fixer, which rewrites source, still uses libcst.

Every node records where it is: ``_span`` holds (line, column, end line, end
column), columns in UTF-8 bytes as ``ast`` gives them; ``Positions`` turns
them into characters on demand.
"""

from __future__ import annotations

import ast
from typing import Any


class CSTNode:
    """A node: ``_fields`` are the fields holding nodes, in source order; ``_scalars`` the others.

    ``_children`` caches what ``walk.children`` reads from the fields, ``_dotted``
    what ``names.dotted`` makes of an attribute chain (both unset until asked).
    """

    __slots__ = ("_span", "_children", "_dotted")
    _fields: tuple[str, ...] = ()
    _scalars: tuple[str, ...] = ()

    def with_changes(self, **changes: Any) -> CSTNode:
        """A copy with some fields replaced (not part of any tree: it has no position)."""
        copy = type(self).__new__(type(self))
        for name in self._fields + self._scalars:
            setattr(copy, name, changes.get(name, getattr(self, name)))
        copy._span = None
        return copy

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields + self._scalars)
        return f"{type(self).__name__}({shown})"


class BaseExpression(CSTNode):
    __slots__ = ()


class BaseStatement(CSTNode):
    __slots__ = ()


class BaseCompoundStatement(BaseStatement):
    __slots__ = ()


class BaseSmallStatement(CSTNode):
    __slots__ = ()


class BaseSuite(CSTNode):
    __slots__ = ()


class BaseElement(CSTNode):
    __slots__ = ()


class BaseDictElement(CSTNode):
    __slots__ = ()


class BaseSlice(CSTNode):
    __slots__ = ()


_constructors: dict[tuple[str, ...], Any] = {}


def _define(name: str, bases: tuple[type, ...], fields: str = "", scalars: str = "") -> type:
    """A node class whose constructor takes its fields, then its scalars, by position or keyword.

    The constructor is compiled (as dataclasses do, once per list of names): the
    parse builds about a hundred thousand nodes per megabyte of source.
    """
    field_names, scalar_names = tuple(fields.split()), tuple(scalars.split())
    names = field_names + scalar_names
    constructor = _constructors.get(names)
    if constructor is None:
        parameters = "".join(f", {n}=None" for n in names)
        body = "".join(f"\n    self.{n} = {n}" for n in names)
        namespace: dict[str, Any] = {}
        exec(f"def __init__(self{parameters}):{body}\n    self._span = None", namespace)  # noqa: S102 - fixed text
        constructor = _constructors[names] = namespace["__init__"]
    cls = type(name, bases, {
        "__slots__": names, "_fields": field_names, "_scalars": scalar_names,
        "__init__": constructor, "__module__": __name__,
    })
    globals()[name] = cls
    return cls


_EXPRESSION = (BaseExpression,)
_SMALL = (BaseSmallStatement,)
_COMPOUND = (BaseCompoundStatement,)
_PLAIN = (CSTNode,)

for _name, _bases, _fields, _scalars in [
    # Expressions.
    ("Name", _EXPRESSION, "", "value"),
    ("Attribute", _EXPRESSION, "value attr", ""),
    ("Call", _EXPRESSION, "func args", ""),
    ("Subscript", _EXPRESSION, "value slice", ""),
    ("BinaryOperation", _EXPRESSION, "left operator right", ""),
    ("BooleanOperation", _EXPRESSION, "left operator right", ""),
    ("UnaryOperation", _EXPRESSION, "operator expression", ""),
    ("Comparison", _EXPRESSION, "left comparisons", ""),
    ("IfExp", _EXPRESSION, "body test orelse", ""),
    ("Lambda", _EXPRESSION, "params body", ""),
    ("NamedExpr", _EXPRESSION, "target value", ""),
    ("Await", _EXPRESSION, "expression", ""),
    ("Yield", _EXPRESSION, "value", ""),
    ("Tuple", _EXPRESSION, "elements", ""),
    ("List", _EXPRESSION, "elements", ""),
    ("Set", _EXPRESSION, "elements", ""),
    ("Dict", _EXPRESSION, "elements", ""),
    ("ListComp", _EXPRESSION, "elt for_in", ""),
    ("SetComp", _EXPRESSION, "elt for_in", ""),
    ("GeneratorExp", _EXPRESSION, "elt for_in", ""),
    ("DictComp", _EXPRESSION, "key value for_in", ""),
    ("Integer", _EXPRESSION, "", "value"),
    ("Float", _EXPRESSION, "", "value"),
    ("Imaginary", _EXPRESSION, "", "value"),
    ("SimpleString", _EXPRESSION, "", "value _evaluated"),
    ("ConcatenatedString", _EXPRESSION, "left right", ""),
    ("FormattedString", _EXPRESSION, "parts", ""),
    ("Ellipsis", _EXPRESSION, "", ""),
    ("StarredElement", (BaseExpression, BaseElement), "value", ""),
    # Parts of expressions.
    ("Arg", _PLAIN, "keyword value", "star"),
    ("Element", (BaseElement,), "value", ""),
    ("DictElement", (BaseDictElement,), "key value", ""),
    ("StarredDictElement", (BaseDictElement,), "value", ""),
    ("SubscriptElement", _PLAIN, "slice", ""),
    ("Index", (BaseSlice,), "value", "star"),
    ("Slice", (BaseSlice,), "lower upper step", ""),
    ("ComparisonTarget", _PLAIN, "operator comparator", ""),
    ("CompFor", _PLAIN, "asynchronous target iter ifs inner_for_in", ""),
    ("CompIf", _PLAIN, "test", ""),
    ("From", _PLAIN, "item", ""),
    ("FormattedStringText", _PLAIN, "", "value"),
    ("FormattedStringExpression", _PLAIN, "expression format_spec", "conversion"),
    ("Parameters", _PLAIN, "posonly_params posonly_ind params star_arg kwonly_params star_kwarg", ""),
    ("Param", _PLAIN, "name annotation default", "star"),
    ("ParamStar", _PLAIN, "", ""),
    ("ParamSlash", _PLAIN, "", ""),
    ("Annotation", _PLAIN, "annotation", ""),
    ("Asynchronous", _PLAIN, "", ""),
    # Small statements.
    ("Expr", _SMALL, "value", ""),
    ("Assign", _SMALL, "targets value", ""),
    ("AssignTarget", _PLAIN, "target", ""),
    ("AnnAssign", _SMALL, "target annotation value", ""),
    ("AugAssign", _SMALL, "target operator value", ""),
    ("Return", _SMALL, "value", ""),
    ("Raise", _SMALL, "exc cause", ""),
    ("Assert", _SMALL, "test msg", ""),
    ("Del", _SMALL, "target", ""),
    ("Pass", _SMALL, "", ""),
    ("Break", _SMALL, "", ""),
    ("Continue", _SMALL, "", ""),
    ("Global", _SMALL, "names", ""),
    ("Nonlocal", _SMALL, "names", ""),
    ("NameItem", _PLAIN, "name", ""),
    ("Import", _SMALL, "names", ""),
    ("ImportFrom", _SMALL, "module names", "relative"),
    ("ImportAlias", _PLAIN, "name asname", ""),
    ("ImportStar", _PLAIN, "", ""),
    ("AsName", _PLAIN, "name", ""),
    # Statements, suites and their parts.
    ("SimpleStatementLine", (BaseStatement,), "body", ""),
    ("SimpleStatementSuite", (BaseSuite,), "body", ""),
    ("IndentedBlock", (BaseSuite,), "body", ""),
    ("If", _COMPOUND, "test body orelse", ""),
    ("Else", _PLAIN, "body", ""),
    ("For", _COMPOUND, "asynchronous target iter body orelse", ""),
    ("While", _COMPOUND, "test body orelse", ""),
    ("With", _COMPOUND, "asynchronous items body", ""),
    ("WithItem", _PLAIN, "item asname", ""),
    ("Try", _COMPOUND, "body handlers orelse finalbody", ""),
    ("TryStar", _COMPOUND, "body handlers orelse finalbody", ""),
    ("ExceptHandler", _PLAIN, "type name body", ""),
    ("ExceptStarHandler", _PLAIN, "type name body", ""),
    ("Finally", _PLAIN, "body", ""),
    # `_bound`: the names the body binds, gathered by the build (statements.assigned_names).
    ("FunctionDef", _COMPOUND, "decorators asynchronous name params returns body", "_bound"),
    ("ClassDef", _COMPOUND, "decorators name bases keywords body", ""),
    ("Decorator", _PLAIN, "decorator", ""),
    ("Match", _COMPOUND, "subject cases", ""),
    ("MatchCase", _PLAIN, "pattern guard body", ""),
    ("MatchValue", _PLAIN, "value", ""),
    ("MatchSingleton", _PLAIN, "value", ""),
    ("MatchAs", _PLAIN, "pattern name", ""),
    ("MatchStar", _PLAIN, "name", ""),
    ("MatchList", _PLAIN, "patterns", ""),
    ("MatchSequenceElement", _PLAIN, "value", ""),
    ("MatchMapping", _PLAIN, "elements rest", ""),
    ("MatchMappingElement", _PLAIN, "key pattern", ""),
    ("MatchClass", _PLAIN, "cls patterns kwds", ""),
    ("MatchKeywordElement", _PLAIN, "key pattern", ""),
    ("MatchOr", _PLAIN, "patterns", ""),
    ("MatchOrElement", _PLAIN, "pattern", ""),
]:
    _define(_name, _bases, _fields, _scalars)

# Operators: nodes without fields, one class each, as in libcst.
_BINARY = {
    ast.Add: "Add", ast.Sub: "Subtract", ast.Mult: "Multiply", ast.Div: "Divide",
    ast.FloorDiv: "FloorDivide", ast.Mod: "Modulo", ast.Pow: "Power", ast.LShift: "LeftShift",
    ast.RShift: "RightShift", ast.BitOr: "BitOr", ast.BitXor: "BitXor", ast.BitAnd: "BitAnd",
    ast.MatMult: "MatrixMultiply",
}
_UNARY = {ast.Not: "Not", ast.USub: "Minus", ast.UAdd: "Plus", ast.Invert: "BitInvert"}
_BOOLEAN = {ast.And: "And", ast.Or: "Or"}
_COMPARISON = {
    ast.Eq: "Equal", ast.NotEq: "NotEqual", ast.Lt: "LessThan", ast.LtE: "LessThanEqual",
    ast.Gt: "GreaterThan", ast.GtE: "GreaterThanEqual", ast.Is: "Is", ast.IsNot: "IsNot",
    ast.In: "In", ast.NotIn: "NotIn",
}
for _name in [*_BINARY.values(), *_UNARY.values(), *_BOOLEAN.values(), *_COMPARISON.values()]:
    _define(_name, _PLAIN)
for _name in _BINARY.values():
    _define(_name + "Assign", _PLAIN)


def _evaluated_value(self) -> Any:
    """The string's value (a literal's evaluation, as libcst's ``evaluated_value``)."""
    if self._evaluated is None:
        self._evaluated = ast.literal_eval(self.value)
    return self._evaluated


SimpleString.evaluated_value = property(_evaluated_value)  # type: ignore[name-defined] # noqa: F821


class Module(CSTNode):
    """A file: its statements, its text as UTF-8 lines (what spans index), every
    identifier its code spells, and the names its top level binds (None: not gathered)."""

    __slots__ = ("body", "lines", "names", "bound")
    _fields = ("body",)

    def __init__(
        self, body: list, lines: list[bytes], names: frozenset[str] = frozenset(), bound: frozenset[str] | None = None
    ) -> None:
        self.body = body
        self.lines = lines
        self.names = names
        self.bound = bound
        self._span = (1, 0, max(len(lines), 1), 0)

    def code_for_node(self, node: CSTNode) -> str:
        """The source text of ``node`` (generated, for a node made by the analysis)."""
        if node._span is None:
            return _generated(node, self)
        return text_between(self.lines, node._span)


def text_between(lines: list[bytes], span: tuple[int, int, int, int]) -> str:
    """The text of UTF-8 ``lines`` from (line, column) to (end line, end column), columns in bytes."""
    line, start, end_line, end = span
    if line == end_line:
        return lines[line - 1][start:end].decode("utf-8", "replace")
    parts = [lines[line - 1][start:], *lines[line:end_line - 1], lines[end_line - 1][:end]]
    return b"".join(parts).decode("utf-8", "replace")


_SPELLING = {
    "Add": "+", "Subtract": "-", "Multiply": "*", "Divide": "/", "FloorDivide": "//", "Modulo": "%",
    "Power": "**", "LeftShift": "<<", "RightShift": ">>", "BitOr": "|", "BitXor": "^", "BitAnd": "&",
    "MatrixMultiply": "@", "Not": "not ", "Minus": "-", "Plus": "+", "BitInvert": "~", "And": "and",
    "Or": "or", "Equal": "==", "NotEqual": "!=", "LessThan": "<", "LessThanEqual": "<=", "GreaterThan": ">",
    "GreaterThanEqual": ">=", "Is": "is", "IsNot": "is not", "In": "in", "NotIn": "not in",
}


def _generated(node: CSTNode, module: Module) -> str:
    """Code for a node the analysis built (``with_changes``, a test it derived), spaced as
    libcst generates a new node; its parts from the file keep their own text."""
    code = module.code_for_node
    kind = type(node).__name__
    if kind in _SPELLING:
        return _SPELLING[kind]
    if kind in ("Name", "Integer", "Float", "Imaginary", "SimpleString"):
        return node.value
    if kind == "Attribute":
        return f"{code(node.value)}.{node.attr.value}"
    if kind in ("BinaryOperation", "BooleanOperation"):
        return f"{code(node.left)} {code(node.operator)} {code(node.right)}"
    if kind == "UnaryOperation":
        return f"{code(node.operator)}{code(node.expression)}"
    if kind == "Comparison":
        rest = "".join(f" {code(c.operator)} {code(c.comparator)}" for c in node.comparisons)
        return code(node.left) + rest
    if kind == "Call":
        return f"{code(node.func)}({', '.join(code(arg.value) for arg in node.args)})"
    if kind == "Subscript":
        return f"{code(node.value)}[{', '.join(code(e.slice.value) for e in node.slice)}]"
    return "..."
