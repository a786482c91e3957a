"""graphlint.model.positions gives libcst's PositionProvider ranges, statement by statement."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from graphlint.model.positions import Positions

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = sorted((ROOT / "fixtures").rglob("*.py"))

# Layouts that move lines and columns: CRLF and lone-CR newlines, tabs, a header
# comment, `;`-joined statements, one-line suites, backslash and bracket
# continuations, decorators, nested classes, no trailing newline.
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
}


def _assert_same(module: cst.Module) -> None:
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    positions = Positions(module)
    # Asked in reverse order: each node alone, not warmed up by its neighbours.
    for node, rng in reversed(list(expected.items())):
        assert node in positions
        assert positions[node] == rng, (type(node).__name__, positions[node], rng)


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_node_of_a_fixture_has_libcsts_position(path: Path) -> None:
    _assert_same(cst.parse_module(path.read_bytes()))


@pytest.mark.parametrize("name", sorted(ODD_SOURCES))
def test_every_node_of_an_odd_layout_has_libcsts_position(name: str) -> None:
    _assert_same(cst.parse_module(ODD_SOURCES[name]))


def test_a_node_of_another_tree_has_no_position() -> None:
    positions = Positions(cst.parse_module("x = 1\n"))
    assert cst.Name("x") not in positions
