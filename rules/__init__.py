"""The rule registry: one module per rule, its docstring is the rule's documentation.

A rule module defines CODE, NAME, SUMMARY and ``check(model)``, which yields
``Diagnostic`` objects (a span and a message) by querying the shared
training-loop model; rules never walk the syntax tree themselves.
"""

from __future__ import annotations

from types import ModuleType

from graphlint.rules import (
    gl001_backward_through_freed_graph,
    gl002_hidden_state_not_detached,
    gl003_gradient_step_order,
    gl004_hyperparameter_from_loss,
    gl005_loss_history_retained,
)

ALL_RULES: tuple[ModuleType, ...] = (
    gl001_backward_through_freed_graph,
    gl002_hidden_state_not_detached,
    gl003_gradient_step_order,
    gl004_hyperparameter_from_loss,
    gl005_loss_history_retained,
)

RULES_BY_CODE: dict[str, ModuleType] = {rule.CODE: rule for rule in ALL_RULES}

# GL000 is not a rule module: it is how the checker reports input it cannot analyse.
GL000_NAME = "unanalysable-input"
GL000_SUMMARY = "The file could not be read, parsed or fully analysed."
ALL_CODES: tuple[str, ...] = ("GL000",) + tuple(RULES_BY_CODE)


def rule_doc(code: str) -> str:
    """The rule's documentation, taken from its module docstring."""
    rule = RULES_BY_CODE[code]
    return (rule.__doc__ or "").strip()


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
