"""Two cheap tests, run before any parse: can this file lead to a finding at all?

Parsing and building the model is by far the most expensive part
of a run, and most files of a real codebase (models, data, utilities) contain
no training loop. Every rule needs some event that is only ever recognised
from a spelling in the same file (graphlint never looks into other files): a
backward (GL001-GL003), an optimizer hyperparameter (GL004), a training or
evaluation loop (GL005).

1. ``may_have_findings`` searches the raw bytes for those spellings (a
   mention in a comment or a docstring still lets the file through). It runs
   on every file, in the main process, before the cache is consulted.
2. ``names_may_have_findings`` looks for the same spellings among the
   identifiers the code really spells (names, attributes, parameters,
   keywords, imports and definitions, gathered while the checker builds its
   tree from CPython's parse: graphlint/model/from_ast.py), so prose in
   docstrings and comments no longer counts. It runs in the checker, in the
   workers, on the files that passed the first test, before the model;
   ``may_have_findings_in_code`` runs it on bytes. A file that does not
   parse is kept (its GL000 comes from the checker).

A file dropped by either test is never analysed, but its syntax is still
checked: stage 2 parses every file it sees, and a file dropped by stage 1
is parsed too (``parses``, in the workers, under a millisecond per file,
its result cached like any other). A file that does not parse goes through
the single-file checker like a kept one, so every file that does not parse
is reported as GL000 with the parser's message and position.

The needles are deliberately wider than the recognisers: they may let a file
through needlessly, but must never drop one that has a finding.
tests/test_prefilter.py checks that over every fixture, and
``benchmarks/bench.py --check-prefilter`` over the corpus. When the analysis
learns a new spelling of an event, its needle belongs here.
"""

from __future__ import annotations

import re
import symtable
import warnings
from dataclasses import dataclass

from graphlint.finding import Finding


@dataclass(frozen=True)
class Spelling:
    """One way of writing an event, searched for in the raw bytes.

    The pattern starts with a literal word so that the regex engine can skip
    ahead with a fast substring search (a pattern starting with ``\\.`` would
    be tried at every dot of the file: ten times slower). Whether the word is
    an attribute (follows a dot) is checked afterwards at each hit.
    """

    pattern: bytes
    after_dot: bool = False
    # The word must not continue an identifier (`param_groups`, not `tied_param_groups`).
    starts_word: bool = False


@dataclass(frozen=True)
class Needle:
    """The spellings one rule cannot report without: in the bytes, and as identifiers of compiled code."""

    spellings: tuple[Spelling, ...]
    names: frozenset[str]  # identifiers, any of which lets the file through
    name_parts: tuple[str, ...] = ()  # substrings of identifiers (dotted import names)

    def __add__(self, other: "Needle") -> "Needle":
        spellings = self.spellings + tuple(s for s in other.spellings if s not in self.spellings)
        return Needle(spellings, self.names | other.names, self.name_parts + other.name_parts)


# A backward of RULES.md: `t.backward()`, `scaler.scale(t).backward()`,
# `accelerator.backward(t)`, `self.manual_backward(t)`, `optimizer.backward(t)`,
# `s.backward()` under `amp.scale_loss`, and a helper of the file doing one of
# these (its body spells it too); `torch.autograd.backward(t)` and
# `torch.autograd.grad(...)` are recognised through imports, and every import
# or attribute path that reaches them spells "autograd". Requiring the
# attribute form (after a dot, possibly split over lines) keeps prose such as
# "backward compatibility" from letting half of a codebase through.
_BACKWARD = Needle(
    (Spelling(rb"backward\b", after_dot=True), Spelling(rb"manual_backward\b", starts_word=True), Spelling(rb"autograd")),
    frozenset({"backward", "manual_backward"}),
    ("autograd",),
)

# An optimizer hyperparameter write: `opt.param_groups[i][k] = v`, `for g in
# opt.param_groups: g[k] = v` / `g.update(...)`, `opt.defaults[k] = v`.
_HYPERPARAMETER = Needle(
    (Spelling(rb"param_groups\b", starts_word=True), Spelling(rb"defaults\b", after_dot=True)),
    frozenset({"param_groups", "defaults"}),
)

# GL005 (a graph-bearing value accumulated across iterations) needs a loop
# that runs a backward (a training loop) or a forward outside any backward: an
# evaluation or prediction loop, which real code announces with `model.eval()`
# (or `model.train(False)`). A loop that only runs forwards with neither is a
# module's own forward pass (residual sums `x = x + layer(x)`, collected
# intermediate features), whose accumulated outputs are the objective the
# caller backwards, not retained history. `zero_grad` is kept as a sign of
# training code whose backward sits in a helper spelled elsewhere.
_TRAINING_OR_EVALUATION = _BACKWARD + Needle(
    (
        Spelling(rb"zero_grad"),
        Spelling(rb"eval[\s\\]*\(", after_dot=True),
        Spelling(rb"train[\s\\]*\(\s*(?:mode\s*=\s*)?False", after_dot=True),
    ),
    frozenset({"zero_grad", "eval", "train"}),
)

# GL001 (a second backward through a freed graph), GL002 (recurrent state in a
# loop that backwards every iteration) and GL003 (backward/zero_grad/step order:
# both of its shapes start at a backward) all need a backward.
# Every rule has an entry (tests/test_prefilter.py checks it against the rule
# registry); None means the rule may report on any file.
NEEDLES: dict[str, Needle | None] = {
    "GL001": _BACKWARD,
    "GL002": _BACKWARD,
    "GL003": _BACKWARD,
    "GL004": _HYPERPARAMETER,
    "GL005": _TRAINING_OR_EVALUATION,
}

# Codes that are not rules: GL000 reports unanalysable input, which the syntax
# check every file gets (kept or dropped) finds without any needle.
_NOT_RULES = frozenset({"GL000"})
_NOTHING = Needle((), frozenset())
# What may stand between a dot and an attribute name: spaces, newlines inside
# brackets, a backslash line continuation.
_BETWEEN_DOT_AND_NAME = b" \t\r\n\f\\"

_IDENTIFIER_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")

_combined: dict[frozenset[str] | None, tuple[Needle, list[tuple[re.Pattern[bytes], Spelling]]] | None] = {}


def may_have_findings(data: bytes, codes: frozenset[str] | None = None) -> bool:
    """Stage 1: False only when no rule in ``codes`` (None: all rules) can report anything on ``data``."""
    needle = _needle(codes)
    if needle is None:
        return True  # a selected rule has no needle: every file may matter
    for pattern, spelling in needle[1]:
        for hit in pattern.finditer(data):
            start = hit.start()
            if spelling.after_dot and not _follows_dot(data, start):
                continue
            if spelling.starts_word and start > 0 and data[start - 1] in _IDENTIFIER_BYTES:
                continue
            return True
    return False


def _follows_dot(data: bytes, position: int) -> bool:
    before = data[max(0, position - 64) : position].rstrip(_BETWEEN_DOT_AND_NAME)
    # A dot more than 64 bytes of whitespace away is not worth a false "no".
    return before.endswith(b".") or (position >= 64 and not before)


def may_have_findings_in_code(data: bytes, codes: frozenset[str] | None = None) -> bool:
    """Stage 2 on a file's bytes: like stage 1, but only identifiers of the code count."""
    if _needle(codes) is None:
        return True
    from graphlint.source import parse, read_text

    text = read_text(data, "<prefilter>")
    module = text if isinstance(text, Finding) else parse(text, "<prefilter>")
    return isinstance(module, Finding) or names_may_have_findings(module.names, codes)


def names_may_have_findings(names: frozenset[str], codes: frozenset[str] | None = None) -> bool:
    """Stage 2 on the identifiers the code spells (``syntax.Module.names``)."""
    needle = _needle(codes)
    if needle is None:
        return True
    wanted = needle[0]
    if names & wanted.names:
        return True
    return any(part in name for name in names for part in wanted.name_parts)


def parses(data: bytes) -> bool:
    """Whether CPython parses the file (the syntax check of a file stage 1 dropped).

    CPython's parser and symbol table, without the code generation of
    ``compile``: a third less CPU. What only code generation rejects (a
    ``return`` outside a function) is no GL000 for an analysed file either,
    whose tree comes from the same parser.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            symtable.symtable(data, "<prefilter>", "exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return False
    return True


def _needle(codes: frozenset[str] | None) -> tuple[Needle, re.Pattern[bytes]] | None:
    if codes not in _combined:
        needle = _combine(codes)
        _combined[codes] = (
            None
            if needle is None
            else (needle, [(re.compile(spelling.pattern), spelling) for spelling in needle.spellings])
        )
    return _combined[codes]


def _combine(codes: frozenset[str] | None) -> Needle | None:
    selected = sorted(NEEDLES) if codes is None else sorted(codes - _NOT_RULES)
    combined: Needle | None = None
    for code in selected:
        # A code without a needle (including one this table does not know) may match anything.
        needle = NEEDLES.get(code)
        if needle is None:
            return None
        combined = needle if combined is None else combined + needle
    # Nothing but GL000 selected: no rule runs, so no file needs parsing.
    return combined or _NOTHING
