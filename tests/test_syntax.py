"""The model's syntax tree (built from CPython's ``ast``) is libcst's tree without formatting.

The analysis was written against libcst's classes, fields and nesting; the
tree graphlint/model/from_ast.py builds must have the same shape, field by
field, and the same positions where a finding can point. libcst stays the
reference here (the fixer still uses it).
"""

from __future__ import annotations

import ast
from pathlib import Path

import libcst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from graphlint.model import syntax
from graphlint.model.from_ast import parse_module
from graphlint.model.positions import Positions
from graphlint.model.walk import children, descendants

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = sorted(path for path in (ROOT / "fixtures").rglob("*.py"))

# Shapes the fixtures may not contain: every statement and expression kind with
# optional and sequence fields, relative imports, star imports, f-strings, match.
EXTRA = '''
from . import a as b, c
from ..pkg import *
import x.y as z
@deco(1)
async def f(a, /, b: int = 2, *args, c, d=3, **kw) -> "T":
    global g
    async with open(p) as (u, v), q:
        async for i in aiter():
            await i
    x = [i async for i in y if i]
    y = {k: v for k, v in z.items()}
    w = {*a, *b}
    s = f"{x!r:>{width}} {y=}" "tail" 'more'
    t = lambda q, *r, s=1: (yield q)
    del a[1:2:3], b.c
    assert x, "msg"
    raise E from cause
    try:
        pass
    except* (A, B) as e:
        pass
    else:
        pass
    finally:
        pass
    match cmd:
        case [1, *rest] | {"k": v, **others} if v > 0:
            pass
        case Point(x=0, y=yy) as pt:
            pass
        case _:
            pass
    return (a if b else c), not d, -e, a @ b, a < b <= c, (x := 5)
class K(Base, metaclass=M):
    a: int = 1
    b += 2; c -= 3
def g(*, k, **rest):
    f(x=1, *args, y=2, **kw)
    m[1, 2], m[(1, 2)], m[:, 0], m[...], m[a:b]
    if a and b and c or d:
        pass
    elif e:
        pass
    else:
        if f: pass
    for i in x: pass
    else: pass
    while 0x10 > 1_000 > 1e-3 > 2j: break
    return -1, None, True, ..., b"raw", ("implicit"
        "concatenation")
'''

# Layouts that move lines and columns: CRLF and lone-CR newlines, tabs, a header
# comment, `;`-joined statements, one-line suites, backslash and bracket
# continuations, decorators, nested classes, no trailing newline, non-ASCII text.
ODD_SOURCES = {
    "crlf": "import torch\r\n\r\nclass A:\r\n    def f(self, x):\r\n        return x\r\n",
    "lone_cr": "x = 1\ry = 2\rif x:\r    y = 3\r",
    "tabs": "def f(x):\n\tif x:\n\t\treturn x\n\treturn (\n\t\tx,\n\t)\n",
    "header_comment": "#!/usr/bin/env python\n# coding: utf-8\n\n\n'''doc'''\nx = 1\n",
    "semicolons": "a = 1; b = 2; c = a + b\nif a: b = 3; c = 4\nelse: c = 5\n",
    "continuations": "total = 1 + \\\n    2 + \\\n    3\nvalues = [\n    1,\n  2,  # odd indent\n]\n",
    "decorated_nested": (
        "@decorator(1)\nclass Outer:\n    # comment\n\n    class Inner:\n        @staticmethod\n"
        "        def g():\n            for i in range(3):\n                while i:\n                    i -= 1\n"
        "            else:\n                pass\n"
    ),
    "no_trailing_newline": "def f():\n    return 1",
    "empty": "",
    "comments_only": "# only a comment\n",
    "non_ascii": "é = 'ünïcode'; loss = model(é)\nloss.backward()  # ok ✓\n",
}

SOURCES = {str(path.relative_to(ROOT)): path.read_text(encoding="utf-8") for path in FIXTURES}
SOURCES.update({"extra": EXTRA}, **{f"odd:{name}": text for name, text in ODD_SOURCES.items()})

_STRINGS = (libcst.SimpleString, libcst.ConcatenatedString, libcst.FormattedString)


def _pairs(ours: syntax.CSTNode, theirs: libcst.CSTNode, where: str = "module"):
    """Every (our node, libcst's node) pair, asserting that the two trees have one shape."""
    stack = [(ours, theirs, where)]
    while stack:
        node, expected, where = stack.pop()
        kind = type(node).__name__
        if isinstance(expected, _STRINGS) or kind in ("SimpleString", "FormattedString"):
            assert kind in ("SimpleString", "FormattedString"), where
            assert isinstance(expected, _STRINGS), where
            if kind == "SimpleString" and not isinstance(expected, libcst.FormattedString):
                assert node.evaluated_value == expected.evaluated_value, where
            yield node, expected
            continue  # a concatenation is one string here; text parts keep no escapes
        assert kind == type(expected).__name__, f"{where}: {kind} is libcst's {type(expected).__name__}"
        yield node, expected
        for name in node._scalars:
            mine, theirs_value = getattr(node, name), getattr(expected, name, None)
            if name.startswith("_"):  # gathered by the build, checked on their own
                continue
            if name == "relative":
                theirs_value = "." * len(theirs_value)
            elif kind in ("Integer", "Float", "Imaginary"):
                theirs_value = repr(ast.literal_eval(theirs_value))
            elif isinstance(theirs_value, libcst.MaybeSentinel):
                theirs_value = "" if name == "star" and kind in ("Arg", "Param") else None
            assert mine == theirs_value, f"{where}.{name}: {mine!r} is libcst's {theirs_value!r}"
        for name in node._fields:
            mine, theirs_value = getattr(node, name), getattr(expected, name)
            if isinstance(theirs_value, libcst.MaybeSentinel):
                theirs_value = None
            if isinstance(mine, list) or isinstance(theirs_value, (list, tuple)):
                assert len(mine) == len(theirs_value), f"{where}.{name}: {len(mine)} nodes, libcst has {len(theirs_value)}"
                stack.extend((a, b, f"{where}.{name}[{i}]") for i, (a, b) in enumerate(zip(mine, theirs_value)))
            elif mine is None or theirs_value is None:
                assert mine is None and theirs_value is None, f"{where}.{name}: {mine!r} is libcst's {theirs_value!r}"
            else:
                stack.append((mine, theirs_value, f"{where}.{name}"))


# Where a finding can point, positions must be libcst's: statements, calls, names,
# attributes, subscripts. (Elsewhere ``ast`` differs in ways no finding sees: a
# tuple's span includes its parentheses, an argument's excludes them.)
_SAME_START = (
    libcst.SimpleStatementLine, libcst.BaseSmallStatement, libcst.If, libcst.For, libcst.While,
    libcst.With, libcst.Try, libcst.Name, libcst.Attribute, libcst.Call, libcst.Subscript,
    libcst.BinaryOperation, libcst.Comparison, libcst.AssignTarget,
)


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_the_tree_is_libcsts_without_formatting(name: str) -> None:
    text = SOURCES[name]
    expected = libcst.parse_module(text)
    ranges = MetadataWrapper(expected, unsafe_skip_copy=True).resolve(PositionProvider)
    ours = parse_module(text)
    positions = Positions(ours)
    for node, theirs in _pairs(ours, expected):
        if isinstance(theirs, _SAME_START) and theirs in ranges:
            start, end = ranges[theirs].start, ranges[theirs].end
            assert positions[node].start == (start.line, start.column), (type(node).__name__, name)
            if isinstance(theirs, (libcst.Name, libcst.Call, libcst.Attribute, libcst.BaseSmallStatement)):
                assert positions[node].end == (end.line, end.column), (type(node).__name__, name)


def test_children_are_the_fields_in_source_order() -> None:
    module = parse_module("f( a ,  # why\n  b=(c) )\nx = 1  # note\n")
    call = module.body[0].body[0].value
    assert [type(child) for child in children(call)] == [syntax.Name, syntax.Arg, syntax.Arg]
    assert [type(child) for child in children(call.args[1])] == [syntax.Name, syntax.Name]
    line = module.body[1]
    assert children(line) == (line.body[0],)
    kinds = sorted(type(n).__name__ for n in descendants(line))
    assert kinds == ["Assign", "AssignTarget", "Integer", "Name", "SimpleStatementLine"]


def test_code_for_node_is_the_source_text_or_generated_for_a_made_node() -> None:
    module = parse_module("if (step + 1) % accumulation == 0:\n    pass\n")
    test = module.body[0].test
    assert module.code_for_node(test) == "(step + 1) % accumulation == 0"
    negated = syntax.UnaryOperation(operator=syntax.Not(), expression=test)
    assert module.code_for_node(negated) == "not (step + 1) % accumulation == 0"
    changed = test.with_changes(left=test.left.left)
    assert module.code_for_node(changed) == "step + 1 == 0"


def test_a_node_the_analysis_made_has_no_position() -> None:
    positions = Positions(parse_module("x = 1\n"))
    assert syntax.Name("x") not in positions


BINDINGS = '''
import os
from x import y as z
a, (b, *c) = 1, (2, 3)
d: int
e += 1
f[0] = g.h = 2
del i
for j, k in []:
    pass
with open(p) as (l, m), open(q) as n:
    pass
try:
    pass
except E as o:
    pass
[r for s in t if (u := s)]
v = lambda w, x=(aa := 1): (bb := w)
global cc


@deco(dd := 1)
def outer(ee, *ff, gg=(hh := 1), **ii) -> (jj := int):
    global kk
    nonlocal_like = kk = 1

    class Inner(Base, ll=(mm := 1)):
        nn = 1

        def method(self):
            oo = 1

    def inner():
        nonlocal pp
        pp = qq = 1

    match rr:
        case [ss, *tt] if (uu := ss):
            vv = 1
        case {"k": ww, **xx}:
            pass
        case Point(x=yy) | zz:
            pass
    return [ab for ab in ee]
'''


@pytest.mark.parametrize("name", sorted(SOURCES) + ["bindings"])
def test_the_names_each_scope_binds_are_gathered_by_the_build(name: str) -> None:
    """What the build gathers per function (and for the module) is what
    statements.assigned_names finds by walking the built body."""
    from graphlint.model.program import _body_statements
    from graphlint.model.statements import assigned_names

    module = parse_module(BINDINGS if name == "bindings" else SOURCES[name])
    assert module.bound == frozenset(assigned_names(module.body))
    functions = [node for node in descendants(module) if type(node) is syntax.FunctionDef]
    for func in functions:
        assert func._bound == frozenset(assigned_names(list(_body_statements(func)))), (name, func.name.value)
    if name == "bindings":
        assert module.bound >= {"a", "b", "c", "d", "e", "j", "k", "l", "m", "n", "o", "s", "u", "v", "outer"}
        assert {"i", "f", "g", "w", "aa", "bb", "dd", "cc", "os", "z"}.isdisjoint(module.bound)
        outer = functions[0]
        assert {"nonlocal_like", "Inner", "inner", "ab", "uu", "vv"} <= outer._bound
        # (Capture patterns bind no name the analysis tracks: assigned_names skips them too.)
        assert {"kk", "ee", "hh", "jj", "mm", "nn", "oo", "pp", "ss"}.isdisjoint(outer._bound)


def _assignment(source: str) -> syntax.Assign:
    return parse_module(source).body[0].body[0]


@pytest.mark.parametrize(
    "source, expected",
    [
        ("a, b = x, y", [("a", "x"), ("b", "y")]),
        ("[a, b] = (x, y)", [("a", "x"), ("b", "y")]),
        ("(a, self.b) = [x, f(y)]", [("a", "x"), ("self.b", None)]),
        ("a, *b = x, y", None),  # a star: positions no longer say which value a part gets
        ("a, b = *xs, y", None),
        ("a, b = x, y, z", None),
        ("a, b = pair", None),
        ("a = x, y", None),
    ],
)
def test_a_tuple_assignment_pairs_its_parts_only_position_by_position(source: str, expected) -> None:
    from graphlint.model.names import dotted, paired_parts

    stmt = _assignment(source)
    pairs = paired_parts(stmt.targets[0].target, stmt.value)
    found = None if pairs is None else [(dotted(part), dotted(held)) for part, held in pairs]
    assert found == expected


def test_dotted_reads_a_chain_the_same_when_asked_again() -> None:
    from graphlint.model.names import dotted

    chain = _assignment("x = self.model.encoder.layer\n").value
    call = _assignment("x = f().model\n").value
    assert dotted(chain) == dotted(chain) == "self.model.encoder.layer"
    assert dotted(chain.value) == "self.model.encoder"
    assert dotted(call) is None and dotted(call) is None
    assert dotted(_assignment("x = y\n").value) == "y"


@pytest.mark.parametrize(
    "call, housekeeping",
    [
        ("model.get_input_embeddings()", True),
        ('model.get_submodule("encoder.fc")', True),
        ("model.get_parameter(-1)", True),
        ("policy.get_action_logprob(state)", False),  # a getter handed a tensor computes from it
        ("agent.get_action_and_value(obs, None)", False),
        ("model.state_dict()", True),
        ("model.generate(x)", False),
    ],
)
def test_a_module_getter_runs_no_forward_unless_handed_a_computed_value(call: str, housekeeping: bool) -> None:
    from graphlint.model.names import is_module_housekeeping

    node = _assignment(f"x = {call}\n").value
    assert is_module_housekeeping(node.func.attr.value, node) is housekeeping
