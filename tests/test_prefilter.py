"""The prefilter must never drop a file that has a finding.

Two checks over every fixture, for both stages (bytes, compiled identifiers):
(1) each code a fixture expects is let through for that code alone and for
all rules; (2) every file the prefilter drops, for any selection, really has
no finding of the dropped codes when analysed (so a run with the prefilter on
equals a run with it off).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from graphlint.engine import Settings, run
from graphlint.prefilter import NEEDLES, may_have_findings, may_have_findings_in_code
from graphlint.rules import RULES_BY_CODE

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
FIXTURE_FILES = sorted(FIXTURES.rglob("*.py"))
_EXPECT = re.compile(r"#\s*expect:\s*([A-Z]+[0-9]+(?:\s*,\s*[A-Z]+[0-9]+)*)")


def expected_codes(path: Path) -> set[str]:
    codes: set[str] = set()
    for match in _EXPECT.finditer(path.read_text(encoding="utf-8")):
        codes.update(code.strip() for code in match.group(1).split(","))
    return codes


def test_every_rule_has_an_entry() -> None:
    # A new rule without a needle entry would be skipped on every file.
    assert set(NEEDLES) == set(RULES_BY_CODE)


def test_there_are_positive_fixtures_to_check() -> None:
    assert any(expected_codes(path) for path in FIXTURE_FILES)


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_expected_codes_pass_the_prefilter(path: Path) -> None:
    data = path.read_bytes()
    for code in expected_codes(path):
        for stage in (may_have_findings, may_have_findings_in_code):
            assert stage(data, frozenset({code})), f"{code} alone dropped by {stage.__name__}"
            assert stage(data, frozenset({code, "GL000"}))
            assert stage(data, None), f"dropped with every rule selected by {stage.__name__}"


def _selections() -> list[frozenset[str] | None]:
    return [None, *(frozenset({code}) for code in sorted(RULES_BY_CODE))]


def test_files_dropped_by_the_prefilter_have_no_findings() -> None:
    dropped: dict[Path, list[frozenset[str] | None]] = {}
    for path in FIXTURE_FILES:
        data = path.read_bytes()
        for codes in _selections():
            if not may_have_findings(data, codes) or not may_have_findings_in_code(data, codes):
                dropped.setdefault(path, []).append(codes)
    if not dropped:
        pytest.skip("the prefilter drops no fixture for any selection")
    # One analysis of every dropped file, with every rule and no prefilter.
    result = run(sorted(dropped), Settings(frozenset(RULES_BY_CODE) | {"GL000"}, cache=False, prefilter=False))
    wrongly_dropped = [
        (finding.path, finding.line, finding.code)
        for finding in result.findings
        for codes in dropped[Path(finding.path)]
        if codes is None or finding.code in codes
    ]
    assert not wrongly_dropped


@pytest.mark.parametrize(
    "source",
    [
        b"loss.backward()\n",
        b"loss . backward ( )\n",
        b"loss.\\\n    backward()\n",
        b"(loss\n  .backward())\n",
        b"scaler.scale(loss).backward()\n",
        b"accelerator.backward(loss)\n",
        b"self.manual_backward(loss)\n",
        b"grads = torch.autograd.grad(loss, params)\n",
        b"from torch.autograd import grad\ng = grad(loss, w)\n",
        b"import torch.autograd as ag\nag.backward(loss)\n",
        b"from torch import autograd\nautograd.grad(y, x)\n",
    ],
)
def test_every_backward_spelling_is_kept_for_backward_rules(source: bytes) -> None:
    for code in ("GL001", "GL002", "GL003", "GL005"):
        assert may_have_findings(source, frozenset({code}))
        assert may_have_findings_in_code(source, frozenset({code}))


@pytest.mark.parametrize(
    "source",
    [
        b"for g in opt.param_groups:\n    g['lr'] = loss\n",
        b"opt.param_groups[0]['lr'] = lr\n",
        b"opt.defaults['lr'] = x\n",
        b"groups = optimizer.param_groups\n",
    ],
)
def test_hyperparameter_spellings_are_kept_for_gl004(source: bytes) -> None:
    assert may_have_findings(source, frozenset({"GL004"}))
    assert may_have_findings_in_code(source, frozenset({"GL004"}))


@pytest.mark.parametrize(
    "source",
    [
        b"for x, y in loader:\n    loss = f(model(x), y)\n    loss.backward()\n    total += loss\n",
        b"model.eval()\nfor x in loader:\n    outs.append(model(x))\n",
        b"self.model . eval ()\n",
        b"net.train(False)\n",
        b"net.train(mode=False)\n",
        b"optimizer.zero_grad()\n",
    ],
)
def test_training_and_evaluation_loops_are_kept_for_gl005(source: bytes) -> None:
    assert may_have_findings(source, frozenset({"GL005"}))
    assert may_have_findings_in_code(source, frozenset({"GL005"}))


@pytest.mark.parametrize(
    "codes",
    [
        None,
        frozenset({"GL001"}),
        frozenset({"GL002"}),
        frozenset({"GL003"}),
        frozenset({"GL005"}),
        frozenset({"GL001", "GL004"}),
    ],
)
def test_files_without_any_spelling_are_dropped(codes: frozenset[str]) -> None:
    model_file = (
        b'"""A model: no training loop, kept backward compatible."""\n'
        b"import torch\n\n"
        b"class Net(torch.nn.Module):\n"
        b"    def forward(self, x):\n"
        b"        features = []\n"
        b"        for layer in self.layers:\n"
        b"            x = x + layer(x)\n"
        b"            features.append(x)\n"
        b"        return x, features\n"
    )
    assert not may_have_findings(model_file, codes)
    assert not may_have_findings_in_code(model_file, codes)


PROSE_ONLY = (
    b'"""Utilities. Call `loss.backward()` yourself; see torch.autograd and opt.param_groups."""\n'
    b"# model.eval() is the caller's business; zero_grad too\n"
    b"def helper(x):\n"
    b"    return x * 2  # no .backward() here\n"
)


def test_second_stage_ignores_docstrings_and_comments() -> None:
    assert may_have_findings(PROSE_ONLY)
    assert not may_have_findings_in_code(PROSE_ONLY)


@pytest.mark.parametrize(
    "source",
    [
        b"if False:\n    loss.backward()\n",
        b"while 0:\n    opt.param_groups[0]['lr'] = loss\n",
        b"if not __debug__:\n    model.eval()\n",
        b"def f():\n    return\n    loss.backward()\n",
        b"def f():\n    def g():\n        class C:\n            h = lambda: loss.backward()\n",
        b"def f(backward):\n    backward(loss)\n",
    ],
)
def test_second_stage_sees_names_in_unreachable_and_nested_code(source: bytes) -> None:
    assert may_have_findings_in_code(source)


@pytest.mark.parametrize(
    "source",
    [b"loss.backward(\n", b"x = '\x00'\x00\n", b"\xff\xfe not utf-8 .backward()", b"(" * 300 + b"loss.backward()" + b")" * 300],
)
def test_second_stage_keeps_what_does_not_parse(source: bytes) -> None:
    assert may_have_findings_in_code(source)


def test_second_stage_keeps_compile_warnings_quiet(recwarn: pytest.WarningsRecorder) -> None:
    assert may_have_findings_in_code(b"pattern = '\\d'\nloss.backward()\n")
    assert not [w for w in recwarn if issubclass(w.category, SyntaxWarning)]


@pytest.mark.parametrize(
    ("source", "kept"),
    [
        (b"tied_param_groups = find(model)\n", False),
        (b"from ._param_groups import group\n", False),
        (b"x = param_groups[0]\n", True),
        (b"self.my_manual_backward(loss)\n", False),
        (b"manual_backward(loss)\n", True),
        (b"the arg defaults to False\n", False),
        (b"x.defaults['lr'] = 1\n", True),
        (b"It runs forward and backward passes.\n", False),
        (b"model.training = False; evaluate(model)\n", False),
        (b"layers = eval(conv_spec)\n", False),  # the builtin, not a module's evaluation mode
        (b"obj.\\\n  eval()\n", True),
        (b"(obj\n   .train(False))\n", True),
    ],
)
def test_word_boundaries_and_attribute_positions(source: bytes, kept: bool) -> None:
    assert may_have_findings(source) is kept


def test_only_gl000_selected_needs_no_parse() -> None:
    assert not may_have_findings(b"loss.backward()\n", frozenset({"GL000"}))


def test_unknown_code_is_never_dropped() -> None:
    assert may_have_findings(b"x = 1\n", frozenset({"GL999"}))


def test_rule_without_needle_keeps_every_file() -> None:
    open_rules = [code for code, needle in NEEDLES.items() if needle is None]
    for code in open_rules:
        assert may_have_findings(b"x = 1\n", frozenset({code}))
