"""Entry point of the model: build everything the rules query for one module."""

from __future__ import annotations

from dataclasses import dataclass, field

from graphlint.model import syntax as cst

from graphlint.model.callers import in_file_callers, only_called_without_grad, parameter_classes, run_by_the_module_alone
from graphlint.model.gradorder import Violation, analyse_order
from graphlint.model.positions import Positions
from graphlint.model.program import Program
from graphlint.model.relevance import Relevant, relevant_scopes, spell_scopes
from graphlint.model.provenance import CERTAIN, ELEMENT, LIKELY, NEW, OLDEST, OUTER, AnalysisBudgetExceeded, Facts, Interpreter, Site


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
    module: cst.Module
    source: str
    program: Program
    facts: Facts
    sites: list[Site]
    positions: Positions
    order_violations: list[Violation] = field(default_factory=list)
    interpreter: Interpreter | None = None
    # Set to a human-readable reason when a work budget cut the analysis short.
    truncated: str | None = None
    _functions: list | None = field(default=None, repr=False)  # see function_at

    def span(self, node: cst.CSTNode) -> Span:
        rng = self.positions[node]
        return Span(rng.start.line, rng.start.column + 1, rng.end.line, rng.end.column + 1)

    def line(self, node: cst.CSTNode) -> int:
        return self.positions[node].start.line

    def diagnostic(self, node: cst.CSTNode, message: str) -> Diagnostic:
        return Diagnostic(self.span(node), message)

    def graphs_at(self, line: int, name: str) -> set[int]:
        """Lines of the statements whose graphs ``name`` may carry just before ``line`` runs.

        Needs the model built with ``watch_lines`` containing ``line``.
        """
        found: set[int] = set()
        for node_id, states in self.interpreter.snapshots.items():
            for state in states:
                for path, value in state.env.items():
                    if path == name or path.endswith(":" + name):
                        found.update(self.site_line(o[0]) for o in value if self.origin_is_graph(o))
        return found

    def summary(self, name: str):
        """The summary of a helper: ``fn`` or ``Class.method`` of this module."""
        cls_name, _, method = name.rpartition(".")
        func = self.program.classes[cls_name].methods[method] if cls_name else self.program.functions[name]
        return Interpreter(self.program).summarise(func)

    def code(self, node: cst.CSTNode) -> str:
        text = self.module.code_for_node(node).strip()
        return text if len(text) <= 60 else text[:57] + "..."

    def of_an_unknown_iteration(self, origin, loop) -> bool:
        """A node labelled OUTER (or OLDEST, see below) of a site in a loop nested inside ``loop``.

        The label means "an earlier iteration of a loop around the site's own":
        for `for epoch: for layer: for part: node = ...`, both the previous
        layer of this epoch and any layer of the previous epoch. A backward in
        the epoch loop cannot tell from it whether it meets its own graph or the
        one it freed the epoch before. When ``loop`` directly holds the site's
        own loop (`for episode: for t: saved.append(policy(s))`), the label can
        only mean an earlier iteration of ``loop``: that is known.
        """
        if loop is None or origin[0] < 0:
            return False
        site = self.sites[origin[0]]
        if origin[1] == OLDEST and loop in site.loops:
            # The oldest label merges every execution three or more back: when the site
            # also runs in a loop nested in ``loop`` (an A2C rollout's forward, called
            # again after the rollout), that is this iteration's rollout as much as an
            # earlier iteration's graph.
            return any(loop in chain and chain.index(loop) < len(chain) - 1 for chain in site.loop_chains)
        if origin[1] != OUTER or loop not in site.loops or loop in site.innermost:
            return False
        return not site.loop_chains or any(
            loop in chain and len(chain) - chain.index(loop) > 2 for chain in site.loop_chains
        )

    def function_at(self, line: int) -> cst.CSTNode | None:
        """The innermost function of the file whose lines hold ``line`` (None: module level)."""
        if self._functions is None:
            spans = []
            for node in self.program.scopes:
                if type(node) is cst.FunctionDef and node in self.positions:
                    rng = self.positions[node]
                    spans.append((rng.end.line - rng.start.line, rng.start.line, rng.end.line, node))
            self._functions = sorted(spans, key=lambda span: span[0])  # innermost (shortest) first
        return next((node for _, start, end, node in self._functions if start <= line <= end), None)

    def nearest(self, items, line: int, site=lambda item: item):
        """The item to name in a message about ``line``: one whose site (``site(item)``)
        lies in the function holding ``line`` first (the call ``fake = netG(z)``, not a
        line of the generator's forward), then the first line."""
        here = self.function_at(line)
        return min(items, key=lambda item: (self.function_at(self.site_line(site(item))) is not here, self.site_line(site(item))))

    def site_line(self, site_id: int) -> int:
        return self.line(self.sites[site_id].stmt)

    # Markers in a value that are no graph of their own: "a node is made here" (NEW).
    markers_without_graph = frozenset({NEW})

    @staticmethod
    def one_element_of_many(origins) -> bool:
        """Whether the value was read as one element of a container (``queue.pop()``,
        ``outputs[i]``, ``for loss in losses``): it holds the graph of one of them, unknown which."""
        return ELEMENT in origins

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
        # Never below LIKELY: Interpreter._may_be_reported relies on it.
        if (origin[0] in roots and site.strength >= LIKELY) or site.strength >= CERTAIN:
            # (A root is read by the backward itself; a weak guess, what an unknown
            # package's function returned for graph-free inputs, is no graph even then.)
            return True
        if certain:
            return origin[0] in self.facts.backwarded_sites and site.strength >= LIKELY
        return site.strength >= LIKELY


# Per-file work bounds: a pathological file becomes a GL000 "cut short", never a hang.
# The step budget is deterministic (same file, same findings, whatever the load);
# the CPU-time bound is only a safety net well above it.
DEFAULT_STEPS = 200_000
DEFAULT_SECONDS = 20.0


def build_model(
    module: cst.Module,
    source: str,
    budget: int = DEFAULT_STEPS,
    watch_lines: frozenset[int] = frozenset(),
    seconds: float | None = DEFAULT_SECONDS,
) -> ModuleModel:
    """Analyse a module. ``watch_lines``: statements whose states ``graphs_at`` can answer for."""
    positions = Positions(module)
    program = Program(module)
    interpreter = Interpreter(program, budget=budget, seconds=seconds)
    if watch_lines:
        interpreter.watch = {
            id(node) for node, rng in positions.items()
            if rng.start.line in watch_lines and isinstance(node, (cst.BaseSmallStatement, cst.BaseCompoundStatement))
        }
    other_framework = program.uses_other_framework()
    spelled = {} if other_framework else spell_scopes(program)
    if other_framework:
        relevant = None
    elif watch_lines:
        # Queries (tests) may ask about any scope, trigger or not.
        relevant = Relevant(frozenset(program.scopes), frozenset(program.scopes))
    else:
        relevant = relevant_scopes(program, spelled)
    truncated = None
    callers = {} if other_framework else in_file_callers(program, spelled)
    quiet = only_called_without_grad(program, callers) if not other_framework else frozenset()
    if not other_framework:
        for (scope_key, param), class_name in parameter_classes(program, spelled).items():
            for kind in program.instance_kinds(class_name):
                program.add_kind(scope_key, param, kind)
    # A script's `main()`, analysed inside the module body that calls it.
    covered = frozenset() if other_framework or watch_lines else run_by_the_module_alone(program, spelled)
    entries = [] if other_framework else [
        scope for scope in program.scopes.values() if scope.node in relevant.provenance and scope.node not in covered
    ]
    # The module body first (scripts), then every function and method as an entry
    # point of its own (library code that nothing in the file calls), those the file
    # may call last: one its caller's analysis already ran, as that caller runs it,
    # is not analysed again (see Interpreter.analysed_inside).
    entries.sort(key=lambda scope: scope.node in callers)
    try:
        for scope in entries:
            if scope.node not in interpreter.analysed_inside:
                interpreter.analyse_scope(scope, no_grad=scope.node in quiet)
        interpreter.finish()
    except AnalysisBudgetExceeded as error:
        truncated = f"analysis cut short: {error}; findings for this file may be incomplete"
        interpreter.finish(cut_short=True)
    order_violations = [] if other_framework else analyse_order(
        program,
        module.code_for_node,
        lambda node: positions[node].start.line if node in positions else 0,
        relevant.order - covered,
    )
    return ModuleModel(
        module=module,
        source=source,
        program=program,
        facts=interpreter.facts,
        sites=interpreter.sites,
        positions=positions,
        truncated=truncated,
        order_violations=order_violations,
        interpreter=interpreter,
    )
