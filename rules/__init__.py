"""The rule registry: one module per rule, its docstring is the rule's documentation.

A rule module defines CODE, NAME, SUMMARY and ``check(model)``, which yields
``Diagnostic`` objects (a span and a message) by querying the shared
training-loop model; rules never walk the syntax tree themselves.

What the command line needs before any file is analysed (which codes exist,
their names and summaries, ``--select``/``--ignore``) comes from the static
table ``RULES`` below, so that a run that analyses nothing never imports the
rule modules, and with them the model. The modules are imported when a file is
analysed (``ALL_RULES``, ``RULES_BY_CODE``, both loaded on first use).
tests/test_rules_registry.py checks that the table says what the modules say:
the modules are the source of truth, and a rule added or renamed there fails
that test until its row here is updated.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import Any


@dataclass(frozen=True)
class RuleInfo:
    """What is known of a rule without importing it."""

    code: str
    name: str
    summary: str
    module: str  # within graphlint.rules

    def load(self) -> ModuleType:
        return importlib.import_module(f"{__name__}.{self.module}")


RULES: tuple[RuleInfo, ...] = (
    RuleInfo(
        "GL001",
        "backward-through-freed-graph",
        "Backward through a graph that an earlier backward already freed.",
        "gl001_backward_through_freed_graph",
    ),
    RuleInfo(
        "GL002",
        "hidden-state-not-detached",
        "Recurrent state carries the previous batch's graph into the next forward.",
        "gl002_hidden_state_not_detached",
    ),
    RuleInfo(
        "GL003",
        "gradient-step-order",
        "zero_grad/step/backward order clears gradients before a step or applies them twice.",
        "gl003_gradient_step_order",
    ),
    RuleInfo(
        "GL004",
        "hyperparameter-from-loss",
        "Optimizer hyperparameter assigned a value that carries an autograd graph.",
        "gl004_hyperparameter_from_loss",
    ),
    RuleInfo(
        "GL005",
        "loss-history-retained",
        "A loss with its graph is accumulated across iterations and kept alive.",
        "gl005_loss_history_retained",
    ),
)

RULE_INFO: dict[str, RuleInfo] = {rule.code: rule for rule in RULES}

# GL000 is not a rule module: it is how the checker reports input it cannot analyse.
GL000_NAME = "unanalysable-input"
GL000_SUMMARY = "The file could not be read, parsed or fully analysed."
ALL_CODES: tuple[str, ...] = ("GL000",) + tuple(RULE_INFO)


def __getattr__(name: str) -> Any:
    """``ALL_RULES`` and ``RULES_BY_CODE``: the rule modules, imported on first use."""
    if name == "ALL_RULES":
        value: Any = tuple(rule.load() for rule in RULES)
    elif name == "RULES_BY_CODE":
        value = {module.CODE: module for module in __getattr__("ALL_RULES")}
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def rule_name(code: str) -> str:
    """The rule's name (``unanalysable-input`` for GL000), or "" for an unknown code."""
    if code == "GL000":
        return GL000_NAME
    rule = RULE_INFO.get(code)
    return rule.name if rule is not None else ""


def rule_summary(code: str) -> str:
    if code == "GL000":
        return GL000_SUMMARY
    return RULE_INFO[code].summary


def rule_doc(code: str) -> str:
    """The rule's documentation: its module docstring.

    Read from the module's source when it has one, so that showing the
    documentation (``graphlint rule``, SARIF) does not import the analysis.
    """
    rule = RULE_INFO[code]
    qualified = f"{__name__}.{rule.module}"
    import sys

    module = sys.modules.get(qualified)
    if module is None:
        docstring = _docstring_from_source(qualified)
        if docstring is not None:
            return docstring.strip()
        module = rule.load()
    return (module.__doc__ or "").strip()


def _docstring_from_source(qualified: str) -> str | None:
    import ast
    import importlib.util

    try:
        spec = importlib.util.find_spec(qualified)
        source = spec.loader.get_source(qualified) if spec is not None and spec.loader is not None else None
    except (ImportError, AttributeError, OSError):
        return None
    if source is None:
        return None
    try:
        return ast.get_docstring(ast.parse(source), clean=False) or ""
    except (SyntaxError, ValueError):
        return None


def select_codes(select: list[str] | None, ignore: list[str] | None) -> frozenset[str]:
    """Resolve Ruff-style --select/--ignore lists (codes or prefixes) to a set of codes.

    GL000 (unanalysable input) stays selected unless explicitly ignored.
    """
    chosen = set(ALL_CODES)
    if select:
        chosen = {code for code in ALL_CODES if any(code.startswith(p) for p in select)}
        chosen.add("GL000")
    if ignore:
        chosen = {code for code in chosen if not any(code.startswith(p) for p in ignore)}
    return frozenset(chosen)
