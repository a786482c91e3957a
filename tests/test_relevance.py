"""Scopes the relevance test drops must not hide findings.

graphlint/model/relevance.py exists to save time: with it or without it
(every scope an entry point), every fixture must give the same findings.
It is stricter than the analysis only for GL005 without a backward (see its
docstring), where it may silence a clean fixture's false positive; the
expected findings of every fixture stay (tests/test_fixtures.py).
"""

from __future__ import annotations

from pathlib import Path

from graphlint.model.from_ast import parse_module
import pytest

from graphlint.checker import check_source
from graphlint.model import core
from graphlint.model.program import Program
from graphlint.model.callers import run_by_the_module_alone
from graphlint.model.relevance import Relevant, relevant_scopes, spell_scopes

FIXTURES = sorted(
    path for path in Path(__file__).parent.parent.joinpath("fixtures").rglob("*.py") if not path.name.endswith(".fixed.py")
)


def _every_scope(program: Program, spelled) -> Relevant:
    return Relevant(frozenset(program.scopes), frozenset(program.scopes))


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: str(p.relative_to(p.parent.parent)))
def test_dropping_irrelevant_scopes_changes_no_finding(path: Path, monkeypatch) -> None:
    source = path.read_bytes()
    with_relevance = check_source(source, str(path))
    monkeypatch.setattr(core, "relevant_scopes", _every_scope)
    without = check_source(source, str(path))
    if path.parent.name == "clean":
        assert [f for f in with_relevance if f not in without] == []
        assert [f for f in without if f not in with_relevance and f.code != "GL005"] == []
    else:
        assert without == with_relevance


def _relevant_keys(source: str) -> tuple[set[str], set[str]]:
    program = Program(parse_module(source))
    relevant = relevant_scopes(program, spell_scopes(program))
    keys = {node: scope.key for node, scope in program.scopes.items()}
    return {keys[n] for n in relevant.provenance}, {keys[n] for n in relevant.order}


def test_library_code_without_triggers_is_not_analysed() -> None:
    provenance, order = _relevant_keys(
        "class Parser:\n"
        "    def __init__(self):\n"
        "        self.defaults = {}\n"
        "    def feed(self, text):\n"
        "        out = ''\n"
        "        for ch in text:\n"
        "            out += self.step(ch)\n"
        "        return out\n"
    )
    assert provenance == set()
    assert order == set()  # a `step`, but no backward whose gradients it could apply


def test_the_order_is_analysed_where_a_step_and_a_backward_are_both_reached() -> None:
    _, order = _relevant_keys(
        "def backward_g(loss):\n"
        "    loss.backward()\n"
        "def update(opt):\n"
        "    opt.step()\n"
        "    opt.zero_grad()\n"
        "def train(model, opt, x):\n"
        "    backward_g(model(x).sum())\n"
        "    update(opt)\n"
        "def evaluate(model, opt, x):\n"
        "    opt.zero_grad()\n"
        "    return backward_g(model(x).sum())\n"
    )
    assert order == {"train"}


def test_callers_of_a_helper_with_a_backward_are_analysed() -> None:
    provenance, _ = _relevant_keys(
        "def backward_g(loss):\n"
        "    loss.backward()\n"
        "def train_step(model, x):\n"
        "    backward_g(model(x).sum())\n"
        "def unrelated(a):\n"
        "    return a + 1\n"
    )
    assert provenance == {"backward_g", "train_step"}


def test_a_constructor_with_a_trigger_makes_its_class_callers_relevant() -> None:
    provenance, _ = _relevant_keys(
        "class Tuner:\n"
        "    def __init__(self, opt):\n"
        "        for g in opt.param_groups:\n"
        "            g['lr'] = 0.1\n"
        "def build(opt):\n"
        "    return Tuner(opt)\n"
        "def other():\n"
        "    return 1\n"
    )
    assert provenance == {"Tuner.__init__", "build"}


def test_an_evaluation_loop_accumulating_module_outputs_is_analysed() -> None:
    provenance, _ = _relevant_keys(
        "import torch\n"
        "def evaluate(model, batches):\n"
        "    total = 0\n"
        "    for x in batches:\n"
        "        total += model(x).sum()\n"
        "    return total\n"
        "def main():\n"
        "    model = torch.nn.Linear(2, 1)\n"
        "    model.eval()\n"
        "    print(evaluate(model, []))\n"
    )
    assert "main" in provenance


def test_a_forward_collecting_outputs_is_not_analysed_apart_from_training_code() -> None:
    # The file trains (`zero_grad`), but the forward's own loop over layers is
    # no training or evaluation loop: it is analysed only inside its callers.
    provenance, _ = _relevant_keys(
        "import torch\n"
        "class Stack(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.proj = torch.nn.Linear(2, 2)\n"
        "    def forward(self, x, depth=3):\n"
        "        outs = []\n"
        "        for _ in range(depth):\n"
        "            x = self.proj(x)\n"
        "            outs.append(x)\n"
        "        return x, outs\n"
        "def fit(model, opt, batches):\n"
        "    for x in batches:\n"
        "        opt.zero_grad()\n"
        "        out, _ = model(x)\n"
        "        opt.step()\n"
    )
    assert "Stack.forward" not in provenance
    assert "fit" in provenance


def test_an_evaluation_helper_switched_by_its_caller_is_analysed_in_the_caller() -> None:
    provenance, _ = _relevant_keys(
        "import torch\n"
        "def validate(model, batches):\n"
        "    total = 0\n"
        "    for x in batches:\n"
        "        total += model(x).sum()\n"
        "    return total\n"
        "def main():\n"
        "    model = torch.nn.Linear(2, 1)\n"
        "    model.eval()\n"
        "    print(validate(model, []))\n"
    )
    assert "main" in provenance
    assert "validate" not in provenance  # no mode switch of its own: its caller's


def _no_main_is_covered(program, spelled) -> frozenset:
    return frozenset()


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: str(p.relative_to(p.parent.parent)))
def test_a_main_analysed_only_inside_the_module_body_changes_no_finding(path: Path, monkeypatch) -> None:
    source = path.read_bytes()
    covered = check_source(source, str(path))
    monkeypatch.setattr(core, "run_by_the_module_alone", _no_main_is_covered)
    assert check_source(source, str(path)) == covered


def _covered_keys(source: str) -> set[str]:
    program = Program(parse_module(source))
    return {program.scopes[node].key for node in run_by_the_module_alone(program, spell_scopes(program))}


_SCRIPT = (
    "import torch\n"
    "def helper(model):\n"
    "    return model\n"
    "def main():\n"
    "    model = torch.nn.Linear(2, 1)\n"
    "    helper(model)(torch.ones(2)).sum().backward()\n"
)


def test_a_script_main_called_by_the_module_body_is_covered() -> None:
    assert _covered_keys(_SCRIPT + "if __name__ == '__main__':\n    main()\n") == {"main"}


@pytest.mark.parametrize("tail", [
    "def main2(n):\n    main()\nif __name__ == '__main__':\n    main()\n",  # another function calls it too
    "import threading\nthreading.Thread(target=main).start()\n",  # handed on, not called here
    "if __name__ == '__main__':\n    main()\n    run = main\n",  # also referenced
])
def test_a_main_used_elsewhere_keeps_its_own_analysis(tail: str) -> None:
    assert _covered_keys(_SCRIPT + tail) == set()


def test_a_function_with_parameters_keeps_its_own_analysis() -> None:
    source = _SCRIPT.replace("def main():", "def main(lr=0.1):") + "main()\n"
    assert _covered_keys(source) == set()
