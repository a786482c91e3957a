"""Rewrite a copy of the user's module so the probes can watch and bound it.

The user's file is never touched: we parse its source, insert calls to the
probe object (a global named ``_gl_probe`` injected into the module namespace)
and compile the tree under the file's real name. Inserted nodes carry the line
of the statement they belong to, so frames, tracebacks and events still point
at the user's own lines.

What gets inserted:
- every loop: an activation object and, at the top of its body, a ``tick()``
  that may ``break`` the loop once the flagged lines ran often enough;
- every flagged statement: ``before``/``after`` hooks (the after hook receives
  the accumulator's value for GL005), and for GL002 each call's result passes
  through ``forward`` so its graph can be inspected;
- statements of the flagged loops that touch gradients (backward, step,
  zero_grad, detach...): a ``mark`` so that "not reproduced" can require every
  such line to have run at least once;
- functions holding flagged statements: a ``scope_enter`` so we know whether
  anything called them (if nothing did, stand-ins drive them).

Standard library only, and kept to the ``ast`` API of Python 3.8+.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass, field

PROBE = "_gl_probe"

LOOPS = (ast.For, ast.AsyncFor, ast.While)
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
COMPOUND = (
    ast.For, ast.AsyncFor, ast.While, ast.If, ast.With, ast.AsyncWith, ast.Try,
    ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
) + ((ast.TryStar,) if hasattr(ast, "TryStar") else ()) + ((ast.Match,) if hasattr(ast, "Match") else ())
TERMINAL = (ast.Return, ast.Raise, ast.Break, ast.Continue)

# A statement of a flagged loop whose text contains one of these touches the
# gradient bookkeeping; if it never ran, the run did not explore every path.
RELEVANT_WORDS = (
    "backward", "step(", "zero_grad", "detach", ".grad", "param_groups",
    "retain_graph", "no_grad", "inference_mode", "repackage", "init_hidden",
)


@dataclass
class Site:
    """A flagged statement: the span events are matched against and its findings."""

    sid: int
    line: int
    end_line: int
    findings: list = field(default_factory=list)
    codes: set = field(default_factory=set)
    accumulator: str | None = None
    terminal: bool = False


@dataclass
class Target:
    """One finding located in the code."""

    index: int
    code: str
    line: int
    sid: int | None = None
    problem: str | None = None
    context_loop: int | None = None
    outer_loop: int | None = None
    loops: list = field(default_factory=list)  # enclosing loops of the function, innermost first
    function: int | None = None


@dataclass
class LoopSite:
    lid: int
    line: int
    function: int | None
    marks: list = field(default_factory=list)
    targets: list = field(default_factory=list)


@dataclass
class FunctionSite:
    fid: int
    name: str
    qualpath: list
    line: int
    kind: str  # "function", "method" or "nested"


@dataclass
class MarkSite:
    mid: int
    line: int
    text: str


@dataclass
class Plan:
    code: object
    sites: dict
    targets: dict
    loops: dict
    functions: dict
    marks: dict


class PlanError(Exception):
    """The source cannot be instrumented (syntax error for this interpreter...)."""


def build_plan(source: str, filename: str, findings: list) -> Plan:
    """Instrument ``source`` for ``findings`` (dicts with index, code, line)."""
    old_limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old_limit, 20_000))
    try:
        try:
            return _build(source, filename, findings, guard_loops=True)
        except _TooManyBlocks:
            # Python allows 20 nested blocks; the try around each loop doubles them.
            return _build(source, filename, findings, guard_loops=False)
    finally:
        sys.setrecursionlimit(old_limit)


class _TooManyBlocks(Exception):
    pass


def _build(source: str, filename: str, findings: list, guard_loops: bool) -> Plan:
    try:
        tree = ast.parse(source, filename)
    except SyntaxError as error:
        raise PlanError(f"the child's Python cannot parse the file: {error.msg} (line {error.lineno})") from None
    except (ValueError, MemoryError, RecursionError) as error:
        raise PlanError(f"the child's Python cannot parse the file: {error}") from None
    _link_parents(tree)
    planner = _Planner(source, tree)
    planner.locate(findings)
    rewriter = _Rewriter(planner, guard_loops)
    try:
        tree = rewriter.visit(tree)
    except RecursionError:
        raise PlanError("the file is nested too deeply to instrument") from None
    ast.fix_missing_locations(tree)
    try:
        code = compile(tree, filename, "exec", dont_inherit=True)
    except SyntaxError as error:
        if guard_loops and "statically nested blocks" in str(error):
            raise _TooManyBlocks() from None
        raise PlanError(f"cannot compile the instrumented copy: {error}") from None
    except (ValueError, TypeError, RecursionError, MemoryError) as error:
        raise PlanError(f"cannot compile the instrumented copy: {error}") from None
    return Plan(code, planner.sites, planner.targets, planner.loops, planner.functions, planner.marks)


def _link_parents(tree: ast.AST) -> None:
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            child._gl_parent = node  # type: ignore[attr-defined]


def _parents(node: ast.AST):
    node = getattr(node, "_gl_parent", None)
    while node is not None:
        yield node
        node = getattr(node, "_gl_parent", None)


def _header_end(stmt: ast.stmt) -> int:
    """Last line of a statement's own text (for compound ones, the header)."""
    if isinstance(stmt, COMPOUND):
        body = getattr(stmt, "body", None)
        if body and isinstance(body, list) and hasattr(body[0], "lineno"):
            return max(stmt.lineno, body[0].lineno - 1)
        return stmt.lineno
    return getattr(stmt, "end_lineno", None) or stmt.lineno


def accumulator_of(stmt: ast.stmt) -> ast.expr | None:
    """The expression that holds what a statement accumulates into (GL005)."""
    if isinstance(stmt, ast.AugAssign):
        return stmt.target
    if isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
        return stmt.target
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        target = stmt.targets[0]
        # `losses[i] = loss`: the container holds every slot written (a new slot per
        # iteration reads no graph of its own before it is written).
        return target.value if isinstance(target, ast.Subscript) else target
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        func = stmt.value.func
        if isinstance(func, ast.Attribute):
            receiver = func.value
            # `smooth.mul_(0.98).add_(loss)`: the tensor itself (reading the chain again would run it).
            while isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Attribute) and receiver.func.attr.endswith("_"):
                receiver = receiver.func.value
            return receiver
    return None


class _Planner:
    def __init__(self, source: str, tree: ast.Module) -> None:
        self.source = source
        self.tree = tree
        self.sites: dict[int, Site] = {}
        self.site_of_stmt: dict[int, Site] = {}
        self.targets: dict[int, Target] = {}
        self.loops: dict[int, LoopSite] = {}
        self.loop_id: dict[int, int] = {}
        self.functions: dict[int, FunctionSite] = {}
        self.function_id: dict[int, int] = {}
        self.marks: dict[int, MarkSite] = {}
        self.mark_of_stmt: dict[int, int] = {}
        self.statements = [node for node in ast.walk(tree) if isinstance(node, ast.stmt)]
        self.preamble = set()
        for position, node in enumerate(tree.body):
            if (position == 0 and _is_docstring(node)) or (
                isinstance(node, ast.ImportFrom) and node.module == "__future__"
            ):
                self.preamble.add(id(node))
            else:
                break
        self.depth = {}
        for node in self.statements:
            parent = getattr(node, "_gl_parent", None)
            while parent is not None and not isinstance(parent, ast.stmt):
                parent = getattr(parent, "_gl_parent", None)
            self.depth[id(node)] = self.depth.get(id(parent), 0) + 1 if parent is not None else 1
        for node in ast.walk(tree):
            if isinstance(node, LOOPS):
                lid = len(self.loops) + 1
                self.loop_id[id(node)] = lid
                function = self._function_of(node)
                self.loops[lid] = LoopSite(lid, node.lineno, function)

    def _function_of(self, node: ast.AST) -> int | None:
        for parent in _parents(node):
            if isinstance(parent, FUNCTIONS):
                return self._function_site(parent)
            if isinstance(parent, ast.ClassDef):
                return None
        return None

    def _function_site(self, func: ast.AST) -> int:
        key = id(func)
        if key in self.function_id:
            return self.function_id[key]
        fid = len(self.functions) + 1
        path = [func.name]
        for parent in _parents(func):
            if isinstance(parent, (ast.ClassDef,) + FUNCTIONS):
                path.insert(0, parent.name)
        holder = getattr(func, "_gl_parent", None)
        if isinstance(holder, ast.Module):
            kind = "function"
        elif isinstance(holder, ast.ClassDef) and isinstance(getattr(holder, "_gl_parent", None), ast.Module):
            kind = "method"
        else:
            kind = "nested"
        self.functions[fid] = FunctionSite(fid, func.name, path, func.lineno, kind)
        self.function_id[key] = fid
        func._gl_fid = fid  # type: ignore[attr-defined]
        return fid

    def statement_at(self, line: int) -> ast.stmt | None:
        best = None
        best_depth = -1
        for stmt in self.statements:
            end = getattr(stmt, "end_lineno", None) or stmt.lineno
            if stmt.lineno <= line <= end:
                depth = self.depth[id(stmt)]
                if depth > best_depth:
                    best, best_depth = stmt, depth
        if best is None:
            return None
        if isinstance(best, COMPOUND) and line > _header_end(best):
            return None  # a blank or comment line inside a block
        return best

    def locate(self, findings: list) -> None:
        for item in findings:
            index, code, line = int(item["index"]), str(item["code"]), int(item["line"])
            target = Target(index, code, line)
            self.targets[index] = target
            stmt = self.statement_at(line)
            if stmt is None:
                target.problem = f"line {line} holds no statement"
                continue
            if id(stmt) in self.preamble:
                target.problem = f"line {line} is the module's docstring or a __future__ import"
                continue
            site = self.site_of_stmt.get(id(stmt))
            if site is None:
                sid = len(self.sites) + 1
                site = Site(sid, stmt.lineno, _header_end(stmt), terminal=isinstance(stmt, TERMINAL))
                self.sites[sid] = site
                self.site_of_stmt[id(stmt)] = site
            site.findings.append(index)
            site.codes.add(code)
            if code in ("GL004", "GL005") and site.accumulator is None:
                acc = accumulator_of(stmt)
                if acc is not None:
                    site.accumulator = ast.get_source_segment(self.source, acc) or "accumulator"
            target.sid = site.sid
            loops = []
            for parent in _parents(stmt):
                if isinstance(parent, LOOPS):
                    loops.append(self.loop_id[id(parent)])
                if isinstance(parent, FUNCTIONS):
                    target.function = self._function_site(parent)
                    break
                if isinstance(parent, (ast.ClassDef, ast.Lambda)):
                    break
            target.loops = loops
            if loops:
                target.context_loop = loops[0]
                target.outer_loop = loops[-1]
                for lid in loops:
                    self.loops[lid].targets.append(index)
        self._plan_marks()

    def _plan_marks(self) -> None:
        outer = {t.outer_loop for t in self.targets.values() if t.outer_loop is not None}
        if not outer:
            return
        loop_nodes = {self.loop_id[id(n)]: n for n in ast.walk(self.tree) if isinstance(n, LOOPS)}
        for lid in sorted(outer):
            for node in ast.walk(loop_nodes[lid]):
                if not isinstance(node, ast.stmt) or isinstance(node, COMPOUND):
                    continue
                scopes = FUNCTIONS + (ast.ClassDef, ast.Lambda)
                if any(isinstance(p, scopes) for p in self._parents_until(node, loop_nodes[lid])):
                    continue
                text = ast.get_source_segment(self.source, node) or ""
                if not any(word in text for word in RELEVANT_WORDS):
                    continue
                mid = self.mark_of_stmt.get(id(node))
                if mid is None:
                    mid = len(self.marks) + 1
                    self.mark_of_stmt[id(node)] = mid
                    self.marks[mid] = MarkSite(mid, node.lineno, " ".join(text.split())[:60])
                for parent in self._parents_until(node, loop_nodes[lid]):
                    if isinstance(parent, LOOPS):
                        marks = self.loops[self.loop_id[id(parent)]].marks
                        if mid not in marks:
                            marks.append(mid)

    @staticmethod
    def _parents_until(node: ast.AST, top: ast.AST):
        for parent in _parents(node):
            yield parent
            if parent is top:
                return


def _at(node: ast.AST, anchor: ast.AST) -> ast.AST:
    """Give every node of an inserted subtree the anchor's first line."""
    for sub in ast.walk(node):
        if "lineno" in sub._attributes:
            sub.lineno = anchor.lineno
            sub.end_lineno = anchor.lineno
            sub.col_offset = 0
            sub.end_col_offset = 0
    return node


def _parse_stmts(text: str, anchor: ast.AST) -> list:
    return [_at(stmt, anchor) for stmt in ast.parse(text).body]


def _load_copy(expr: ast.expr) -> ast.expr:
    """A copy of an assignment target usable as an expression."""
    import copy

    node = copy.deepcopy(expr)
    for sub in ast.walk(node):
        if hasattr(sub, "ctx"):
            sub.ctx = ast.Load()
        if isinstance(sub, ast.Starred):
            return ast.Constant(value=None)
    return node


class _CallWrapper(ast.NodeTransformer):
    """Route each call's result of a GL002 statement through the forward probe."""

    def __init__(self, sid: int) -> None:
        self.sid = sid

    def visit_Lambda(self, node):  # its body runs later, elsewhere
        return node

    def visit_Call(self, node):
        self.generic_visit(node)
        probe = ast.Attribute(value=ast.Name(id=PROBE, ctx=ast.Load()), attr="forward", ctx=ast.Load())
        wrapped = ast.Call(func=probe, args=[ast.Constant(value=self.sid), node], keywords=[])
        return ast.copy_location(wrapped, node)


class _Rewriter(ast.NodeTransformer):
    def __init__(self, planner: _Planner, guard_loops: bool = True) -> None:
        self.planner = planner
        self.guard_loops = guard_loops

    def generic_visit(self, node):
        # Only statements hold statements (expressions never do), so only statement
        # lists and the clauses holding them (except handlers, match cases) are walked:
        # fast, and deep expressions cannot exhaust the recursion limit.
        for name, old in ast.iter_fields(node):
            if not isinstance(old, list) or not old:
                continue
            if isinstance(old[0], ast.stmt):
                new = []
                for item in old:
                    new.extend(self._expand(item, self.visit(item)))
                old[:] = new
            elif isinstance(old[0], ast.AST) and _holds_statements(old[0]):
                for item in old:
                    self.visit(item)
        return node

    def visit_FunctionDef(self, node):
        self.generic_visit(node)
        fid = getattr(node, "_gl_fid", None)
        if fid is not None:
            enter = _parse_stmts(f"{PROBE}.scope_enter({fid})", node.body[0])
            start = 1 if _is_docstring(node.body[0]) else 0
            node.body[start:start] = enter
        return node

    visit_AsyncFunctionDef = visit_FunctionDef

    def _expand(self, original: ast.stmt, stmt: ast.stmt) -> list:
        planner = self.planner
        if id(original) in planner.preamble:
            return [stmt]  # the docstring and __future__ imports must stay first
        before, after = [], []
        mid = planner.mark_of_stmt.get(id(original))
        if mid is not None:
            before += _parse_stmts(f"{PROBE}.mark({mid})", original)
        site = planner.site_of_stmt.get(id(original))
        if site is not None:
            if "GL002" in site.codes and not isinstance(stmt, COMPOUND):
                stmt = _CallWrapper(site.sid).visit(stmt)
            before += _parse_stmts(f"{PROBE}.before({site.sid})", original)
            if not site.terminal:
                after += self._after_hook(site, original)
        if isinstance(stmt, LOOPS):
            return before + self._wrap_loop(stmt, planner.loop_id[id(original)]) + after
        return before + [stmt] + after

    def _after_hook(self, site: Site, stmt: ast.stmt) -> list:
        # GL005 inspects what the statement accumulates into, GL004 what it assigns (the
        # hyperparameter, read back), GL002 too (state updated by operators, no call to wrap).
        acc = accumulator_of(stmt) if site.codes & {"GL002", "GL004", "GL005"} else None
        if acc is None:
            return _parse_stmts(f"{PROBE}.after({site.sid}, {PROBE}.UNREADABLE)", stmt)
        hook = _parse_stmts(
            f"try:\n    {PROBE}.after({site.sid}, _gl_value)\n"
            f"except Exception:\n    {PROBE}.after({site.sid}, {PROBE}.UNREADABLE)\n",
            stmt,
        )
        call = hook[0].body[0].value
        call.args[1] = _at(_load_copy(acc), stmt)
        return hook

    def _wrap_loop(self, loop: ast.stmt, lid: int) -> list:
        name = f"_gl_loop_{lid}"
        head = _parse_stmts(f"{name} = {PROBE}.loop_enter({lid})", loop)
        tick = _parse_stmts(f"if {name}.tick():\n    break", loop)
        loop.body[0:0] = tick
        if not self.guard_loops:
            # No try/finally: an exception or a return skips close(), which the probe
            # reads as an iteration that did not complete (the safe side).
            return head + [loop] + _parse_stmts(f"{name}.close()", loop)
        guard = _parse_stmts(
            "try:\n    pass\n"
            f"except BaseException:\n    {name}.fail()\n    raise\n"
            f"finally:\n    {name}.close()\n",
            loop,
        )[0]
        guard.body = [loop]
        guard.end_lineno = getattr(loop, "end_lineno", loop.lineno)
        return head + [guard]


def _holds_statements(node: ast.AST) -> bool:
    return isinstance(node, ast.excepthandler) or type(node).__name__ == "match_case"


def _is_docstring(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Constant)
        and isinstance(stmt.value.value, str)
    )
