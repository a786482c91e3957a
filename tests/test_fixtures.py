"""Every fixture's findings are exactly the ones its `# expect: GL00x` comments name."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import pytest

from graphlint.checker import check_source

ROOT = Path(__file__).resolve().parent.parent
# `*.fixed.py` files are autofix expectations, checked by the fix tests.
FIXTURES = sorted(p for p in (ROOT / "fixtures").rglob("*.py") if not p.name.endswith(".fixed.py"))
_EXPECT = re.compile(r"expect:\s*((?:GL\d{3}\s*,?\s*)+)")

# Shapes the analysis does not get right yet. Strict: when one starts passing, the
# test fails until it is removed from this list, so the list cannot go stale.
KNOWN_GAPS = {
    "clean/gl001_forward_returns_own_parameter.py": "false positive: a call of a module of the file is a node of "
        "its own even when its forward only returns its Parameter (`return canvas(), optimizer`), so the loop frees it; "
        "dropping that node broke recurrent-state detection, which relies on the call's own node (out, h = rnn(x, h))",
    "clean/gl005_block_outputs_kept_on_self.py": "false positive: one forward's block outputs kept on self "
        "(reset at the top of forward) taken for history",
    "clean/gl001_bracket_alias_of_a_loss_recomputed_each_iteration.py": "false positive: the loss computed "
        "before the loop joins, at the loop header, the later iterations' states where an alias keeps the freed "
        "graph referenced; peeling every loop's first iteration fixes it but broke flag correlation elsewhere",
}


def expected(source: str) -> set[tuple[int, str]]:
    found = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            match = _EXPECT.search(token.string)
            if match:
                for code in re.findall(r"GL\d{3}", match.group(1)):
                    found.add((token.start[0], code))
    return found


def _id(path: Path) -> str:
    return path.relative_to(ROOT / "fixtures").as_posix()


@pytest.mark.parametrize("path", FIXTURES, ids=_id)
def test_fixture(path: Path, request) -> None:
    gap = KNOWN_GAPS.get(_id(path))
    if gap:
        request.applymarker(pytest.mark.xfail(reason=gap, strict=True))
    source = path.read_text(encoding="utf-8")
    findings = check_source(source, str(path))
    actual = {(f.line, f.code) for f in findings}
    want = expected(source)
    if path.parent.name == "clean":
        assert not want, "clean fixtures must not expect findings"
    lines = source.splitlines()
    report = "\n".join(
        f"  {'missing' if item in want else 'unexpected'} {item[1]} at line {item[0]}: {lines[item[0] - 1].strip()}"
        + "".join(f"\n      {f.message}" for f in findings if (f.line, f.code) == item)
        for item in sorted(want ^ actual)
    )
    assert actual == want, f"{_id(path)}: expected vs actual differ\n{report}"


def test_there_are_fixtures_for_every_rule() -> None:
    for code in ("GL001", "GL002", "GL003", "GL004", "GL005"):
        assert list((ROOT / "fixtures" / code).glob("*.py")), code
    assert list((ROOT / "fixtures" / "clean").glob("*.py"))


@pytest.mark.parametrize("path", sorted((ROOT / "fixtures" / "GL002").glob("*.py")), ids=_id)
def test_gl002_names_retain_graph_only_where_the_code_spells_it(path: Path) -> None:
    """A state the backward does not free is "kept alive by retain_graph=True" only when
    a backward says so; a graph reached through a container element is merely not known
    to be freed (state_in_dict_per_layer: the second backward raises)."""
    source = path.read_text(encoding="utf-8")
    for finding in check_source(source, str(path)):
        if finding.code == "GL002" and "retain_graph" not in source and "create_graph" not in source:
            assert "retain_graph" not in finding.message, finding.message
