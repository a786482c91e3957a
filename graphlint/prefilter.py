"""A byte-level test, run before any parse: can this file lead to a finding at all?

Parsing with libcst is by far the most expensive step of a run, and most files
of a real codebase (models, data, utilities) contain no training loop. Every
rule needs some event that is only ever recognised from a spelling in the
same file (graphlint never looks into other files): a backward (GL001-GL003),
an optimizer hyperparameter (GL004), a training or evaluation loop (GL005). A
file without any of those spellings is skipped without being parsed, so its
syntax errors are left to the other linters.

The needles are deliberately wider than the recognisers (a mention in a
comment or a docstring keeps the file): a needle may let a file through
needlessly, but must never drop one that has a finding. tests/test_prefilter.py
checks that over every fixture. When the analysis learns a new spelling of an
event, its needle belongs here.
"""

from __future__ import annotations

import re

# A backward of RULES.md: `t.backward()`, `scaler.scale(t).backward()`,
# `accelerator.backward(t)`, `self.manual_backward(t)`, `optimizer.backward(t)`,
# `s.backward()` under `amp.scale_loss`, and a helper of the file doing one of
# these (its body spells it too); `torch.autograd.backward(t)` and
# `torch.autograd.grad(...)` are recognised through imports, and every import
# or attribute path that reaches them spells "autograd". The attribute form
# (a dot, possibly split over lines) keeps prose such as "backward
# compatibility" from letting half of a codebase through.
_BACKWARD = rb"\.[\s\\]*(?:manual_)?backward\b|\bmanual_backward\b|autograd"

# An optimizer hyperparameter write: `opt.param_groups[i][k] = v`, `for g in
# opt.param_groups: g[k] = v` / `g.update(...)`, `opt.defaults[k] = v`.
_HYPERPARAMETER = rb"\bparam_groups\b|\.[\s\\]*defaults\b"

# GL005 (a graph-bearing value accumulated across iterations) needs a loop
# that runs a backward (a training loop) or a forward outside any backward: an
# evaluation or prediction loop, which real code announces with `model.eval()`
# (or `model.train(False)`). A loop that only runs forwards with neither is a
# module's own forward pass (residual sums `x = x + layer(x)`, collected
# intermediate features), whose accumulated outputs are the objective the
# caller backwards, not retained history. `zero_grad` is kept as a sign of
# training code whose backward sits in a helper spelled elsewhere.
_TRAINING_OR_EVALUATION = (
    _BACKWARD
    + rb"|zero_grad|\.[\s\\]*eval[\s\\]*\(|\.[\s\\]*train[\s\\]*\(\s*(?:mode\s*=\s*)?False"
)

# GL001 (a second backward through a freed graph), GL002 (recurrent state in a
# loop that backwards every iteration) and GL003 (backward/zero_grad/step order:
# both of its shapes start at a backward) all need a backward.
# Every rule has an entry (tests/test_prefilter.py checks it against the rule
# registry); None means the rule may report on any file.
NEEDLES: dict[str, bytes | None] = {
    "GL001": _BACKWARD,
    "GL002": _BACKWARD,
    "GL003": _BACKWARD,
    "GL004": _HYPERPARAMETER,
    "GL005": _TRAINING_OR_EVALUATION,
}

# Codes that are not rules: GL000 reports unanalysable input and is only ever
# produced for files that are analysed anyway.
_NOT_RULES = frozenset({"GL000"})

_compiled: dict[frozenset[str] | None, re.Pattern[bytes] | None] = {}


def may_have_findings(data: bytes, codes: frozenset[str] | None = None) -> bool:
    """False only when no rule in ``codes`` (None: all rules) can report anything on ``data``."""
    pattern = _pattern(codes)
    if pattern is None:
        return True  # a selected rule has no needle: every file may matter
    return pattern.search(data) is not None


def _pattern(codes: frozenset[str] | None) -> re.Pattern[bytes] | None:
    if codes not in _compiled:
        _compiled[codes] = _build(codes)
    return _compiled[codes]


def _build(codes: frozenset[str] | None) -> re.Pattern[bytes] | None:
    selected = sorted(NEEDLES) if codes is None else sorted(codes - _NOT_RULES)
    needles: list[bytes] = []
    for code in selected:
        # A code without a needle (including one this table does not know) may match anything.
        needle = NEEDLES.get(code)
        if needle is None:
            return None
        if needle not in needles:
            needles.append(needle)
    if not needles:
        # Nothing but GL000 selected: no rule runs, so no file needs parsing.
        return re.compile(rb"(?!)")
    return re.compile(b"|".join(needles))
