"""--confirm on fixed fixtures: the misuse the original shows is gone after the fix.

The ``# expect:`` markers travel with the fixed lines, so the same markers
name the flagged spots in both files: the original must be confirmed and the
fixed file must run through those lines without the misuse. A few runnable
fixtures only, one per kind of fix (the dynamic checker runs torch: slow).
"""

from __future__ import annotations

import importlib.util
import shutil

import pytest

from graphlint.dynamic import ConfirmOptions, confirm
from test_dynamic_markers import expected_findings
from test_fix import FIXTURES, expected_path

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="--confirm needs torch")

RUNNABLE = [
    "GL001/gan_generator_output_not_detached.py",
    "GL002/while_loop_char_rnn.py",
    "GL002/lstm_hc_tuple_explicit.py",
    "GL003/zero_grad_missing.py",
    "GL003/zero_grad_between_backward_and_step.py",
    "GL003/step_backward_zero_grad.py",
    "GL002/lstm_hidden_carried_no_cut.py",
    "GL005/losses_append.py",
    "GL004/lr_from_loss_param_groups.py",
    "GL005/total_plus_equals_loss.py",
]


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fixed")
    findings = []
    for name in RUNNABLE:
        original = FIXTURES / name
        fixed = folder / name.replace("/", "__")
        shutil.copyfile(expected_path(original), fixed)
        findings += [f.with_(extra={"which": "original", "name": name}) for f in expected_findings(original)]
        findings += [f.with_(extra={"which": "fixed", "name": name}) for f in expected_findings(fixed)]
    confirmed = confirm(findings, {}, ConfirmOptions(timeout=90))
    result: dict = {}
    for finding in confirmed:
        result.setdefault((finding.extra["name"], finding.extra["which"]), []).append(finding.confirmation)
    return result


@pytest.mark.parametrize("name", RUNNABLE)
def test_misuse_is_gone_after_the_fix(name, verdicts) -> None:
    assert [v.status for v in verdicts[(name, "original")]] == ["confirmed"], verdicts[(name, "original")]
    fixed = verdicts[(name, "fixed")]
    assert fixed and all(v.status == "not reproduced" for v in fixed), fixed
