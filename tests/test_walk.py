"""The model's own child lists must be exactly libcst's ``children`` without formatting, in the same order."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from graphlint.model.walk import FORMATTING, analysing, children

FIXTURES = sorted(Path(__file__).parent.parent.joinpath("fixtures").rglob("*.py"))

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
'''


def _pairs(module: cst.Module):
    stack = [module]
    while stack:
        node = stack.pop()
        meaningful = tuple(child for child in node.children if not isinstance(child, FORMATTING))
        yield node, meaningful
        stack.extend(node.children)


@pytest.mark.parametrize("source", [EXTRA] + [path.read_text(encoding="utf-8") for path in FIXTURES])
def test_children_match_libcst(source):
    module = cst.parse_module(source)
    with analysing():
        for node, expected in _pairs(module):
            got = children(node)
            assert [id(c) for c in got] == [id(c) for c in expected], type(node).__name__


def test_formatting_is_left_out():
    call = cst.parse_expression("f( a ,  # why\n  b=(c) )")
    with analysing():
        assert [type(child) for child in children(call)] == [cst.Name, cst.Arg, cst.Arg]
        keyword = children(call)[2]
        assert [type(child) for child in children(keyword)] == [cst.Name, cst.Name]
        line = cst.parse_statement("x = 1  # note\n")
        assert children(line) == (line.body[0],)  # no trailing comment, no newline
