"""Entry point of the model: build everything the rules query for one module."""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst
from libcst.metadata import MetadataWrapper, PositionProvider

from graphlint.model.gradorder import Violation, analyse_order
from graphlint.model.program import Program
from graphlint.model.walk import analysing
from graphlint.model.provenance import AnalysisBudgetExceeded, Facts, Interpreter, Site


@dataclass(frozen=True)
class Span:
    line: int
    col: int
    end_line: int
    end_col: int


@dataclass(frozen=True)
class Diagnostic:
    span: Span
    message: str


@dataclass
class ModuleModel:
    module: libcst.Module
    source: str
    program: Program
    facts: Facts
    sites: list[Site]
    positions: dict = field(default_factory=dict)
    order_violations: list[Violation] = field(default_factory=list)
    # Set to a human-readable reason when a work budget cut the analysis short.
    truncated: str | None = None

    def span(self, node: libcst.CSTNode) -> Span:
        rng = self.positions[node]
        return Span(rng.start.line, rng.start.column + 1, rng.end.line, rng.end.column + 1)

    def line(self, node: libcst.CSTNode) -> int:
        return self.positions[node].start.line

    def diagnostic(self, node: libcst.CSTNode, message: str) -> Diagnostic:
        return Diagnostic(self.span(node), message)

    def code(self, node: libcst.CSTNode) -> str:
        text = self.module.code_for_node(node).strip()
        return text if len(text) <= 60 else text[:57] + "..."

    def site_line(self, site_id: int) -> int:
        return self.line(self.sites[site_id].stmt)

    def carries_graph(self, origins, *, certain: bool = False, roots=frozenset()) -> bool:
        """Whether a value with these origins surely holds an autograd graph.

        Certain: built by a known module, from a tensor that requires grad, or
        backwarded somewhere. Otherwise (``certain=False``) a call of a model-like
        value is enough.
        """
        return any(self.origin_is_graph(o, certain=certain, roots=roots) for o in origins)

    def origin_is_graph(self, origin, *, certain: bool = False, roots=frozenset()) -> bool:
        if origin[0] < 0:
            return False  # a marker, not a site
        site = self.sites[origin[0]]
        if origin[0] in roots or site.strength >= 3:
            return True
        if certain:
            return origin[0] in self.facts.backwarded_sites and site.strength >= 2
        return site.strength >= 2


def build_model(module: libcst.Module, source: str, budget: int = 200_000) -> ModuleModel:
    with analysing():
        return _build_model(module, source, budget)


def _build_model(module: libcst.Module, source: str, budget: int) -> ModuleModel:
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    positions = wrapper.resolve(PositionProvider)
    program = Program(wrapper.module)
    interpreter = Interpreter(program, budget=budget)
    truncated = None
    try:
        # The module body first (scripts), then every function and method as an
        # entry point of its own (library code that nothing in the file calls).
        for scope in program.scopes.values():
            interpreter.analyse_scope(scope)
    except AnalysisBudgetExceeded as error:
        truncated = f"analysis cut short: {error}; findings for this file may be incomplete"
    order_violations = analyse_order(program, wrapper.module.code_for_node)
    return ModuleModel(
        module=wrapper.module,
        source=source,
        program=program,
        facts=interpreter.facts,
        sites=interpreter.sites,
        positions=dict(positions),
        truncated=truncated,
        order_violations=order_violations,
    )
