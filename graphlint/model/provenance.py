"""Graph provenance: which forward graphs each value may carry, at each program point.

An abstract interpreter over the CFG. A value is a set of *origins*: the
statement (site) that created a graph node, and whether that is the node of
the site's latest execution (age 0), of the one before (age 1) or of an older
one (age 2). Executing a site again ages its existing origins, which is how a loop-carried value
is told apart from a freshly computed one. The state also records which origins
a backward freed (without ``retain_graph``), traversed (with or without it),
or whose saved parameters an optimizer step modified in place.

Helpers of the same module are analysed where they are called (inlined, depth
bounded, recursion cut), so an effect hidden in ``backward_G(self)`` lands on
the caller's state in the right order. Everything rules need is recorded as
facts in a final pass over the solved states.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from graphlint.model import syntax as cst

from graphlint.model.walk import children, descendants

from graphlint.model import events as ev
from graphlint.model.liveness import live_in, live_on_entry
from graphlint.model.cfg import (
    ARM, BACK, CFG, DEF, ENTRY, EXIT, FOR, IF, ITER, MATCH, STMT, WHILE, WITH, build_cfg, disabled_by_flags, flag_value,
)
from graphlint.model.names import (
    STRING_LITERALS,
    bound_names,
    CUTTING_ATTRIBUTES,
    CUTTING_METHODS,
    TENSOR_VIEW_ATTRIBUTES,
    INDEXED_REDUCTIONS,
    constant_string,
    display_parts,
    dotted,
    is_integer_literal,
    is_literal,
    is_torch_factory,
    paired_parts,
    is_true,
    PARAMETER_METHODS,
    PASSING_BUILTINS,
    positional,
    receiver_in_place,
    written_in_place,
)
from graphlint.model.program import (
    ACCELERATOR, MODULE, OPTIMIZER, PARAM_GROUP, SCALER, SCHEDULER, TEXT, Program, Scope, sub_blocks,
)
from graphlint.model.guards import counter_binding, no_graph_side, none_side
from graphlint.model.statements import read_names

# Objects that hold or step parameters but are never tensors themselves.
_NEVER_TENSORS = frozenset({OPTIMIZER, SCHEDULER, SCALER, ACCELERATOR, TEXT})

Origin = tuple[int, int]  # (site id, age: 0 latest, 1 previous, 2 and 3 older, 4 outer)
# Ages up to 3 tell apart four runs of one statement in an iteration: a WGAN-GP
# step calls the critic's forward on real, fake, interpolated and (for the
# generator) fake samples again; merged, the node the generator's backward freed
# would look like the one the critic's loss walks. (About 6% more model time than 2.)
OLDEST = 3
# The nodes of an earlier iteration of a loop around the site's own loop. Kept apart
# from ages 0-3, which the site's own loop keeps turning over: otherwise the node
# of the previous batch (freed by its backward) and the node of an earlier layer
# of this batch's `for layer in layers: x = layer(x)` would share one label.
OUTER = 4
EMPTY: frozenset = frozenset()
# Marks "this statement creates a graph node" inside an expression's value.
NEW: Origin = (-1, 0)
# Marks a value read as one element of a container (``losses[i]``, ``for l in losses``).
ELEMENT: Origin = (-2, 0)
# Marks a module's parameters: leaves that require grad. Tensor ops on them build
# nodes; handing them to a callable (an optimizer factory) builds no graph.
PARAMS: Origin = (-3, 0)

WEAK, LIKELY, CERTAIN = 1, 2, 3
# Helpers inlined inside helpers, at most this deep. Each level multiplies the
# work (a helper is re-solved whenever its caller's fixpoint revisits the call);
# 4 cost trl's distillation trainer 6.6 s against 0.4 s for 3, and no fixture or
# corpus finding needs the fourth level.
MAX_INLINE_DEPTH = 3
# Flags a state partition keeps apart at once: each one doubles the states and
# the helpers inlined under them, from its first test to its last.
_MAX_PARTITION_FLAGS = 1
# Remembered helper outcomes per file before the memo starts afresh (bounds memory).
_MAX_INLINED = 4096
# Their fixpoints (the state before each node), kept for the recording pass:
# only the last solve at each call position (the one from the caller's final
# state), and at most this many node states in all (bounds memory).
_MAX_REMEMBERED_STATES = 20_000


class AnalysisBudgetExceeded(Exception):
    """Raised when a file needs more work than the per-file budget allows."""


@dataclass
class Site:
    id: int
    stmt: cst.CSTNode
    strength: int = 0
    # Module paths (in the caller's naming) called at this site, one set per
    # way it ran (a method's statement runs once per instance it is called on):
    # used to tell which optimizer's step modifies the parameters this node saved.
    callee_sets: set[frozenset[str]] = field(default_factory=set)
    # Keys of every loop the site ever executed inside (at any depth).
    loops: set[tuple] = field(default_factory=set)
    # Keys of the innermost loops it executed in (where its ages turn over one by one).
    innermost: set[tuple] = field(default_factory=set)
    # The loop keys around each of its executions, outermost first.
    loop_chains: set[tuple] = field(default_factory=set)
    targets: set[str] = field(default_factory=set)
    leaf: bool = False
    # Parts unpacked from a call of an unseen function or loss object (not a model's).
    opaque_parts: bool = False
    # A caller's target holding one of those parts as a helper handed it back -> the
    # helper's target it is (see _StmtContext._parts_handed_back).
    part_of: dict[str, str] = field(default_factory=dict)


@dataclass
class _EntryAnalysis:
    """One entry point's facts, kept apart until ``Interpreter.finish``."""

    scope: Scope
    no_grad: bool
    facts: "Facts"
    partitioned: bool = False


@dataclass(frozen=True)
class HelperSummary:
    """Per-function facts: which arguments reach the return value, which get backwarded."""

    params: tuple[str, ...]
    returns: set[str]  # arguments whose graph the return value may carry
    backwards: set[str]  # arguments whose graph a backward walks
    new_graph: bool  # the return value may carry a graph built inside the helper
    runs_backward: bool

    def cuts(self, param: str) -> bool:
        return param not in self.returns


@dataclass(frozen=True)
class Inlined:
    """A helper solved at one call (see Interpreter.inline_key), remembered."""

    exit_state: State
    returns: frozenset
    returned_elements: list | None | bool
    returned_plain: bool  # a path returns a value that is not a tuple display (nor None)
    forwards: int  # forward calls the helper ran
    returned_paths: list | None | bool = None  # see Frame.returned_paths
    returned_items: dict | None | bool = None  # see Frame.returned_items
    returned_nested: dict | None | bool = None  # see Frame.returned_nested


class State:
    __slots__ = ("env", "item_keys", "parents", "freed", "traversed", "stepped", "fresh")

    def __init__(self) -> None:
        # Writes go through set/add/put (never ``env[...] =``) to keep item_keys whole.
        self.env: dict[str, frozenset] = {}
        # Every item path (``x['h']``) ever written to env along this state's history:
        # a superset of env's item keys, so that reading ``x`` with its items scans
        # a few keys, not the hundreds a large trainer's state holds. Immutable,
        # shared between copies.
        self.item_keys: frozenset[str] = frozenset()
        # Every path that has ever had a path below it in env (``x`` and ``x.a`` for
        # ``x.a[0]``): a superset, immutable and shared like item_keys. Most writes
        # bind a path with nothing below it, which this tells without scanning env.
        self.parents: frozenset[str] = frozenset()
        self.freed: dict[Origin, cst.CSTNode] = {}
        self.traversed: dict[Origin, cst.CSTNode] = {}
        self.stepped: dict[Origin, cst.CSTNode] = {}
        # Per loop: paths assigned since its current iteration began (a must-set).
        self.fresh: dict[tuple, frozenset] = {}

    def copy(self) -> "State":
        new = State.__new__(State)
        new.env = dict(self.env)
        new.item_keys = self.item_keys
        new.parents = self.parents
        new.freed = dict(self.freed)
        new.traversed = dict(self.traversed)
        new.stepped = dict(self.stepped)
        new.fresh = dict(self.fresh)
        return new

    def fingerprint(self) -> tuple:
        """A hashable value equal for equal states (graph nodes compared by identity)."""
        return (
            frozenset(self.env.items()),
            frozenset((origin, id(node)) for origin, node in self.freed.items()),
            frozenset((origin, id(node)) for origin, node in self.traversed.items()),
            frozenset((origin, id(node)) for origin, node in self.stepped.items()),
            frozenset(self.fresh.items()),
        )

    def join(self, other: "State") -> bool:
        """Merge ``other`` into self; True when self changed."""
        changed = False
        env = self.env
        for key, value in other.env.items():
            mine = env.get(key)
            if mine is value:
                continue  # copies share their values: the common case, and free
            if mine is None:
                if "[" in key:
                    value = value | _unkept_item(self.env, key)
                env[key] = value
                changed = True
            elif not value <= mine:
                env[key] = mine | value
                changed = True
        if self.item_keys:
            for key in self.item_keys:
                mine = env.get(key)
                if mine is not None and key not in other.env:
                    theirs = _unkept_item(other.env, key)
                    if not theirs <= mine:
                        env[key] = mine | theirs
                        changed = True
        if other.item_keys is not self.item_keys and not other.item_keys <= self.item_keys:
            self.item_keys = self.item_keys | other.item_keys
        if other.parents is not self.parents and not other.parents <= self.parents:
            self.parents = self.parents | other.parents
        for name in ("freed", "traversed", "stepped"):
            mine = getattr(self, name)
            for key, value in getattr(other, name).items():
                if key not in mine:
                    mine[key] = value
                    changed = True
        for loop, paths in list(self.fresh.items()):
            theirs = other.fresh.get(loop)
            if theirs is not None and not paths <= theirs:
                self.fresh[loop] = paths & theirs
                changed = True
        for loop, paths in other.fresh.items():
            if loop not in self.fresh:
                self.fresh[loop] = paths
                changed = True
        return changed

    # ----- env access -----
    def get(self, path: str) -> frozenset:
        """The value at ``path`` with its items (``x['h']``), but not its attributes:
        an object's attributes (``model.fake``) are not part of the object's own graph."""
        env = self.env
        value = env.get(path, EMPTY)
        if self.item_keys and path in self.parents:
            bracket = path + "["
            for key in self.item_keys:
                if key.startswith(bracket):
                    value = value | env.get(key, EMPTY)
        return value

    def has(self, path: str) -> bool:
        if path in self.env:
            return True
        if path not in self.parents:
            return False
        below = (path + ".", path + "[")
        for key in self.env:
            if key.startswith(below):
                return True
        return False

    def set(self, path: str, value: frozenset) -> None:
        # (Every env walk here is a plain loop or comprehension over the keys with
        # one startswith call: states of large trainers hold hundreds of paths.)
        if path in self.parents:
            below = (path + ".", path + "[")
            for key in [k for k in self.env if k.startswith(below)]:
                del self.env[key]
        self.put(path, value)

    def put(self, path: str, value: frozenset) -> None:
        """Bind ``path`` alone, leaving what lies below it (attributes, items) as it is."""
        env = self.env
        if path not in env:
            self._note_parents(path)
        env[path] = value
        if "[" in path and path not in self.item_keys:
            self.item_keys = self.item_keys | {path}

    def _note_parents(self, path: str) -> None:
        """Add the paths above ``path`` to ``parents`` (``a`` and ``a.b`` for ``a.b[0]``)."""
        end = len(path)
        missing = []
        while True:
            end = max(path.rfind(".", 0, end), path.rfind("[", 0, end))
            if end <= 0:
                break
            above = path[:end]
            if above in self.parents:
                break  # its own parents were noted with it
            missing.append(above)
        if missing:
            self.parents = self.parents.union(missing)

    def add(self, path: str, value: frozenset) -> None:
        env = self.env
        self.put(path, env.get(path, EMPTY) | value)
        if path not in self.parents:
            return
        # An item written under a key computed at run time may be any of the known ones.
        bracket = path + "["
        for key in self.item_keys:
            if key.startswith(bracket) and key in env:
                env[key] = env[key] | value

    def string_items(self, path: str) -> dict[str, str]:
        """String key -> env path of the items ``path`` holds right below it (``d['k']``:
        ``k``), as item_path spells them."""
        if path not in self.parents:
            return {}
        prefix, found = path + "[", {}
        for key in self.item_keys:
            literal = key[len(prefix):-1] if key.startswith(prefix) and key.endswith("]") and key in self.env else ""
            if len(literal) > 1 and literal[0] == literal[-1] and literal[0] in "'\"" and "[" not in literal:
                found[literal[1:-1]] = key
        return found

    def attributes(self, path: str) -> dict[str, frozenset]:
        """``.name`` -> value of the attributes bound right below ``path`` (``x.name``)."""
        if path not in self.parents:
            return {}
        below, start = path + ".", len(path)
        return {
            key[start:]: value
            for key, value in self.env.items()
            if key.startswith(below) and "." not in key[start + 1:] and "[" not in key[start + 1:]
        }

    def drop_prefix(self, prefix: str, dead: frozenset = frozenset()) -> None:
        for key in [k for k in self.env if k.startswith(prefix)]:
            del self.env[key]
        self.forget_unreachable(dead)

    def forget_unreachable(self, dead: frozenset = frozenset()) -> None:
        """Drop freed/traversed/stepped marks of graphs no variable holds any more.

        Such a graph cannot be backwarded again; keeping its marks would, once
        stale instances of a site are merged, taint a newer instance of that site.
        """
        tables = (self.freed, self.traversed, self.stepped)
        # The marked origins no live variable holds yet: a few, against the
        # hundreds of origins a large state holds (no union of them all).
        unreached = set().union(*tables)
        for key, value in self.env.items():
            if not unreached:
                return
            if key not in dead and not value.isdisjoint(unreached):
                unreached -= value
        for table in tables:
            for origin in [o for o in table if o in unreached]:
                del table[origin]

    def new_iteration(self, inside, innermost, dead: frozenset = frozenset()) -> None:
        """A loop header: the nodes built inside the loop belong to an earlier iteration.

        Without this, a site skipped by a branch in this iteration would keep the
        freed mark of its previous execution under the name of the current one.
        ``inside(site)`` says whether a site runs inside this loop, ``innermost(site)``
        whether this loop is the site's own: its nodes age by one; those of sites in
        loops nested inside this one become OUTER.
        """
        origins = set().union(*self.env.values(), self.freed, self.traversed, self.stepped)
        # Asked once per site, not once per origin (a site has an origin per age).
        sites = {o[0] for o in origins if o[1] != OUTER}
        inner = {site for site in sites if inside(site)}
        chosen = {o for o in origins if o[1] != OUTER and o[0] in inner}
        outer_sites = {site for site in inner if not innermost(site)}
        outer = {o for o in chosen if o[0] in outer_sites}
        self._age_origins(chosen - outer, outer)
        self.forget_unreachable(dead)

    def _age_origins(self, chosen, outer=frozenset()) -> None:
        """Age ``chosen`` by one execution (the oldest merge) and turn ``outer`` OUTER."""
        if not chosen and not outer:
            return
        both = chosen | outer
        env = self.env
        for key, value in env.items():
            if value.isdisjoint(both):
                continue  # most values (no new set built to find that out)
            hit = value & both
            # Set operations in C: values can hold hundreds of origins.
            env[key] = (value - hit) | {older(o) for o in hit & chosen} | {(o[0], OUTER) for o in hit & outer}
        for table in (self.freed, self.traversed, self.stepped):
            if table.keys().isdisjoint(both):
                continue
            for origin in [o for o in table if o in outer]:
                table.setdefault((origin[0], OUTER), table.pop(origin))
            for age in range(OLDEST - 1, -1, -1):
                for origin in [o for o in table if o[1] == age and o in chosen]:
                    table.setdefault(older(origin), table.pop(origin))

    def refresh(self, site: int) -> None:
        """A new execution of ``site``: its existing nodes age by one execution."""
        self.refresh_all((site,))

    def refresh_all(self, sites) -> None:
        self._age_origins({(site, age) for site in sites for age in range(OLDEST + 1)})


@dataclass
class Frame:
    scope: Scope
    cfg: CFG
    prefix: str
    aliases: dict[str, str | None]
    loop_stack: tuple[tuple, ...]
    depth: int
    returns: frozenset = EMPTY
    # Per-position values when every tuple returned has one length; False once they disagree.
    returned_elements: list | None | bool = None
    # The last of returned_elements is a concatenation's rest (see _record_returned_elements).
    returned_tail: bool = False
    # Per position, the variable every returned tuple reads there (`return loss, n, log`),
    # else None: a caller unpacking the call can tell which of its parts is which. False
    # once two returns disagree in length.
    returned_paths: list | None | bool = None
    # Per path suffix (`['seg']`, `.scores`), the values every return of a dict display
    # (`return {"seg": a, "depth": b}`), a dict or an object built here gives it there;
    # False once a return is anything else.
    returned_items: dict | None | bool = None
    # Per position of the returned tuple, the parts of a tuple of variables returned
    # there (`return obs, (log_probs, values)`); False once the returns disagree.
    returned_nested: dict | None | bool = None
    # Some path returns a value that is not a tuple display, nor None (`return loss`):
    # a caller that unpacks took a tuple's path, one that does not may hold that value.
    returned_plain: bool = False
    # loop variable name -> path of the container it iterates (for `for s in state: s.detach_()`).
    iterating: dict[str, str] = field(default_factory=dict)
    local_defs: dict[str, cst.FunctionDef] = field(default_factory=dict)
    current: int = 0  # the CFG node being evaluated
    # Called under `torch.no_grad()` (or from a helper that was): nothing it runs builds a graph.
    no_grad: bool = False
    # The call that inlined this frame runs in every iteration of the caller's innermost loop.
    called_every_iteration: bool = False
    # Origins its calls handed in by value (`model((obs, (hx, cx)))`), and their callers':
    # state passed in is the caller's to detach, reported at the call if anywhere.
    passed_in: frozenset = EMPTY
    # CFG node (or (header, True) on loop entry) -> env keys of this frame's locals
    # dead there (see Interpreter.dead_keys).
    dead: dict[object, frozenset] = field(default_factory=dict)
    # Parameter -> the literal True/False this call gave it (its default when not
    # passed): decides `torch.set_grad_enabled(training)` and kin (cfg.disabled_by_flags).
    flags: dict[str, bool] = field(default_factory=dict)
    # CFG node -> whether a `with` around it disables gradients by those flags.
    flag_no_grad: dict[int, bool] = field(default_factory=dict)
    # Parameter bound by value -> the caller's variables its argument read, the
    # callers' callers' resolved too (`self._backward(scaler.scale(loss))`: loss).
    argument_paths: dict[str, frozenset] = field(default_factory=dict)

    def callers_paths(self, paths: frozenset) -> frozenset:
        """``paths`` with each parameter bound by value replaced by what it was given."""
        found = set()
        for path in paths:
            param = path[len(self.prefix):] if self.prefix and path.startswith(self.prefix) else None
            found.update(self.argument_paths.get(param, (path,)))
        return frozenset(found)


class Facts:
    """What the final pass saw; rules read only this and the site table."""

    def __init__(self) -> None:
        self.backwards: list[ev.Backward] = []
        self.carried: list[ev.CarriedState] = []
        self.accumulations: list[ev.Accumulation] = []
        self.hyperparameters: list[ev.HyperparameterWrite] = []
        # loop key -> paths cut somewhere in that loop
        self.cut_paths: dict[tuple, set[str]] = {}
        # loop key -> True when a forward or backward runs in that loop
        self.active_loops: set[tuple] = set()
        self.backwarded_sites: set[int] = set()
        # Variables a backward that frees its graph was called on (`loss` in `loss.backward()`).
        self.freeing_backward_paths: set[str] = set()
        # Sites whose values a module's method returns (outputs collected step by step).
        self.returned_sites: set[int] = set()
        # Statements taking `torch.autograd.grad(..., create_graph=...)`: derivatives
        # kept differentiable on purpose (Jacobian rows, PINN residuals, MAML).
        self.differentiable_grad_sites: set[int] = set()
        # loop key -> paths re-assigned (not from themselves) somewhere in that loop
        self.reset_paths: dict[tuple, set[str]] = {}
        # loop key -> paths re-assigned by a statement every iteration of it runs
        self.every_iteration_resets: dict[tuple, set[str]] = {}
        # Loops whose own iterations run an optimizer step only under a test
        # (gradient accumulation: the step closes a window of micro-batches).
        self.conditional_step_loops: set[tuple] = set()
        # Loops an optimizer step runs in (at any depth).
        self.step_loops: set[tuple] = set()
        # Loops whose own iterations run an optimizer step (its innermost loop).
        self.stepping_loops: set[tuple] = set()

    def merge(self, other: "Facts") -> None:
        for name, mine in vars(self).items():
            theirs = getattr(other, name)
            if type(mine) is list:
                mine.extend(theirs)
            elif type(mine) is set:
                mine |= theirs
            else:
                for key, values in theirs.items():
                    mine.setdefault(key, set()).update(values)


class Interpreter:
    def __init__(self, program: Program, budget: int = 200_000, seconds: float | None = None) -> None:
        self.program = program
        self.sites: list[Site] = []
        self._site_ids: dict[int, int] = {}
        self.facts = Facts()
        self.recording = False
        self.budget = budget
        # A CPU-time safety net besides the step budget: CPU time, unlike the wall
        # clock, does not depend on how loaded the machine is.
        self.deadline = None if seconds is None else time.process_time() + seconds
        self._steps_to_clock = 1
        self.seconds = seconds
        self.work = 0
        # Whether solve() keeps states apart per flag value (see analyse_scope).
        self.partitions = False
        self._cfgs: dict[int, CFG] = {}
        self._stack: list[cst.CSTNode] = []
        self._frame_counter = 0
        self.forwards_run = 0
        # The frames being solved, outermost first (each knows its current node).
        self.frames: list[Frame] = []
        self._live: dict[int, dict[int, frozenset[str]]] = {}
        self._ranks: dict[int, dict[int, int]] = {}
        self.runs_forward: dict[cst.CSTNode, bool] = {}
        # Statements whose in-states the final pass keeps (for queries and tests).
        self.watch: set[int] = set()
        self.snapshots: dict[int, list[State]] = {}
        self.suppress_carried = 0
        # Helpers solved outside the recording pass, by everything their outcome
        # depends on (see inline_key): outer fixpoints re-solve the same call
        # with the same state many times, exponentially so in nested helpers.
        self.inlined: dict[tuple, Inlined] = {}
        self._sentinel_initialisations: dict[cst.CSTNode, frozenset[cst.CSTNode]] = {}
        # Call position (the key without the state) -> (key, fixpoint states).
        self.inlined_states: dict[tuple, tuple[tuple, dict[tuple, State]]] = {}
        self._remembered_states = 0
        self._entries: list[_EntryAnalysis] = []
        # Functions an entry point's recording pass ran inlined, right inside the entry,
        # with gradients on, no parameter fixed to a literal and no carried state
        # reported at the call (see _CallEvaluator.inline): their facts are
        # recorded as that caller runs them (with its values, its helpers one level
        # deeper). As entry points of their own they would only repeat that, with
        # unknown arguments: most of a large trainer's methods are such helpers.
        self.analysed_inside: set[cst.CSTNode] = set()

    # ----- sites -----
    def site(self, stmt: cst.CSTNode) -> Site:
        key = id(stmt)
        if key not in self._site_ids:
            self._site_ids[key] = len(self.sites)
            self.sites.append(Site(len(self.sites), stmt))
        return self.sites[self._site_ids[key]]

    def strength(self, origins: frozenset) -> int:
        return max((self.sites[o[0]].strength for o in origins if o[0] >= 0), default=0)

    def only_leaves(self, origins: frozenset) -> bool:
        """Whether ``origins`` are all parameters or leaves (tensors no backward frees)."""
        sites = self.sites
        return bool(origins) and all(o == PARAMS or (o[0] >= 0 and sites[o[0]].leaf) for o in origins)

    def cfg_for(self, scope: Scope) -> CFG:
        key = id(scope.node)
        if key not in self._cfgs:
            self._cfgs[key] = build_cfg(
                scope.body, no_grad=scope.no_grad, peel=True, joins=True, bound=scope.params,
                grad_contexts=self.program.grad_contexts,
            )
        return self._cfgs[key]

    # ----- inlining memo -----
    def no_grad_by_flags(self, frame: Frame, node) -> bool:
        """Whether a `with` around ``node`` disables gradients given the frame's flags."""
        known = frame.flag_no_grad.get(node.id)
        if known is None:
            binding = lambda name: self.program.first_assignment(frame.scope, name)
            known = frame.flag_no_grad[node.id] = any(
                type(header) is cst.With and disabled_by_flags(header, frame.flags, binding)
                for header in (frame.cfg.nodes[h].stmt for h in node.withs)
            )
        return known

    def inline_key(self, func: cst.FunctionDef, frame: "Frame", state: State) -> tuple:
        """Everything solving ``func`` in ``frame`` from ``state`` depends on: where
        the call stands, then the state (last)."""
        return (
            id(func),
            frame.prefix,
            frame.no_grad,
            frozenset(frame.flags.items()),
            frozenset(frame.aliases.items()),
            frame.loop_stack,
            frame.depth,
            frozenset((name, id(node)) for name, node in frame.local_defs.items()),
            # Liveness (dead_keys) reads where every caller stands; recursion is cut by the stack.
            tuple((id(outer.cfg), outer.current) for outer in self.frames),
            tuple(id(node) for node in self._stack),
            state.fingerprint(),
        )

    def remember_inlined(self, key: tuple, outcome: Inlined, states: dict[tuple, State]) -> None:
        if len(self.inlined) >= _MAX_INLINED:
            self.forget_inlined()
        self.inlined[key] = outcome
        position = key[:-1]
        replaced = self.inlined_states.pop(position, None)
        if replaced is not None:
            self._remembered_states -= len(replaced[1])
        self.inlined_states[position] = (key, states)
        self._remembered_states += len(states)
        while self._remembered_states > _MAX_REMEMBERED_STATES:
            oldest = next(iter(self.inlined_states))
            self._remembered_states -= len(self.inlined_states.pop(oldest)[1])

    def remembered_fixpoint(self, key: tuple) -> dict[tuple, State] | None:
        """The fixpoint states of the helper solve ``key`` names, if still kept."""
        entry = self.inlined_states.get(key[:-1])
        return entry[1] if entry is not None and entry[0] == key else None

    def sentinel_initialisations(self, scope: Scope) -> frozenset[cst.CSTNode]:
        """The assignments ``x = ...`` directly under an ``if x is None:`` of the scope."""
        found = self._sentinel_initialisations.get(scope.node)
        if found is None:
            found = self._sentinel_initialisations[scope.node] = frozenset(_sentinel_initialisations(scope.body))
        return found

    def forget_inlined(self) -> None:
        self.inlined.clear()
        self.inlined_states.clear()
        self._remembered_states = 0

    # ----- driving -----
    def analyse_scope(self, scope: Scope, no_grad: bool = False) -> None:
        """Analyse a scope as an entry point: parameters hold unknown values.
        ``no_grad``: every caller in the file runs it with gradients disabled.

        When the analysis sees a backward through a freed graph or carried
        state, it runs again with states kept apart per flag value (see
        ``solve``), which costs more and removes the findings that only the
        impossible mix of two tests of one flag produced. The facts join
        ``self.facts`` in ``finish``.
        """
        entry = _EntryAnalysis(scope, no_grad, self._analyse_scope(scope, no_grad, partitions=False))
        self._entries.append(entry)
        if self._may_be_reported(entry.facts):
            self._partition(entry)

    def finish(self, cut_short: bool = False) -> None:
        """Merge the entry points' facts, in the order they were analysed.

        A site's strength only grows, also in later entry points that run the same
        statement: an entry whose hits were too weak to report when it ran, and are
        not any more, runs partitioned now, as ``analyse_scope`` would have done.
        ``cut_short``: the budget ran out, so nothing more is run.
        """
        for entry in self._entries:
            if not (cut_short or entry.partitioned) and self._may_be_reported(entry.facts):
                self._partition(entry)
            self.facts.merge(entry.facts)
        self._entries.clear()

    def _may_be_reported(self, facts: "Facts") -> bool:
        """Whether the facts hold carried state or a hit GL001 may report: it reports
        one only on a node that may hold a graph (``origin_is_graph``: strength
        LIKELY at least). Most hits are weaker (lists of batches, numbers read from
        a file) and a partitioned run for them would only cost time."""
        return bool(facts.carried) or any(
            self.sites[origin[0]].strength >= LIKELY
            for backward in facts.backwards
            for hits in (backward.freed_hits, backward.stepped_hits)
            for origin in hits
            if origin[0] >= 0
        )

    def _partition(self, entry: "_EntryAnalysis") -> None:
        work = self.work
        try:
            entry.facts = self._analyse_scope(entry.scope, entry.no_grad, partitions=True)
        except AnalysisBudgetExceeded:
            self.work = work  # keep the first analysis's facts
        entry.partitioned = True

    def _analyse_scope(self, scope: Scope, no_grad: bool, partitions: bool) -> "Facts":
        frame = self._frame(scope, {}, (), 0)
        frame.no_grad = no_grad
        state = State()
        facts, self.facts = self.facts, Facts()
        self.partitions = partitions
        if partitions:
            self.forget_inlined()  # helpers remembered from unpartitioned solves
        self._stack.append(scope.node)
        try:
            # The fixpoint once; the recording pass transfers its states again.
            self.record(frame, self.fixpoint(frame, state))
            return self.facts
        finally:
            self._stack.pop()
            self.facts = facts
            if partitions:
                self.partitions = False
                self.forget_inlined()

    def summarise(self, func: cst.FunctionDef) -> "HelperSummary":
        """What a helper does to its arguments, analysed with each argument a graph of its own."""
        scope = self.program.scope_of(func)
        frame = self._frame(scope, {}, (), 0)
        state = State()
        param_sites: dict[str, int] = {}
        for param in scope.params:
            if param in ("self", "cls"):
                continue
            site = Site(len(self.sites), func, strength=LIKELY)
            self.sites.append(site)
            param_sites[param] = site.id
            state.set(frame.prefix + param, frozenset({(site.id, 0)}))
        backwards_before = len(self.facts.backwards)
        self._stack.append(func)
        try:
            exit_state = self.solve(frame, state, record=True)
        finally:
            self._stack.pop()
        returned = {o[0] for o in frame.returns}
        traversed = {o[0] for o in exit_state.traversed}
        return HelperSummary(
            params=tuple(param_sites),
            returns={p for p, site in param_sites.items() if site in returned},
            backwards={p for p, site in param_sites.items() if site in traversed},
            new_graph=any(site not in param_sites.values() for site in returned if site >= 0),
            runs_backward=len(self.facts.backwards) > backwards_before,
        )

    def _frame(self, scope: Scope, aliases, loop_stack, depth) -> Frame:
        # Recursion is never inlined, so a scope is on the frame stack at most once.
        prefix = "" if scope.key == "<module>" else f"@{scope.key}:"
        return Frame(scope, self.cfg_for(scope), prefix, aliases, loop_stack, depth)

    def solve(self, frame: Frame, entry: State, record: bool) -> State:
        """Fixpoint over the frame's CFG; with ``record`` a final pass emits facts."""
        states = self.fixpoint(frame, entry)
        if record:
            self.record(frame, states)
        return self.exit_state(frame, states, entry)

    def fixpoint(self, frame: Frame, entry: State) -> dict[tuple, State]:
        """The state before each CFG node of the frame, from ``entry``, emitting no facts.

        States are kept per CFG node and per *partition*: with ``self.partitions``
        (see analyse_scope), the values of the correlated flags (CFG.correlated)
        taken on the way there, so that the second `if cfg.aux:` follows the
        branch the first one took.
        """
        cfg = frame.cfg
        rank = self.ranks(cfg)
        start = (cfg.entry, frozenset())
        states: dict[tuple, State] = {start: entry.copy()}
        # Per loop header: the join of its back edges only (the state after one or more iterations).
        repeated: dict[tuple, State] = {}
        pending = {start}
        saved_recording = self.recording
        self.recording = False
        self.frames.append(frame)

        def propagate(out: State, key: tuple, table: dict[tuple, State]) -> bool:
            if key not in table:
                table[key] = out.copy()
                return True
            return table[key].join(out)

        try:
            while pending:
                key = min(pending, key=lambda k: rank.get(k[0], 0))
                if self.partitions:
                    # Ties are one node under several partitions: ordered by their flags,
                    # not by the set's (per-process, hash-seeded) order, so that which
                    # path's mark a join keeps first (the backward a message names) never varies.
                    key = min((k for k in pending if k[0] == key[0]), key=lambda k: sorted(k[1]))
                pending.discard(key)
                node_id, part = key
                self._charge(len(states[key].env))
                frame.current = node_id
                node = cfg.nodes[node_id]
                out = self.transfer(frame, node, states[key].copy())
                # A loop is taken to run at least once: its exit sees the state after an
                # iteration, never the state that skipped it (`for t in range(n): loss = ...`
                # then `loss.backward()` does not backward the previous batch's loss).
                exit_out = None
                if node.kind in (FOR, WHILE) and key in repeated:
                    frame.current = node_id
                    exit_out = self.transfer(frame, node, repeated[key].copy())
                for succ, label in node.succ:
                    edge_out, succ_part = out, part
                    if self.partitions and node.decision is not None and node.decision[0] in cfg.correlated:
                        flag, polarity = node.decision
                        value = polarity if label is True else not polarity
                        if (flag, not value) in part:
                            continue  # this path took the other branch of an earlier test
                        if node_id == cfg.correlated[flag]:
                            succ_part = part - {(flag, value)}
                        elif len(part) < _MAX_PARTITION_FLAGS:
                            succ_part = part | {(flag, value)}
                    if label is False and node.kind in (FOR, WHILE):
                        if exit_out is None:
                            continue
                        edge_out = exit_out
                    if node.kind == IF:
                        # (An `if` without `else` reaches its JOIN as arm 1 when the test fails.)
                        taken = label if label in (True, False) else (False if label == (ARM, 1) else None)
                        if taken is not None and frame.flags and flag_value(node.stmt.test, frame.flags) is (not taken):
                            continue  # `if not first_order:` in a helper called with first_order=True
                        if taken is not None:
                            edge_out = self._narrow_on_edge(frame, node, taken, edge_out)
                    if type(label) is tuple and label[0] == ARM:
                        join = cfg.nodes[succ]
                        if self._never_skipped(frame, join, label[1]):
                            continue
                        # Leaving one branch of an `if`: the nodes of the sites the other
                        # branches ran belong to an earlier execution on this path too,
                        # so one label never names this path's old node and that path's
                        # new one (`if multi_gpu: y = parallel(x)` / `else: y = body(x)`).
                        edge_out = self._age_other_arms(edge_out, join, label[1])
                    if label == BACK:
                        # Merge only what this path can still backward: another path's
                        # marks on the same origin must not taint it.
                        edge_out = edge_out.copy()
                        frame.current = succ
                        edge_out.forget_unreachable(self.dead_keys())
                        if propagate(edge_out, (succ, succ_part), repeated):
                            pending.add((succ, succ_part))
                    elif cfg.nodes[succ].kind in (FOR, WHILE):
                        # Entering a loop: what its body re-assigns before reading is dead.
                        edge_out = edge_out.copy()
                        frame.current = succ
                        edge_out.forget_unreachable(self.dead_keys(entering=True))
                    if propagate(edge_out, (succ, succ_part), states):
                        pending.add((succ, succ_part))
        finally:
            self.recording = saved_recording
            self.frames.pop()
        return states

    def _narrow_on_edge(self, frame: Frame, node, label: bool, state: State) -> State:
        """On the branch of ``if h is not None:`` (or ``if h is None:``) where ``h`` is
        None, ``h`` holds no graph: the path that skips ``h = h.detach()`` carries none.
        Likewise where ``isinstance(v, torch.Tensor)`` fails: ``v`` is no tensor (a meter
        that cuts tensors with ``.item()`` and adds anything else)."""
        tested = no_graph_side(node.stmt.test, label)
        path = self.path(frame, tested) if tested is not None else None
        if path is None or not state.get(path):
            return state
        state = state.copy()
        state.set(path, EMPTY)
        container = self._cut_unless_none(frame, node, tested)
        if container is not None:
            # `for i, h in enumerate(states): if h is not None: states[i] = h.detach()`:
            # the element skipped is None, the others are cut (see _replaces_every_element).
            state.set(container, EMPTY)
        return state

    def _cut_unless_none(self, frame: Frame, node, tested: cst.BaseExpression) -> str | None:
        """The container whose element ``tested`` the ``if`` at ``node`` cuts in place unless
        it is None (see _written_unless_none; the write a cut, `h.detach()`), else None."""
        if not node.loops:
            return None
        header = frame.cfg.nodes[node.loops[-1]].stmt
        write = _written_unless_none(header, node.stmt)
        if write is None or not _cut_on_the_spot(write.value) or _loop_element(header) != dotted(tested):
            return None
        return self.path(frame, write.targets[0].target.value)

    def record(self, frame: Frame, states: dict[tuple, State]) -> None:
        """Transfer each node once more from its fixpoint state, now emitting facts."""
        cfg = frame.cfg
        rank = self.ranks(cfg)
        saved_recording = self.recording
        self.recording = True
        self.frames.append(frame)
        try:
            for key in sorted(states, key=lambda k: rank.get(k[0], 0)):
                frame.current = key[0]
                self.transfer(frame, cfg.nodes[key[0]], states[key].copy())
        finally:
            self.recording = saved_recording
            self.frames.pop()

    @staticmethod
    def exit_state(frame: Frame, states: dict[tuple, State], entry: State) -> State:
        exits = [state for (node_id, _), state in states.items() if node_id == frame.cfg.exit]
        if not exits:
            return entry
        result = exits[0]
        for other in exits[1:]:
            result = result.copy()
            result.join(other)
        return result

    def _never_skipped(self, frame: Frame, join, arm: int) -> bool:
        """The path past an invariant ``if``/``elif`` chain that took no branch, when a
        name only the branches bind is read after it (see cfg.Node.unbound_if_skipped)."""
        if arm != 1 or not join.unbound_if_skipped or join.arms[1]:
            return False
        return not join.unbound_if_skipped.isdisjoint(self.live_names(frame.cfg).get(join.id, ()))

    def _age_other_arms(self, state: State, join, arm: int) -> State:
        state = state.copy()
        frame = self.frames[-1]
        if not (join.no_grad or frame.no_grad):
            # (Under no_grad the other branches build no node, so none of theirs ages.)
            site_ids = self._site_ids
            state.refresh_all({site_ids[key] for key in join.arms[1 - arm] if key in site_ids})
        # As on a back edge: merge only what this path can still backward.
        frame.current = join.id
        state.forget_unreachable(self.dead_keys())
        return state

    def dead_keys(self, entering: bool = False) -> frozenset:
        """Env keys of local variables that no frame on the stack can read again.

        ``entering``: the innermost frame is at a loop header, entered from outside.
        """
        dead: set[str] = set()
        innermost = self.frames[-1] if self.frames else None
        for frame in self.frames:
            entry = entering and frame is innermost
            key = (frame.current, True) if entry else frame.current
            known = frame.dead.get(key)
            if known is None:
                live = self.live_names(frame.cfg, entry).get(frame.current, frozenset())
                known = frame.dead[key] = frozenset(
                    frame.prefix + name for name in frame.scope.locals if name not in live and name not in frame.aliases
                )
            dead |= known
        return frozenset(dead)

    def ranks(self, cfg: CFG) -> dict[int, int]:
        """Each node's position in the CFG's reverse postorder (the order states are solved in)."""
        key = id(cfg)
        if key not in self._ranks:
            self._ranks[key] = {node: i for i, node in enumerate(cfg.reverse_postorder())}
        return self._ranks[key]

    def live_names(self, cfg: CFG, entering: bool = False) -> dict[int, frozenset[str]]:
        key = id(cfg)
        if key not in self._live:
            live = live_in(cfg)
            self._live[key] = (live, live_on_entry(cfg, live))
        return self._live[key][1 if entering else 0]

    def _charge(self, live_values: int = 0) -> None:
        # A step costs more the more values are live (copies, joins and ageing walk
        # them all), so the deterministic budget bounds the real work.
        self.work += 1 + live_values // 32
        if self.work > self.budget:
            raise AnalysisBudgetExceeded(f"analysis budget of {self.budget} steps exceeded")
        if self.deadline is None:
            return
        # Reading the CPU clock costs about a microsecond: once every 64 steps is plenty.
        self._steps_to_clock -= 1
        if self._steps_to_clock:
            return
        self._steps_to_clock = 64
        if time.process_time() > self.deadline:
            raise AnalysisBudgetExceeded(f"analysis needed more than {self.seconds:g} s of CPU time")

    # ----- paths -----
    def path(self, frame: Frame, expr: cst.BaseExpression) -> str | None:
        if type(expr) is cst.Name:
            name = expr.value
            if name in frame.aliases:
                return frame.aliases[name]
            if name in frame.scope.locals:
                return frame.prefix + name
            return name
        if type(expr) is cst.Attribute:
            base = self.path(frame, expr.value)
            return f"{base}.{expr.attr.value}" if base is not None else None
        if type(expr) is cst.Subscript and len(expr.slice) == 1:
            base = self.path(frame, expr.value)
            index = expr.slice[0].slice
            if base is None or type(index) is not cst.Index:
                return None
            key = _literal_key(index.value)
            return item_path(base, key) if key is not None else None
        return None

    def local_path(self, expr: cst.BaseExpression) -> str | None:
        """The path as written in the current scope (for kind lookups)."""
        return dotted(expr)

    def kinds(self, frame: Frame, expr: cst.BaseExpression) -> set[str]:
        if type(expr) is cst.Subscript:
            # `meters["loss"]`, `meters[name]` of a dict of AverageMeters: an instance.
            return self.program.item_kinds(self.kinds(frame, expr.value))
        path = dotted(expr)
        found = self.program.kinds(frame.scope, path)
        if path is None:
            return found
        # A helper's parameter bound to the caller's object: that object's kinds
        # (`evaluate(model, loader)` called with a module).
        root, _, rest = path.partition(".")
        owner = frame.aliases.get(root)
        if not owner:
            return found
        resolved = f"{owner}.{rest}" if rest else owner
        if resolved.startswith("@"):
            key, _, local = resolved[1:].partition(":")
            scope = self.program.scope_by_key(key)
            return found | self.program.kinds(scope, local) if scope is not None else found
        return found | self.program.kinds(self.program.scopes[self.program.module], resolved)

    def loop_key(self, frame: Frame, node) -> tuple | None:
        if node.loop is None:
            return frame.loop_stack[-1] if frame.loop_stack else None
        return (id(frame.cfg), node.loop)

    def loop_keys(self, frame: Frame, node) -> tuple:
        return frame.loop_stack + tuple((id(frame.cfg), loop) for loop in node.loops)

    # ----- transfer -----
    def transfer(self, frame: Frame, node, state: State) -> State:
        if self.recording and node.stmt is not None and id(node.stmt) in self.watch:
            self.snapshots.setdefault(id(node.stmt), []).append(state.copy())
        ctx = _StmtContext(self, frame, node, state)
        kind = node.kind
        stmt = node.stmt
        if kind in (ENTRY, EXIT):
            return state
        if kind in (FOR, WHILE):
            key = (id(frame.cfg), node.id if node.peel_of is None else node.peel_of)
            state.fresh[key] = EMPTY
            sites = self.sites
            state.new_iteration(
                lambda site: site >= 0 and key in sites[site].loops,
                lambda site: key in sites[site].innermost,
                self.dead_keys(),
            )
            if kind == FOR:
                held = frame.prefix + _iterable_key(stmt)
                # The iterable a pre-header evaluated once (cfg.ITER), else the iterable itself.
                value = state.env[held] if held in state.env else ctx.eval(stmt.iter)
                state = ctx.state  # (an inlined helper replaces it)
                if value and self.path(frame, stmt.iter) is not None:
                    value = value | {ELEMENT}
                zipped = _zipped(stmt)
                if zipped is not None and all(f"{held}#{index}" in state.env for index in range(len(zipped))):
                    # `for t, d in zip(truncated, leaves)`: each part is an element of
                    # its own container (one value for both would tie their graphs).
                    for index, (part, source) in enumerate(zipped):
                        element = state.env[f"{held}#{index}"]
                        ctx.assign(part, element | {ELEMENT} if element else element, element=True)
                        source_path = self.path(frame, source)
                        if source_path is not None:
                            frame.iterating[part.value] = source_path
                else:
                    ctx.assign_iterated(stmt.target, stmt.iter, value)
                # The header re-binds its targets in each iteration: they are fresh in it
                # (`for emb in embs: emb = emb - emb.mean(0)` accumulates nothing).
                state.fresh[key] = frozenset(frame.prefix + name for name in bound_names(stmt.target))
                name = stmt.target.value if type(stmt.target) is cst.Name else None
                container = self.path(frame, stmt.iter)
                if name and container:
                    frame.iterating[name] = container
                    if _detaches_in_place(stmt, name):
                        # `for s in state: s.detach_()` cuts every element of the container.
                        state.set(container, EMPTY)
                        ctx._cut(container)
                keyed = _keys_iterated(stmt)
                keyed_container = self.path(frame, keyed[1]) if keyed is not None else None
                if keyed_container is not None:
                    # `for k in d.keys()`, `for i, k in enumerate(d)`: `d[k]` is an item of d.
                    frame.iterating[keyed[0]] = keyed_container
            else:
                ctx.eval(stmt.test)
            return ctx.state
        if kind == ITER:
            # (Evaluated first: a helper of the file inlined by the call replaces ctx.state.)
            value = ctx.eval(stmt.iter)
            held = frame.prefix + _iterable_key(stmt)
            ctx.state.put(held, value)
            for index, (_, source) in enumerate(_zipped(stmt) or ()):
                ctx.state.put(f"{held}#{index}", ctx.eval(source))  # (a variable: read again, no call)
            return ctx.state
        if kind == IF:
            ctx.eval(stmt.test)
            return ctx.state
        if kind == MATCH:
            ctx.eval(stmt.subject)
            return ctx.state
        if kind == WITH:
            for item in stmt.items:
                value = ctx.eval(item.item)
                if item.asname is not None:
                    ctx.assign(item.asname.name, value)
            return ctx.state
        if kind == DEF:
            if type(stmt) is cst.FunctionDef:
                frame.local_defs[stmt.name.value] = stmt
            return state
        if kind == STMT:
            ctx.statement(stmt)
        return ctx.state


class _StmtContext:
    """Evaluation of one CFG node: expressions, assignments and events."""

    def __init__(self, interp: Interpreter, frame: Frame, node, state: State) -> None:
        self.interp = interp
        self.program = interp.program
        self.frame = frame
        self.node = node
        self.state = state
        self.stmt = node.stmt
        self.site = interp.site(node.stmt) if node.stmt is not None else None
        self.no_grad = node.no_grad or frame.no_grad or (bool(frame.flags) and interp.no_grad_by_flags(frame, node))
        self.loop_keys = interp.loop_keys(frame, node)
        self.loop = self.loop_keys[-1] if self.loop_keys else None
        self.produced = 0  # strength of forward calls made by this statement
        self.callees: set[str] = set()
        self.construct_target: str | None = None
        self.constructed: str | None = None  # the target whose attributes __init__ just set
        self.leaf_created = False
        # Set by an inlined call whose helper returns a tuple: its per-position values
        # (see Frame.returned_plain for the other flag).
        self.returned_elements: list | None = None
        self.returned_plain = False
        self.returned_paths: list | None | bool = None  # with returned_elements: see Frame.returned_paths
        self.returned_items: dict | None | bool = None  # see Frame.returned_items
        self.returned_nested: dict | None | bool = None  # see Frame.returned_nested
        # Set by tuple_parts: position -> the values of a tuple of variables displayed there.
        self.nested_parts: dict[int, list[frozenset]] = {}
        # The call that handed its arguments back unchanged (`accelerator.prepare`): a
        # statement that is only that call stores them as they are, building no node.
        self.passed_through: cst.Call | None = None
        self.evaluated: frozenset = EMPTY  # the last value _stored evaluated, before materialising
        # Calls that only gather their arguments (a NamedTuple's or dataclass' constructor).
        self.gathering: set[cst.Call] = set()

    # ----- statements -----
    def statement(self, stmt: cst.CSTNode) -> None:
        if type(stmt) is cst.Assign:
            self._assignment(stmt, [target.target for target in stmt.targets], stmt.value)
        elif type(stmt) is cst.AnnAssign:
            if stmt.value is not None:
                # `scores: List[Tensor] = []` is a plain assignment (a reset, too).
                self._assignment(stmt, [stmt.target], stmt.value)
        elif type(stmt) is cst.AugAssign:
            self.augmented(stmt)
        elif type(stmt) is cst.Expr:
            method, operand = written_in_place(stmt.value)
            target = receiver_in_place(stmt.value.func) if operand is not None else None
            if target is None or self.interp.path(self.frame, target) is None:
                self.eval(stmt.value)
            elif method == "add_":
                if target is not stmt.value.func.value:
                    self.eval(stmt.value.func.value)  # `ema.mul_(0.9)` first
                self.add_in_place(target, operand)  # `total.add_(loss)`: `total += loss`
            else:
                # `buf.copy_(v)`: `buf = v`; `ema.copy_(0.9 * ema + 0.1 * loss)` accumulates.
                fresh_before = {loop: self.state.fresh.get(loop, EMPTY) for loop in self.loop_keys}
                value = self.materialise(self.eval(operand))
                self.assign(target, value)
                self._check_rebinding_accumulation(target, operand, value, fresh_before)
        elif type(stmt) is cst.Return:
            if stmt.value is not None:
                parts = self.tuple_parts(stmt.value)
                self._record_returned_nested(self.nested_parts if parts is not None else None, stmt.value)
                elements = None if parts is not None else display_parts(stmt.value) or _concatenated_elements(stmt.value)
                items = None
                if parts is None and elements is None:
                    items = self.dict_parts(stmt.value) or self._items_kept(stmt.value)
                self._record_returned_items(items, stmt.value)
                if items is not None:
                    # `return {"seg": head_a(f), "depth": head_b(f)}`: a node per value, as
                    # for a tuple, each kept apart under its key in the caller.
                    values = None
                    value = frozenset().union(*items.values())
                elif parts is not None:
                    # `return net(v1).mean(), net(v2).mean()`: two computations, two nodes
                    # (backwarding one frees nothing of the other), as `a, b = ...` binds them.
                    values = parts
                    value = frozenset().union(*values)
                elif elements is not None:
                    values = [self.eval(e) for e in elements]
                    if not (_display_of_reads(stmt.value) and self.interp.only_leaves(frozenset().union(*values))):
                        values = self.materialise_each(values)
                    value = frozenset().union(*values)
                else:
                    values = None
                    value = self._stored(stmt.value)
                self.frame.returns = self.frame.returns | value
                cls = self.frame.scope.cls
                if cls is not None and (cls.is_module or self.frame.scope.node.name.value in ("forward", "__call__")):
                    # A module's outputs (decoder steps stacked and returned) are the
                    # graph its caller trains through, not a history kept by mistake;
                    # so are a `forward`'s, whatever class of another file it derives
                    # from (torchdrug's tasks sum their criteria's losses), and a
                    # callable object's (a loss decorator summing a loss per dimension).
                    self.interp.facts.returned_sites.update(o[0] for o in value)
                if values is not None:
                    self._record_returned_elements(values, tail=display_parts(stmt.value) is None)
                    self._record_returned_paths(display_parts(stmt.value), len(values))
                elif not (type(stmt.value) is cst.Name and stmt.value.value == "None"):
                    self.frame.returned_plain = True
        elif type(stmt) is cst.Del:
            self._delete(stmt.target)
        elif type(stmt) in (cst.Raise, cst.Assert):
            for child in children(stmt):
                if isinstance(child, cst.BaseExpression):
                    self.eval(child)

    def _stored(self, expr: cst.BaseExpression) -> frozenset:
        """The value a statement stores: a node of its own, unless it only reads (``x = y``)."""
        value = self.evaluated = self.eval(expr)
        if self.passed_through is expr:
            return value
        if _reads_only(expr) or ((_gathers_reads(expr) or expr in self.gathering) and self.interp.only_leaves(value)):
            # `params = [w_xh, w_hh, b]`, `named = list(model.named_parameters())` hold
            # the leaves themselves: gathering parameters runs no forward on them.
            return value
        if type(expr) is cst.Lambda:
            return value  # a function holding its closure's values: no node of its own
        return self.materialise(value)

    def collected(self, exprs, value: frozenset) -> frozenset:
        """What a container keeps when ``exprs`` are put in it: parameters or leaves as
        they are (``by_mesh[k].append(p)`` builds no node), else a node of this statement
        (``outs.append(policy(x))``: the forward's new node alone is one too)."""
        if not value:
            return EMPTY
        if all(_held(expr) or expr in self.gathering for expr in exprs) and self.interp.only_leaves(value - {NEW, ELEMENT}):
            # (`result.append(LayerAndParameter(name, layer, param))`: a record of them.)
            return value - {NEW}
        return self.materialise(value)

    def _record_returned_items(self, items: dict | None, returned: cst.BaseExpression) -> None:
        """Merge one return's per-key values into the frame's (False once the returns
        are not all dict displays with the same literal keys; `return None` aside)."""
        self.frame.returned_items = _merged_per_key(
            self.frame.returned_items, items, returned, lambda a, b: a | b
        )

    def _record_returned_nested(self, nested: dict | None, returned: cst.BaseExpression) -> None:
        """Merge one return's nested tuples of variables into the frame's (see Frame.returned_nested)."""
        self.frame.returned_nested = _merged_per_key(
            self.frame.returned_nested, nested, returned,
            lambda a, b: [x | y for x, y in zip(a, b)] if len(a) == len(b) else None,
        )

    def _keep_nested_parts(self, targets) -> None:
        """``obs, batch = agent.rollout(obs)`` of a helper returning `obs, (log_probs,
        values)`: ``batch[0]`` and ``batch[1]`` keep their own values, so that
        ``log_probs, values = batch`` does not join the actor's graph to the critic's."""
        nested = self.returned_nested
        if not nested or self.no_grad:
            return
        for index, values in nested.items():
            if index < len(targets) and type(targets[index]) is cst.Name:
                path = self.interp.path(self.frame, targets[index])
                if path is not None:
                    for sub, value in enumerate(values):
                        self.state.put(item_path(path, str(sub)), value)

    def _record_returned_paths(self, elements, count: int) -> None:
        """Merge one return's per-position variables into the frame's (None where returns differ)."""
        frame = self.frame
        paths = [
            self.interp.path(frame, element) if type(element) in (cst.Name, cst.Attribute) else None
            for element in (elements if elements is not None and len(elements) == count else [None] * count)
        ]
        known = frame.returned_paths
        if known is None:
            frame.returned_paths = paths
        elif known is not False and len(known) == len(paths):
            frame.returned_paths = [a if a == b else None for a, b in zip(known, paths)]
        else:
            frame.returned_paths = False

    def _parts_handed_back(self, targets, values, paths) -> bool:
        """``loss, n, log = helper(...)`` of a helper returning the parts of its own
        unpacking of an unseen loss object as they are (`loss, n, log = criterion(model,
        sample); optimizer.backward(loss); return loss, n, log`): the targets here hold
        those very parts (no node of this statement) and join the unpacking's targets,
        each remembering which part it is, so that the one the helper backwarded is still
        the loss (see Site.opaque_parts). False, changing nothing, for any other call."""
        sites = self.interp.sites
        unpackings = []  # per position: the opaque unpackings whose target the part was
        for value, inner in zip(values, paths):
            if inner is None:
                return False
            unpackings.append([
                site for site in (sites[o[0]] for o in value if o[0] >= 0) if site.opaque_parts and inner in site.targets
            ])
        if not any(unpackings):
            return False
        for target, found, inner in zip(targets, unpackings, paths):
            path = self.interp.path(self.frame, target)
            if path is not None:
                for site in found:
                    site.targets.add(path)
                    site.part_of[path] = site.part_of.get(inner, inner)
        return True

    def _record_returned_elements(self, values, tail: bool) -> None:
        """Merge one return's parts into the frame's. ``tail``: the last part is a
        concatenation's rest (`[loss] + new_mems`), any number of elements, so a
        return of the head alone (`if new_mems is None: return [loss]`) agrees."""
        frame = self.frame
        known = frame.returned_elements
        if known is False:
            return
        if known is None:
            frame.returned_elements, frame.returned_tail = list(values), tail
            return
        if len(known) > len(values):
            longer, longer_tail, shorter = known, frame.returned_tail, values
        else:
            longer, longer_tail, shorter = values, tail, known
        if len(known) == len(values):
            frame.returned_elements = [a | b for a, b in zip(known, values)]
            frame.returned_tail = frame.returned_tail or tail
        elif longer_tail and len(shorter) == len(longer) - 1:
            frame.returned_elements = [a | b for a, b in zip(shorter, longer)] + [longer[-1]]
            frame.returned_tail = True
        else:
            frame.returned_elements = False

    def _unpack(self, target: cst.BaseExpression, value_expr: cst.BaseExpression) -> bool:
        """``a, b = x, y`` and ``a, b = helper()`` (returning a tuple): element by element."""
        targets = display_parts(target)
        if targets is None:
            return False
        elements = display_parts(value_expr)
        if elements is not None and len(elements) == len(targets):
            if self.site is not None and not _reads_any(elements, bound_names(target)):
                # `a, b = net1(x), net2(x)`: two computations, two nodes (one node for
                # both would make backwarding one free the other, and the step of
                # one network's optimizer modify the other's).
                for item, element in zip(targets, elements):
                    self.assign(item, self.element_node(element))
                return True
            values = self.materialise_each([self.eval(e) for e in elements])
            fresh_before = {loop: self.state.fresh.get(loop, EMPTY) for loop in self.loop_keys}
            for item, value in zip(targets, values):
                self.assign(item, value)
            for item, element, value in zip(targets, elements, values):
                # `rec_sum, kl_sum = rec_sum + rec, kl_sum + kl`: two running sums.
                self._check_rebinding_accumulation(item, element, value, fresh_before)
            return True
        elif type(value_expr) in (cst.Name, cst.Attribute):
            # `loss, n = result`, the parts of a tuple a helper returned (see _keep_returned_parts).
            base = self.interp.path(self.frame, value_expr)
            keys = [item_path(base, str(index)) for index in range(len(targets))]
            env = self.state.env
            if base is None or not all(key in env for key in keys):
                return False
            # All read before any is bound: `inputs, (hx, cx) = inputs` re-binds the base.
            for item, value in zip(targets, [env[key] for key in keys]):
                self.assign(item, value)
            return True
        elif type(value_expr) is cst.Call:
            self.returned_elements, self.returned_plain, self.returned_paths = None, False, None
            self.returned_nested = None
            whole = self.eval(value_expr)
            values = self.returned_elements
            if values and self.returned_paths and len(values) == len(targets):
                if self._parts_handed_back(targets, values, self.returned_paths):
                    for item, value in zip(targets, values):
                        self.assign(item, value)
                    return True
            if len(targets) == 2 and _returns_indices(value_expr):
                values = [whole, EMPTY]  # `_, idx = probs.topk(1)`: the indices have no graph
            if not values or len(values) != len(targets):
                stored = self.materialise(whole)
                if self.site is not None and (
                    not self._calls_a_model(value_expr) or self._hands_a_model_on(value_expr)
                ):
                    # `loss, n, log = criterion(model, sample)`: a function or loss object
                    # unseen, whose parts beside the loss are usually numbers for logging
                    # (a model's method returning parts returns tensors: not this). A
                    # module handed the model is such a loss object too, wherever the
                    # analysis learnt it is a module: the mark stays on the site for every
                    # later solve, so it must not depend on which caller came first.
                    self.site.opaque_parts = True
                for item in targets:
                    self.assign(item, stored)
                return True
            if self.passed_through is value_expr:
                for item, value in zip(targets, values):
                    self.assign(item, value)
                return True
            if self._calls_a_function_of_the_file(value_expr) and _independent(values):
                # A plain function of the file returning parts of separate graphs
                # (`return net(v1).mean(), net(v2).mean()`): each is backwarded on its
                # own, so no node of this statement joins them. (Parts of one graph,
                # `return loss, hidden`, keep the call's node: recurrent state handed
                # back by a helper is found at its call.)
                self.materialise(whole)
                for item, value in zip(targets, values):
                    self.assign(item, value)
                self._keep_nested_parts(targets)
                return True
            # Each part is an output of the call's own forward, but for a part its
            # return built nothing for (`return out, aux, keep.size(0) / n`: a number).
            values = [v | (whole & {NEW}) if v else v for v in values]
        else:
            return False
        for item, value in zip(targets, self.materialise_each(values)):
            self.assign(item, value)
        if type(value_expr) is cst.Call:
            self._keep_nested_parts(targets)
        return True

    def _pack(self, target: cst.BaseExpression, value_expr: cst.BaseExpression) -> bool:
        """``batch = (obs, net(obs))``: each part a node of its own, kept at ``batch[i]``
        for ``obs, values = batch`` to read (as ``a, b = obs, net(obs)`` would bind them);
        the whole holds them all. A list display too: ``losses = [cls_loss, box_loss]``
        keeps ``losses[0]`` apart from ``losses[1]``."""
        path = self.interp.path(self.frame, target) if type(target) is cst.Name else None
        if path is None or _reads_any(display_parts(value_expr) or (), {target.value}):
            return False
        parts = self.tuple_parts(value_expr, lists=True)
        if parts is None:
            return False
        self.assign(target, frozenset().union(*parts))
        for index, part in enumerate(parts):
            self.state.put(item_path(path, str(index)), part)
        return True

    def dict_parts(self, expr: cst.BaseExpression) -> dict[str, frozenset] | None:
        """Path suffix (`['seg']`) -> value of a dict display with literal keys (`{"seg":
        a, "depth": b}`), each value a node of its own as a tuple display's parts are
        (see tuple_parts)."""
        items = _keyed_items(expr)
        if not items or self.site is None:
            return None
        keys = [key for key, _ in items]
        if None in keys or len(set(keys)) != len(keys):
            return None
        holding = [f"{self.frame.prefix}<value {key!r} of the dict at {id(expr)}>" for key in keys]
        for hold, (_, element) in zip(holding, items):
            value = self.eval(element) if _reads_only(element) else self.element_node(element)
            self.state.put(hold, value)  # (into the state the evaluation left: a helper replaces it)
        return {item_path("", key): self.state.env.pop(hold) for key, hold in zip(keys, holding)}

    def _items_kept(self, expr: cst.BaseExpression) -> dict[str, frozenset] | None:
        """Path suffix -> value of what the state keeps right below a returned variable:
        the items of a dict (`out = {"loss": l}; out["stat"] = s.detach(); return out`)
        and the attributes of an object this frame built (`res = Result(); res.scores =
        torch.cat(chunks); return res`). The caller reads each as the helper built it.
        (A key written at run time is in every item already, see State.add; one the
        helper never wrote reads the whole dict.)"""
        path = self.interp.path(self.frame, expr) if type(expr) is cst.Name else None
        if path is None:
            return None
        state = self.state
        items = {item_path("", key): state.env[held] for key, held in state.string_items(path).items()}
        if self.frame.prefix and path.startswith(self.frame.prefix) and not state.env.get(path):
            # (Only a local holding no graph of its own: an instance, not a tensor given
            # attributes, whose own value the suffixes would leave out.)
            items.update(state.attributes(path))
        return items or None

    def tuple_parts(self, expr: cst.BaseExpression, lists: bool = False) -> list[frozenset] | None:
        """The values of the parts of a tuple display (`(obs, net(obs))`), or with
        ``lists`` of a list display: each a node of its own, but a part that only reads
        a value holds that value (as `x = y` does)."""
        elements = display_parts(expr) if type(expr) is cst.Tuple or (lists and _list_of_values(expr)) else None
        if elements is None or self.site is None:
            return None
        # Each part waits in the state while the next are evaluated, so that a helper
        # run again by a later part (`return loss_fn(a), loss_fn(b)`) ages the node its
        # first run gave the earlier part, as it would a variable's.
        keys = [f"{self.frame.prefix}<part {index} of the tuple at {id(expr)}>" for index in range(len(elements))]
        nested: dict[int, list[frozenset]] = {}
        for index, (key, element) in enumerate(zip(keys, elements)):
            inner = display_parts(element) if type(element) is cst.Tuple else None
            if inner and all(_reads_only(e) for e in inner):
                # `(log_probs, values)`: a tuple of variables computes nothing; its parts
                # stay apart (see _keep_nested_parts) and it holds what they hold.
                nested[index] = [self.eval(e) for e in inner]
                part = frozenset().union(*nested[index])
            else:
                part = self.eval(element) if _reads_only(element) else self.element_node(element)
            self.state.put(key, part)  # (into the state the evaluation left: a helper replaces it)
        self.nested_parts = nested  # (set last: evaluating a part may display tuples of its own)
        return [self.state.env.pop(key) for key in keys]

    def _calls_a_function_of_the_file(self, call: cst.Call) -> bool:
        """`losses(net, v1, v2)` of a `def` of the file (a closure included), or
        `self.update(v1, v2)` of a class of the file: a module's method other than its
        forward too (pl_bolts' SAC `self.loss(batch)` returning three losses of three
        forwards). The caller checks that the parts share no node."""
        func, program = call.func, self.interp.program
        if type(func) is cst.Name:
            name = func.value
            return name in self.frame.local_defs or (name in program.functions and name not in self.frame.scope.locals)
        if type(func) is not cst.Attribute:
            return False
        owner = func.value
        kinds = self.interp.kinds(self.frame, owner)
        cls = program.class_of_instance(kinds) if kinds else None
        if cls is None and type(owner) is cst.Name and owner.value == "self":
            cls = self.frame.scope.cls
        method = func.attr.value
        if cls is None or (cls.is_module and method in ("forward", "__call__")):
            return False
        return program.method(cls, method) is not None

    def _calls_a_model(self, call: cst.Call) -> bool:
        """`model(x)`, `model.create_bpr_loss(u, p, n)`: a call of a model or of its method;
        `self(x)` in a module's own method (a LightningModule's `training_step`)."""
        func = call.func
        owner = func.value if type(func) is cst.Attribute else func
        cls = self.frame.scope.cls
        if type(owner) is cst.Name and owner.value == "self" and cls is not None and cls.is_module:
            return True
        return MODULE in self.interp.kinds(self.frame, owner)

    def _hands_a_model_on(self, call: cst.Call) -> bool:
        """`criterion(model, sample)`: a call given a model, which it runs (a loss object)."""
        return any(MODULE in self.interp.kinds(self.frame, arg.value) for arg in call.args if not arg.star)

    def element_node(self, element: cst.BaseExpression, only_new: bool = False) -> frozenset:
        """Evaluate one element of a tuple and store it as a node of its own (a site keyed by it).
        ``only_new``: only when the element builds a node (else its value as it is)."""
        statement = (self.site, self.produced, self.callees)
        self.site, self.produced, self.callees = self.interp.site(element), 0, set()
        try:
            value = self.eval(element)
            return value if only_new and NEW not in value else self.materialise(value)
        finally:
            site, produced, callees = statement
            self.site, self.produced, self.callees = site, max(produced, self.produced), callees | self.callees

    def materialise_each(self, values: list) -> list:
        """Materialise the parts of one statement's value together (one site execution)."""
        self.materialise(frozenset().union(*values) if values else EMPTY)
        return [self._part(value) for value in values]

    def _part(self, value: frozenset) -> frozenset:
        """One part of the value this statement stored (materialised already): a node of
        the statement, unless the part holds only weak values (a string read from a
        file, a lookup in a dict built from one), which are no node of the graph the
        statement's other parts carry (`return vocab[i.item()], hidden`)."""
        if not value or self.no_grad:
            return EMPTY
        interp, site = self.interp, self.site.id
        inputs = frozenset(older(o) if o[0] == site else o for o in value - {NEW})
        if NEW not in value and PARAMS not in inputs and interp.strength(inputs) < LIKELY and not any(
            interp.sites[o[0]].leaf for o in inputs if o[0] >= 0
        ):
            return inputs
        return inputs | {(site, 0)}

    def _keep_returned_parts(self, target: cst.BaseExpression, raw: frozenset) -> None:
        """``result = helper()`` of a helper returning a tuple: ``result[0]``, ``result[1]``
        keep their own values, for ``loss, n = result`` or ``result[1]`` to read."""
        values = self.returned_elements
        path = self.interp.path(self.frame, target)
        if path is None or self.no_grad or self.site is None:
            return
        items = self.returned_items
        if items:  # `preds = model(x)` of a forward returning `{"seg": ..., "depth": ...}`
            for suffix, value in items.items():
                self.state.put(path + suffix, self._part(value | (raw & {NEW}) if value else value))
            return
        if not values or self.returned_plain:
            return
        for index, value in enumerate(values):
            self.state.put(item_path(path, str(index)), self._part(value | (raw & {NEW}) if value else value))

    def materialise(self, value: frozenset) -> frozenset:
        """Turn an evaluated right-hand side into the value this statement stores."""
        if self.no_grad or not value:
            return EMPTY
        interp, site = self.interp, self.site
        inputs = value - {NEW}
        strength = max(self.produced, interp.strength(inputs))
        uses_parameters = PARAMS in inputs or any(interp.sites[o[0]].leaf for o in inputs if o[0] >= 0)
        if uses_parameters:
            strength = 3
        if self.leaf_created and not (inputs - {PARAMS}):
            site.leaf = True  # `w = torch.randn(..., requires_grad=True)`: a leaf, never freed
        elif uses_parameters:
            # An operation on parameters is a forward even when no module call is in
            # sight (`h.mm(self.w_hh)` in a hand-written cell): the helper running it
            # is a forward call whose arguments may carry recurrent state.
            interp.forwards_run += 1
        site.strength = max(site.strength, strength)
        if self.callees:
            site.callee_sets.add(frozenset(self.callees))
        site.loops.update(self.loop_keys)
        if self.loop_keys:
            site.innermost.add(self.loop_keys[-1])
            site.loop_chains.add(self.loop_keys)
        self.state.refresh(site.id)
        aged = frozenset(older(o) if o[0] == site.id else o for o in inputs)
        return aged | {(site.id, 0)}

    def assign_iterated(self, target: cst.BaseExpression, iterable: cst.BaseExpression, value: frozenset) -> None:
        """Bind a `for` target to the elements of ``iterable`` (whose value is ``value``)."""
        key = _key_target(target, iterable)
        if key is None:
            self.assign(target, value, element=True)
            return
        self.assign(key, EMPTY, element=True)
        self.assign(target.elements[1].value, value, element=True)

    def assign(self, target: cst.BaseExpression, value: frozenset, element: bool = False) -> None:
        if type(target) in (cst.Tuple, cst.List):
            for item in target.elements:
                self.assign(item.value, value, element)
            return
        if type(target) is cst.StarredElement:
            self.assign(target.value, value, element)
            return
        if type(target) is cst.Name and target.value in self.frame.aliases:
            # Re-binding `self` makes it a local; the caller's object is untouched. (Other
            # parameters a helper re-binds are locals from the start: see calls.inline.)
            del self.frame.aliases[target.value]
        path = self.interp.path(self.frame, target)
        if type(target) is cst.Subscript:
            self._subscript_write(target, value)
            if self.no_grad and self._tensor_buffer(target.value):
                value = EMPTY  # `stats[i] = loss` under no_grad copies the numbers in
            if path is None:
                base = self.interp.path(self.frame, target.value)
                graph_free = not (value - {NEW}) or self.interp.only_leaves(value - {NEW})
                if base is not None and graph_free and self._replaces_every_element(target):
                    # `for i, h in enumerate(states): states[i] = h.detach()`, `for k in
                    # mems: mems[k] = mems[k].detach()`: element by element, the loop
                    # leaves no graph in the container (a weak update would keep every
                    # element's old graph there).
                    self.state.set(base, value - {NEW})
                    self._cut(base)
                    return
                if base is not None:
                    if value and (self._indexed_by_the_iteration(target) or self._tensor_buffer(target.value)):
                        # `history[epoch] = loss`: a slot per iteration keeps each one's
                        # value, as `append` does. A write into a tensor (`bank[idx] = l`,
                        # `torch.zeros(n)` first) chains the buffer's earlier writes
                        # into its graph, whatever slot it writes. Either is a node of
                        # this statement, as an append is: a backward of the container's
                        # sum (`sum(self.meta_losses).backward()`) makes it the objective.
                        if not self.interp.only_leaves(value - {NEW}):
                            value = self.materialise(value)
                        self._accumulation(target.value, value, value)
                    self.state.add(base, value)
                return
        if path is None:
            return
        if type(target) is cst.Attribute and target.attr.value == "data":
            value = EMPTY  # `p.data = clamp(p)` copies numbers into p: no graph, p stays a leaf
        if value and self.interp.kinds(self.frame, target) & _NEVER_TENSORS:
            # An optimizer built by a class graphlint does not know holds parameters,
            # but is no graph of its own: `amp.scale_loss(loss, optimizer)` passes it on.
            # Nor is text (`label = module(text)` later printed as `"LABEL: " + label`).
            value = value & {PARAMS}
        if path == self.constructed:
            self.state.put(path, value)  # keep the attributes its __init__ set
        else:
            self.state.set(path, value)
        if self.site is not None:
            self.site.targets.add(path)
        for loop in self.loop_keys:
            self.state.fresh[loop] = self.state.fresh.get(loop, EMPTY) | {path}
        if not value and self.loop is not None:
            self._cut(path)

    def becomes_leaf(self, tensor: cst.BaseExpression) -> None:
        """``x.requires_grad = True`` / ``x.requires_grad_()``: from here on ``x`` is a
        leaf that requires grad (an attack's input image), like a tensor created with
        ``requires_grad=True``."""
        path = self.interp.path(self.frame, tensor)
        if path is None or self.no_grad:
            return
        self.produced = max(self.produced, CERTAIN)
        self.leaf_created = True
        leaf = self.materialise(frozenset({NEW}))
        self.state.set(path, leaf)
        if type(tensor) is cst.Name and tensor.value in self.frame.iterating:
            # `for w in weights: w.requires_grad_()`: the container holds leaves now.
            self.state.add(self.frame.iterating[tensor.value], leaf)

    def _cut(self, path: str) -> None:
        if not self.interp.recording:
            return
        for loop in self.loop_keys:
            self.interp.facts.cut_paths.setdefault(loop, set()).add(path)

    def _delete(self, target: cst.BaseExpression) -> None:
        if type(target) in (cst.Tuple, cst.List):
            for item in target.elements:
                self._delete(item.value)
            return
        if type(target) is cst.Subscript and self.interp.path(self.frame, target) is None:
            # `del history[:]` empties the container (a `del d[k]` of one key is rare in loops).
            target = target.value
        path = self.interp.path(self.frame, target)
        if path is not None:
            self.state.set(path, EMPTY)

    def _split_keys(self, target: cst.BaseExpression, value_expr: cst.BaseExpression) -> None:
        """``state = {"model": model, "optimizer": optimizer, "iter_num": 0}``: each constant
        key holds its own value, so ``state["model"]`` reads the model alone (the dict as a
        whole still holds them all: State.get merges its items). A value computed here
        (``{"loss": a + b, "n": x.shape[0]}``) holds the statement's node, or nothing."""
        items = _keyed_items(value_expr)
        if items is None or self.no_grad:
            return
        keys = [key for key, _ in items]
        path = self.interp.path(self.frame, target)
        # (A large table stays one value: every item is a path the state walks.)
        if path is None or None in keys or len(set(keys)) != len(keys) or len(keys) > _MAX_SPLIT_KEYS:
            return
        state = self.state
        whole = state.get(path)
        state.set(path, EMPTY)
        for key, element in items:
            part = self.eval_quiet(element)
            if part and not _held(element):
                part = whole
            state.put(item_path(path, key), part)

    def _subscript_write(self, target: cst.Subscript, value: frozenset) -> None:
        """``group['lr'] = value`` on an optimizer's param group is a hyperparameter write."""
        if self._is_param_group(target.value) and self.interp.recording:
            self.interp.facts.hyperparameters.append(
                ev.HyperparameterWrite(self.stmt, target, value, self.loop)
            )

    def _extends_a_list(self, target: cst.BaseExpression) -> bool:
        """``target += ...`` on a name first bound to a list display (``result = []``)."""
        if type(target) is not cst.Name:
            return False
        first = self.program.first_assignment(self.frame.scope, target.value)
        return type(first) in (cst.List, cst.ListComp)

    def _indexed_by_the_iteration(self, target: cst.Subscript) -> bool:
        """Whether an index of ``target`` is the innermost loop's count (`for i in
        range(n)`, `for i, x in enumerate(...)`): each iteration writes a slot of its
        own (`losses[i]`, `table[epoch, i]`, `out[:, t]`). A constant key, a computed
        one (`ring[step % k]`) or an item of the data (`state[user_id]`) may write
        the same slot again."""
        loop, cfg = self.loop, self.frame.cfg
        if loop is None or loop[0] != id(cfg):
            return False
        stmt = cfg.nodes[loop[1]].stmt
        binding = counter_binding(stmt) if type(stmt) is cst.For else ()
        count = binding[0] if binding else None
        return count is not None and any(
            type(element.slice) is cst.Index and type(element.slice.value) is cst.Name and element.slice.value.value == count
            for element in target.slice
        )

    def _replaces_every_element(self, target: cst.Subscript) -> bool:
        """Whether ``target`` is ``c[i]`` written in every iteration of a loop over every
        index or key of ``c`` (see _element_slot), or in every one whose element is not
        None (see _written_unless_none: a None element holds no graph either)."""
        loop, cfg = self.loop, self.frame.cfg
        if loop is None or loop[0] != id(cfg):
            return False
        header = cfg.nodes[loop[1]].stmt
        if not _element_slot(header, target):
            return False
        return self.runs_every_iteration() or any(_written_unless_none(header, line) is self.stmt for line in header.body.body)

    def _tensor_buffer(self, expr: cst.BaseExpression) -> bool:
        """A name first bound to a new tensor (`stats = torch.zeros(n)`): a write into
        it copies values, where one into a list or dict keeps the object."""
        if type(expr) is not cst.Name:
            return False
        first = self.interp.program.first_assignment(self.frame.scope, expr.value)
        if type(first) is not cst.Call:
            return False
        qualified = self.interp.program.imports.qualify(first.func)
        return qualified is not None and is_torch_factory(qualified)

    def _reads_a_hyperparameter(self, expr: cst.Subscript) -> bool:
        """``group["lr"]``, ``opt.param_groups[0]["lr"]``: a hyperparameter the code has
        not written here (a write is read back above), not the group's parameters."""
        if len(expr.slice) != 1 or type(expr.slice[0].slice) is not cst.Index:
            return False
        key = constant_string(expr.slice[0].slice.value)
        return key is not None and key != "params" and self._is_param_group(expr.value)

    def _is_param_group(self, expr: cst.BaseExpression) -> bool:
        if PARAM_GROUP in self.interp.kinds(self.frame, expr):
            return True
        if type(expr) is cst.Subscript and type(expr.value) is cst.Attribute:
            return expr.value.attr.value == "param_groups"
        if type(expr) is cst.Attribute and expr.attr.value == "defaults":
            return True
        return False

    def augmented(self, stmt: cst.AugAssign) -> None:
        self.add_in_place(stmt.target, stmt.value)

    def add_in_place(self, target: cst.BaseExpression, operand: cst.BaseExpression) -> None:
        """``target += operand``, or the statement ``target.add_(operand)``."""
        added = self.eval(operand)
        old = self.eval(target)
        if (self._extends_a_list(target) or _gathers_reads(operand)) and self.interp.only_leaves((old | added) - {NEW}):
            # `result += get_layers_and_params(child)`: records of parameters, extended;
            # `self.gen_variables += list(generator.parameters())`: the parameters, gathered.
            value = old | added
        else:
            value = self.materialise(old | added)
        if type(target) is cst.Subscript and self._is_param_group(target.value):
            self._subscript_write(target, value)
        else:
            # `total += criterion(model(x), y)`: the node this very statement builds is added too.
            built = {(self.site.id, 0)} if NEW in added and value and self.site is not None else set()
            self._accumulation(target, (added - {NEW}) | built, value, operand)
        path = self.interp.path(self.frame, target)
        if path is not None:
            fresh = {loop: self.state.fresh.get(loop, EMPTY) for loop in self.loop_keys}
            self.state.set(path, value)
            self.state.fresh.update(fresh)  # `acc += x` does not re-create acc
        elif type(target) is cst.Subscript:
            base = self.interp.path(self.frame, target.value)
            if base is not None:
                self.state.add(base, value)

    def _assignment(self, stmt: cst.Assign | cst.AnnAssign, targets: list, value_expr: cst.BaseExpression) -> None:
        """``a = b = value`` (``targets``: a and b), or ``a: T = value``."""
        self._record_resets(stmt, targets, value_expr)
        if len(targets) == 1 and _sets_requires_grad(targets[0], value_expr):
            self.becomes_leaf(targets[0].value)
            return
        if len(targets) == 1:
            self.construct_target = self.interp.path(self.frame, targets[0])
            if self._unpack(targets[0], value_expr):
                return
            if self._pack(targets[0], value_expr):
                return
        self.returned_elements, self.returned_plain, self.returned_items = None, False, None
        value = self._stored(value_expr)
        # What was re-created in this iteration before the statement (`acc = acc + x`
        # does not re-create acc; an `x = f(x)` after `x = g()` reads this iteration's x).
        fresh_before = {loop: self.state.fresh.get(loop, EMPTY) for loop in self.loop_keys}
        for target in targets:
            self.assign(target, value)
            self._split_keys(target, value_expr)
            if type(value_expr) is cst.Call and self.passed_through is not value_expr:
                self._keep_returned_parts(target, self.evaluated)
        if len(targets) == 1:
            self._check_rebinding_accumulation(targets[0], value_expr, value, fresh_before)

    def _record_resets(self, stmt: cst.Assign | cst.AnnAssign, targets: list, value_expr: cst.BaseExpression) -> None:
        """``acc = 0`` somewhere in a loop bounds what ``acc += loss`` there can retain."""
        if not self.interp.recording or self.loop is None:
            return
        pairs = [(target, value_expr) for target in targets]
        for target in targets:
            # `log_probs, rewards = [], []`: each name is reset by its own element.
            pairs += paired_parts(target, value_expr) or ()
        if stmt in self.interp.sentinel_initialisations(self.frame.scope):
            return  # `if acc is None: acc = loss` runs once: it bounds nothing
        for target, value in pairs:
            path = self.interp.path(self.frame, target)
            if path is None:
                continue
            # `d = {k: 0 for k in d}` reads only d's keys: still a reset.
            if _fresh_container(value) or not self._reads_its_own_value(target, path, value):
                self.record_reset(path)

    def record_reset(self, path: str) -> None:
        """``path`` starts over here (re-assigned, or detached in place) in the loops around."""
        if not self.interp.recording or self.loop is None:
            return
        for loop in self.loop_keys:
            self.interp.facts.reset_paths.setdefault(loop, set()).add(path)
        if self.runs_every_iteration():
            self.interp.facts.every_iteration_resets.setdefault(self.loop, set()).add(path)

    def _reads_its_own_value(self, target: cst.BaseExpression, path: str, value: cst.BaseExpression) -> bool:
        """Whether the value assigned to ``path`` reads it: ``acc + x``, and for ``d[k]``
        also ``d.get(k, 0) + x`` (an update, not a reset)."""
        paths = {self.interp.path(self.frame, node) for node in _names_in(value)}
        if path in paths:
            return True
        if type(target) is not cst.Subscript:
            return False
        container = self.interp.path(self.frame, target.value)
        return container is not None and any(self._looks_up(node, container) for node in descendants(value))

    def _looks_up(self, node: cst.CSTNode, container: str) -> bool:
        """`d.get(k, 0)` / `d.setdefault(k, 0)` of the dict at ``container``: a read of its item."""
        return (
            type(node) is cst.Call
            and type(node.func) is cst.Attribute
            and node.func.attr.value in ("get", "setdefault")
            and self.interp.path(self.frame, node.func.value) == container
        )

    def runs_every_iteration(self) -> bool:
        """Whether this statement runs in every iteration of its innermost loop of this
        function: it lies in the loop's body, outside any ``if``, ``try`` or inner loop
        (``with`` blocks aside). In a helper without loops of its own: it lies in the
        helper's body, outside any block, and the helper's call runs in every iteration."""
        header = self.node.loop
        if header is not None:
            blocks = [self.frame.cfg.nodes[header].stmt.body.body]
        elif self.frame.called_every_iteration and type(self.frame.scope.node) is cst.FunctionDef:
            blocks = [self.frame.scope.node.body.body]
        else:
            return False
        while blocks:
            for line in blocks.pop():
                if type(line) is cst.SimpleStatementLine and any(small is self.stmt for small in line.body):
                    return True
                if type(line) is cst.With:
                    blocks.append(line.body.body)
        return False

    def loop_around_the_optimizers(self, optimizer: cst.BaseExpression) -> tuple[tuple, bool] | None:
        """For ``optimizer`` the target of this statement's innermost loop (`for optim in
        optimizers: optim.step()`): the key of the loop around that one in this function,
        and whether every iteration of it runs this statement."""
        keys, cfg = self.loop_keys, self.frame.cfg
        if type(optimizer) is not cst.Name or len(keys) < 2 or keys[-1][0] != id(cfg) or keys[-2][0] != id(cfg):
            return None
        inner = cfg.nodes[keys[-1][1]].stmt
        if type(inner) is not cst.For or type(inner.target) is not cst.Name or inner.target.value != optimizer.value:
            return None
        outer = cfg.nodes[keys[-2][1]].stmt
        return keys[-2], self.runs_every_iteration() and _directly_in(outer.body.body, inner)

    def _check_rebinding_accumulation(
        self, target: cst.BaseExpression, value_expr: cst.BaseExpression, value: frozenset, fresh_before: dict
    ) -> None:
        """``acc = acc + x`` accumulates like ``acc += x``; so do ``d[k] = d.get(k, 0) + x``,
        a running mean, ``acc = (acc * i + x) / (i + 1)``, and a dict of running
        values rebuilt from itself (``ema = {k: 0.9 * ema[k] + 0.1 * v for k, v in
        losses.items()}``)."""
        if self._rebuilt_from_its_items(target, value_expr):
            self.state.fresh.update(fresh_before)
            self._accumulation(target, value, value)
            return
        update = _update_past_sentinel(value_expr, target)
        operands = self._joined_tensors(update)
        if operands is None:
            if type(update) is not cst.BinaryOperation:
                return
            left = update.left
            if type(update.operator) is cst.Divide and type(left) is cst.BinaryOperation and type(left.operator) is cst.Add:
                update = left  # a running mean: `mloss = (mloss * i + loss_items) / (i + 1)`
            operands = (update.left, update.right)
        path = self.interp.path(self.frame, target)
        # `d[k] = d.get(k, 0) + x`: the key may be known (`k` bound from a dict
        # literal's keys) or computed at run time (no path of its own).
        container = self.interp.path(self.frame, target.value) if type(target) is cst.Subscript else None
        if path is None and container is None:
            return
        others = [op for op in operands if not self._reads_accumulator(op, path, container)]
        if len(others) != 1:
            return
        added = self.eval_quiet(others[0])
        # The accumulator was re-bound by this very statement: undo its freshness.
        self.state.fresh.update(fresh_before)
        self._accumulation(target, added, value, others[0])

    def _rebuilt_from_its_items(self, target: cst.BaseExpression, value_expr: cst.BaseExpression) -> bool:
        """Whether ``value_expr`` is a dict comprehension whose values add to the
        target's own items (``{k: ema[k] * 0.9 + 0.1 * v ...}`` assigned to ``ema``)."""
        if type(value_expr) is not cst.DictComp or type(value_expr.value) is not cst.BinaryOperation:
            return False
        path = self.interp.path(self.frame, target) if type(target) is cst.Name else None
        if path is None:
            return False
        update = value_expr.value
        return any(
            self._reads_accumulator(operand, None, path)
            for operand in (update.left, update.right)
            if type(operand) is cst.Subscript or type(operand) is cst.BinaryOperation
        )

    def _joined_tensors(self, update: cst.BaseExpression) -> list | None:
        """The tensors `torch.cat((acc, out))` (or `stack`, `vstack`, `hstack`) joins: an
        accumulator grown by re-binding, as `acc = acc + out` is."""
        if type(update) is not cst.Call or not update.args:
            return None
        qualified = self.interp.program.imports.qualify(update.func) or ""
        if qualified not in ("torch.cat", "torch.concat", "torch.stack", "torch.vstack", "torch.hstack"):
            return None
        return display_parts(update.args[0].value)

    def _reads_accumulator(self, operand, path: str | None, container: str | None) -> bool:
        """Whether ``operand`` reads the accumulator: ``acc``, or for ``d[k]``: ``d[k]`` / ``d.get(k, 0)``;
        also scaled, as a moving average does (``ema = 0.9 * ema + 0.1 * loss``)."""
        if type(operand) is cst.BinaryOperation and type(operand.operator) in (cst.Multiply, cst.Divide):
            return self._reads_accumulator(operand.left, path, container) or (
                type(operand.operator) is cst.Multiply and self._reads_accumulator(operand.right, path, container)
            )
        if path is not None and self.interp.path(self.frame, operand) == path:
            return True
        if container is None:
            return False
        if type(operand) is cst.Subscript:
            return path is None and self.interp.path(self.frame, operand.value) == container
        return self._looks_up(operand, container)

    def read_paths(self, expr: cst.BaseExpression | None, arguments: bool = False) -> frozenset[str]:
        """The variables (names, attributes, items) an expression reads, outermost only;
        with ``arguments``, also those its calls are given (`scaler.scale(loss)` reads loss)."""
        paths = set()
        stack = [expr] if expr is not None else []
        while stack:
            node = stack.pop()
            path = self.interp.path(self.frame, node) if type(node) in (cst.Name, cst.Attribute, cst.Subscript) else None
            if path is not None:
                paths.add(path)
                continue
            for child in children(node):
                if arguments and type(child) is cst.Arg:
                    stack.append(child.value)
                elif isinstance(child, cst.BaseExpression):
                    stack.append(child)
        return frozenset(paths)

    def _accumulation(self, target, added: frozenset, stored: frozenset, operand=None) -> None:
        if not self.interp.recording or self.loop is None:
            return
        if PARAMS in added and operand is not None and not _reads_only(operand) and self.site is not None:
            # `shadow = 0.99 * shadow + 0.01 * p` outside no_grad: arithmetic on a
            # parameter is a node of this statement (a parameter itself is a leaf).
            added = (added - {PARAMS}) | {(self.site.id, 0)}
        path = self.interp.path(self.frame, target)
        if path is None and type(target) is cst.Subscript:
            path = self.interp.path(self.frame, target.value)
        if path is None:
            return
        outlived = []
        frame = self.frame
        # A helper's local is bound afresh by each call: it cannot outlive a loop of
        # the caller (`values = values + [next_value]` in a GAE helper).
        local = bool(frame.prefix) and path.startswith(frame.prefix)
        for loop in self.loop_keys:
            if local and loop in frame.loop_stack:
                continue
            if self._outlives(path, self.state.fresh.get(loop, EMPTY)):
                outlived.append(loop)
        self.interp.facts.accumulations.append(
            ev.Accumulation(
                self.stmt, target, path, added, self.site.id if self.site else -1,
                self.loop, self.loop in outlived, self.no_grad, loops=tuple(self.loop_keys),
                outlived=tuple(outlived), sources=self.read_paths(operand, arguments=True),
            )
        )

    def _outlives(self, path: str, fresh: frozenset) -> bool:
        root = path
        while True:
            if root in fresh:
                return False
            cut = max(root.rfind("."), root.rfind("["))
            if cut <= 0:
                return True
            root = root[:cut]

    # ----- expressions -----
    def eval_quiet(self, expr: cst.BaseExpression) -> frozenset:
        saved = self.interp.recording
        self.interp.recording = False
        try:
            return self.eval(expr)
        finally:
            self.interp.recording = saved

    def eval(self, expr: cst.BaseExpression) -> frozenset:
        method = getattr(self, "_eval_" + type(expr).__name__, None)
        if method is not None:
            return method(expr)
        return self._eval_children(expr)

    def _eval_children(self, node: cst.CSTNode) -> frozenset:
        value = EMPTY
        for child in children(node):
            if isinstance(child, cst.BaseExpression):
                value = value | self.eval(child)
            elif isinstance(child, (cst.BaseElement, cst.BaseDictElement, cst.Arg, cst.FormattedStringExpression)):
                value = value | self._eval_children(child)
        return value

    def _eval_Name(self, expr: cst.Name) -> frozenset:
        if expr.value in ("True", "False", "None"):
            return EMPTY
        path = self.interp.path(self.frame, expr)
        return self.state.get(path) if path is not None else EMPTY

    def _eval_Attribute(self, expr: cst.Attribute) -> frozenset:
        if expr.attr.value in CUTTING_ATTRIBUTES:
            self.eval(expr.value)
            return EMPTY
        path = self.interp.path(self.frame, expr)
        if path is not None and self.state.has(path):
            return self.state.get(path)
        value = self.eval(expr.value)
        if expr.attr.value not in TENSOR_VIEW_ATTRIBUTES and self.interp.only_leaves(value):
            return EMPTY  # `param.grad_batch`: something kept on a parameter, not the parameter
        return value

    def _eval_Subscript(self, expr: cst.Subscript) -> frozenset:
        path = self.interp.path(self.frame, expr)
        if path is not None and self.state.has(path):
            return self.state.get(path)
        tail = self._tail_of_parts(expr)
        if tail is not None:
            return tail
        listed = self._items_of_listed_keys(expr)
        if listed is not None:
            return listed
        if self._reads_a_hyperparameter(expr):
            return EMPTY
        if _indices_of_a_reduction(expr):
            self.eval(expr.value)  # the reduction's own calls still run
            return EMPTY
        # One plain index reads an element (`outs[i]`, `batch["x"]`); several, a slice or
        # an Ellipsis (`q[..., 0]`, `q[:, 0]`, `x[i, j]`) index a tensor.
        single = len(expr.slice) == 1
        for element in expr.slice:
            if type(element.slice) is cst.Index:
                self.eval(element.slice.value)
                single = single and type(element.slice.value) is not cst.Ellipsis
                single = single and not self._tensor_of_indices(element.slice.value)
            else:
                single = False
        value = self.eval(expr.value)
        if not single or not value or not self.state.has(self.interp.path(self.frame, expr.value) or ""):
            return value
        # An item of a container stands for any of them (see ELEMENT); an index into
        # one call's output (`soft[idx]` of `soft = softmax(teacher(X))`) reads its graph.
        return value if self._output_of_one_call(value) else value | {ELEMENT}

    def _items_of_listed_keys(self, expr: cst.Subscript) -> frozenset | None:
        """``out[key]`` in ``for key in ("entropy", "kl"):``, each key an item the state
        keeps: those items, not the whole dict (where the loss sits too)."""
        if len(expr.slice) != 1 or type(expr.slice[0].slice) is not cst.Index:
            return None
        index = expr.slice[0].slice.value
        base = self.interp.path(self.frame, expr.value) if type(index) is cst.Name else None
        if base is None:
            return None
        cfg = self.frame.cfg
        for loop in reversed(self.loop_keys):
            stmt = cfg.nodes[loop[1]].stmt if loop[0] == id(cfg) else None
            if type(stmt) is not cst.For or type(stmt.target) is not cst.Name or stmt.target.value != index.value:
                continue
            if type(stmt.iter) not in (cst.Tuple, cst.List):
                return None
            keys = [constant_string(element.value) for element in stmt.iter.elements]
            paths = [item_path(base, key) for key in keys if key is not None]
            if not paths or len(paths) != len(keys) or not all(path in self.state.env for path in paths):
                return None
            return frozenset().union(*(self.state.env[path] for path in paths))
        return None

    def _tensor_of_indices(self, index: cst.BaseExpression, depth: int = 2) -> bool:
        """``labels[batch_indices]`` with ``batch_indices = torch.tensor(...)`` (or a slice
        of ``order = torch.randperm(n)``): a tensor indexed by a tensor, no list's item."""
        if type(index) is cst.Subscript and depth:
            return self._tensor_of_indices(index.value, depth - 1)
        if type(index) is not cst.Name:
            return False
        bound = self.program.first_assignment(self.frame.scope, index.value)
        if type(bound) is cst.Subscript and depth:
            return self._tensor_of_indices(bound.value, depth - 1)
        if type(bound) is not cst.Call or not dotted(bound.func):
            return False
        qualified = self.program.imports.qualify(bound.func) or ""
        return qualified.startswith("torch.")

    def _output_of_one_call(self, value: frozenset) -> bool:
        """Whether ``value`` is what assignments of a call's result hold (a tensor, or a
        forward's tuple of outputs: one graph), not a container of separate ones."""
        if ELEMENT in value:
            return False
        found = {origin[0] for origin in value if origin[0] >= 0}
        return bool(found) and all(_holds_a_call_result(self.interp.sites[site].stmt) for site in found)

    def _tail_of_parts(self, expr: cst.Subscript) -> frozenset | None:
        """``ret[1:]`` of a value whose parts a helper's return kept (``ret[0]``,
        ``ret[1]``, ...; see _keep_returned_parts): the parts from that index on.
        None when the slice is not ``[n:]`` or the parts are not known up to ``n``."""
        if len(expr.slice) != 1 or type(expr.slice[0].slice) is not cst.Slice:
            return None
        bounds = expr.slice[0].slice
        if bounds.upper is not None or bounds.step is not None or type(bounds.lower) is not cst.Integer:
            return None
        base = self.interp.path(self.frame, expr.value)
        if base is None:
            return None
        env, start = self.state.env, int(bounds.lower.value, 0)
        count = 0
        while item_path(base, str(count)) in env:
            count += 1
        if count <= start:
            return None
        return frozenset().union(*(self.state.get(item_path(base, str(i))) for i in range(start, count)))

    def _eval_Comparison(self, expr: cst.Comparison) -> frozenset:
        self.eval(expr.left)
        for comparison in expr.comparisons:
            self.eval(comparison.comparator)
        return EMPTY

    def _eval_IfExp(self, expr: cst.IfExp) -> frozenset:
        """Both branches may be taken; a branch that is the tested value where it is no
        tensor (``v.item() if torch.is_tensor(v) else v``) or None holds nothing."""
        self.eval(expr.test)
        value = EMPTY
        for branch, taken in ((expr.body, True), (expr.orelse, False)):
            narrowed = no_graph_side(expr.test, taken)
            narrowed_path = self.interp.path(self.frame, narrowed) if narrowed is not None else None
            part = self.eval(branch)
            if narrowed_path is not None and self.interp.path(self.frame, branch) == narrowed_path:
                part = EMPTY
            value = value | part
        return value

    def _eval_UnaryOperation(self, expr: cst.UnaryOperation) -> frozenset:
        value = self.eval(expr.expression)
        return EMPTY if type(expr.operator) is cst.Not else value

    def _eval_Lambda(self, expr: cst.Lambda) -> frozenset:
        """What the function may hand back of its closure: the values of the names its
        body reads that are not its parameters (`lambda x: cat((x, hiddens.pop()))`)."""
        params = {param.name.value for param in expr.params.params}
        value = EMPTY
        for name in read_names(expr.body) - params:
            path = self.interp.path(self.frame, cst.Name(name))
            if path is not None:
                value = value | self.state.get(path)
        # Parameters and leaves it closes over are no graph yet: calling it builds one.
        sites = self.interp.sites
        return frozenset(o for o in value if o[0] >= 0 and not sites[o[0]].leaf)

    def _eval_SimpleString(self, expr) -> frozenset:
        return EMPTY

    def _eval_BinaryOperation(self, expr: cst.BinaryOperation) -> frozenset:
        value = self.eval(expr.left) | self.eval(expr.right)
        if type(expr.operator) is cst.Modulo and type(expr.left) in STRING_LITERALS:
            return EMPTY  # `"loss %.4f" % loss`: a string
        return value

    def _eval_FormattedString(self, expr) -> frozenset:
        for child in expr.parts:
            if type(child) is cst.FormattedStringExpression:
                self.eval(child.expression)
        return EMPTY

    def _eval_Yield(self, expr: cst.Yield) -> frozenset:
        """``yield features[idx], labels[idx]``: what a generator of the file hands out
        is what iterating its call gives, as a return is what a call gives."""
        value = EMPTY
        if expr.value is not None:
            inner = expr.value.item if type(expr.value) is cst.From else expr.value
            value = self.eval(inner) - {NEW}
        if self.frame.prefix:
            self.frame.returns = self.frame.returns | value
        return EMPTY  # what `send()` passes in

    def _eval_NamedExpr(self, expr: cst.NamedExpr) -> frozenset:
        value = self.eval(expr.value)
        self.assign(expr.target, self.materialise(value) if value else EMPTY)
        return value

    def _comprehension(self, expr, elements) -> frozenset:
        saved: dict[str, frozenset | None] = {}
        node = expr.for_in
        while node is not None:
            value = self.eval(node.iter)
            key = _key_target(node.target, node.iter)
            plain = bound_names(key) if key is not None else set()
            for name in bound_names(node.target):
                path = self.frame.prefix + name
                saved.setdefault(path, self.state.env.get(path))
                self.state.put(path, EMPTY if name in plain else value - {NEW})
            for condition in node.ifs:
                self.eval(condition.test)
            node = node.inner_for_in
        result = EMPTY
        for element in elements:
            result = result | self.eval(element)
        for path, old in saved.items():
            if old is None:
                self.state.env.pop(path, None)
            else:
                self.state.put(path, old)
        return result

    def _eval_ListComp(self, expr) -> frozenset:
        return self._comprehension(expr, [expr.elt])

    _eval_GeneratorExp = _eval_ListComp
    _eval_SetComp = _eval_ListComp

    def _eval_DictComp(self, expr) -> frozenset:
        return self._comprehension(expr, [expr.value])

    def _eval_Call(self, call: cst.Call) -> frozenset:
        return _CallEvaluator(self, call).evaluate()


def _reads_any(exprs, names: set[str]) -> bool:
    return any(type(node) is cst.Name and node.value in names for expr in exprs for node in _names_in(expr))


def _reads_only(expr: cst.BaseExpression) -> bool:
    """``x``, ``self.weight``: the value read is stored as it is, no node is built.

    (A statement that computes stores a node of its own, named by the statement.)
    """
    while type(expr) is cst.Attribute:
        expr = expr.value
    return type(expr) is cst.Name and expr.value not in ("True", "False", "None")


def _display_of_reads(expr: cst.BaseExpression) -> bool:
    """``[w, self.b]``, ``(h, c)``, ``[{"params": [p for n, p in named], "lr": lr}]``: a
    container display or comprehension that only holds plain reads and constants,
    computing nothing from them."""
    kind = type(expr)
    if kind in (cst.List, cst.Tuple, cst.Set):
        # (`[*a, b]`: a starred element is a read spread out.)
        return all(_held(element.value) for element in expr.elements)
    if kind is cst.Dict:
        return all(
            _held(element.value) and (type(element) is cst.StarredDictElement or _held(element.key))
            for element in expr.elements
        )
    if kind in (cst.ListComp, cst.SetComp, cst.GeneratorExp):
        return _held(expr.elt)
    if kind is cst.DictComp:
        return _held(expr.key) and _held(expr.value)
    return False


def _gathers_reads(expr: cst.BaseExpression) -> bool:
    """A display of reads, ``model.parameters()`` (or its buffers), builtins that only
    gather or filter what they are given (``list(m.named_parameters())``,
    ``filter(lambda p: p.requires_grad, m.parameters())``), or a sum of such lists."""
    if _display_of_reads(expr):
        return True
    if type(expr) is cst.BinaryOperation and type(expr.operator) is cst.Add:
        # `list(m.named_parameters()) + list(m.named_buffers())`: one list of both.
        return _gathers_reads(expr.left) and _gathers_reads(expr.right)
    if type(expr) is not cst.Call or any(arg.star for arg in expr.args):
        return False
    func = expr.func
    if type(func) is cst.Attribute:
        return func.attr.value in PARAMETER_METHODS or func.attr.value in ("buffers", "named_buffers")
    return (
        type(func) is cst.Name and func.value in _GATHERING_BUILTINS
        and all(type(arg.value) is cst.Lambda or _reads_only(arg.value) or _gathers_reads(arg.value) for arg in expr.args)
    )


_GATHERING_BUILTINS = frozenset({"list", "tuple", "dict", "set", "frozenset", "sorted", "reversed", "iter", "filter"})


# Dict displays with more keys stay one value (see _StmtContext._split_keys).
_MAX_SPLIT_KEYS = 32


def _indices_of_a_reduction(expr: cst.Subscript) -> bool:
    """``q.max(1)[1]``, ``torch.topk(p, k)[1]``: the indices half of a (values, indices)
    pair, an integer tensor without a graph (``.indices``: CUTTING_ATTRIBUTES)."""
    if len(expr.slice) != 1 or type(expr.slice[0].slice) is not cst.Index:
        return False
    index = expr.slice[0].slice.value
    return type(index) is cst.Integer and index.value == "1" and _returns_indices(expr.value)


def _returns_indices(expr: cst.BaseExpression) -> bool:
    """A call returning (values, indices): ``x.topk(k)``, ``torch.sort(x)``, and
    ``max``/``min`` given a dimension (``x.max(1)``, ``torch.max(x, dim=-1)``;
    ``torch.max(a, b)`` is an element-wise maximum)."""
    if type(expr) is not cst.Call or type(expr.func) is not cst.Attribute:
        return False
    method = expr.func.attr.value
    if method not in INDEXED_REDUCTIONS:
        return False
    if method not in ("max", "min"):
        return True
    if any(arg.keyword is not None and arg.keyword.value == "dim" for arg in expr.args):
        return True
    args = positional(expr)
    dim = args[1:2] if dotted(expr.func.value) == "torch" else args[:1]
    return bool(dim) and is_integer_literal(dim[0])


def _unkept_item(env: dict[str, frozenset], key: str) -> frozenset:
    """What the item path ``key`` reads in a state that keeps no value for it: its
    container's value, as one element (see _eval_Subscript). A join must keep it:
    `hidden = (h0, c0)` before the loop keeps `hidden['0']`, which the loop's
    `out, hidden = lstm(x, hidden)` drops; after the join, `hidden[0]` may be either."""
    container = env.get(key[: key.rfind("[")], EMPTY)
    return container | {ELEMENT} if container else EMPTY


def item_path(base: str, key: str) -> str:
    """The path of one item of a container: ``d['k']``, ``t['0']`` (see _literal_key)."""
    return f"{base}[{key!r}]"


def _literal_key(expr: cst.BaseExpression) -> str | None:
    """A subscript's or a dict display's key as item paths spell it: a string
    constant, or an integer literal's text (None when computed)."""
    if type(expr) is cst.Integer:
        return expr.value
    return constant_string(expr)


def _constant_key(element) -> str | None:
    """A dict display element's key as Interpreter.path spells it (None: computed, or `**d`)."""
    return _literal_key(element.key) if type(element) is cst.DictElement else None


def _keys_iterated(stmt: cst.For) -> tuple[str, cst.BaseExpression] | None:
    """(key variable, dict) of `for k in d.keys()` and `for i, k in enumerate(d)` (or of
    `d.keys()`); None for any other loop (`for k in d` is a plain iteration)."""
    target, iterable = stmt.target, stmt.iter
    if (
        type(iterable) is cst.Call and type(iterable.func) is cst.Name and iterable.func.value == "enumerate"
        and len(iterable.args) == 1 and type(target) is cst.Tuple and len(target.elements) == 2
    ):
        target, iterable = target.elements[1].value, iterable.args[0].value
    if type(iterable) is cst.Call and type(iterable.func) is cst.Attribute and iterable.func.attr.value == "keys" \
            and not iterable.args:
        iterable = iterable.func.value
    elif target is stmt.target:
        return None
    return (target.value, iterable) if type(target) is cst.Name else None


def _keyed_items(expr: cst.BaseExpression) -> list[tuple[str | None, cst.BaseExpression]] | None:
    """(key, value) of a dict built in place: a display (`{"a": x}`, a key None when
    computed or `**d`), or the builtin spelled with keywords (`dict(a=x, b=y)`)."""
    if type(expr) is cst.Dict:
        return [(_constant_key(element), element.value) for element in expr.elements]
    if (
        type(expr) is cst.Call and type(expr.func) is cst.Name and expr.func.value == "dict" and expr.args
        and all(arg.keyword is not None and not arg.star for arg in expr.args)
    ):
        return [(arg.keyword.value, arg.value) for arg in expr.args]
    return None


def _merged_per_key(known, new: dict | None, returned: cst.BaseExpression, union):
    """What a frame records of its returns, per key, after one more return: ``new`` (None
    when this return is of another shape) merged into ``known`` (None before the first
    return, False once two disagree) with ``union``, which answers None for parts of
    different shapes. `return None` changes nothing."""
    if new is None:
        return known if type(returned) is cst.Name and returned.value == "None" else False
    if known is None:
        return dict(new)
    if known is False or known.keys() != new.keys():
        return False
    merged = {key: union(known[key], new[key]) for key in known}
    return False if any(value is None for value in merged.values()) else merged


def _held(expr: cst.BaseExpression) -> bool:
    """A value a display holds as it is: a read, a constant, a new tensor of torch's
    factories, a choice between such (`zeros_like(p) if g is None else g`), or a
    display of such."""
    kind = type(expr)
    if kind is cst.IfExp:
        return _held(expr.body) and _held(expr.orelse)
    return _reads_only(expr) or kind in _CONSTANTS or _display_of_reads(expr) or _torch_factory_call(expr)


def _torch_factory_call(expr: cst.BaseExpression) -> bool:
    """``torch.zeros_like(p)``, spelled in full: a new tensor, computed from nothing that has a graph."""
    return type(expr) is cst.Call and is_torch_factory(dotted(expr.func) or "")


def _independent(values: list[frozenset]) -> bool:
    """Whether two parts or more carry graphs, no two sharing a node (markers aside)."""
    seen: set = set()
    carrying = 0
    for value in values:
        nodes = {origin for origin in value if origin[0] >= 0}
        if nodes & seen:
            return False
        seen |= nodes
        carrying += bool(nodes)
    return carrying >= 2


def _list_of_values(expr: cst.BaseExpression) -> bool:
    """A list display of values (`[cls_loss, box_loss]`, `[crit(out, y), 0.1 * aux]`),
    not of containers built in place (a parameter group's dict)."""
    return type(expr) is cst.List and all(
        type(element) is cst.Element and type(element.value) not in _DISPLAYS for element in expr.elements
    )


_DISPLAYS = (cst.Dict, cst.List, cst.Set, cst.Tuple, cst.DictComp, cst.ListComp, cst.SetComp, cst.GeneratorExp)


def _holds_a_call_result(stmt: cst.CSTNode) -> bool:
    """`soft = softmax(teacher(x))`, `return softmax(teacher(x) / T)`: a statement
    binding (or returning) what a call gave, not a container it builds."""
    if type(stmt) not in (cst.Assign, cst.Return) or type(stmt.value) is not cst.Call:
        return False
    func = stmt.value.func
    return not (type(func) is cst.Name and func.value in PASSING_BUILTINS)


def _zipped(loop: cst.For) -> list[tuple[cst.Name, cst.BaseExpression]] | None:
    """(name, container) per part of `for a, b in zip(xs, ys)` over variables (names,
    attributes), one name per container; else None."""
    iterable, target = loop.iter, loop.target
    if not (type(iterable) is cst.Call and type(iterable.func) is cst.Name and iterable.func.value == "zip"):
        return None
    names = display_parts(target)
    if names is None or len(names) != len(iterable.args) or len(names) < 2:
        return None
    if any(arg.keyword is not None or arg.star or type(arg.value) not in (cst.Name, cst.Attribute) for arg in iterable.args):
        return None
    if any(type(name) is not cst.Name for name in names):
        return None
    return [(name, arg.value) for name, arg in zip(names, iterable.args)]


def _key_target(target: cst.BaseExpression, iterable: cst.BaseExpression) -> cst.BaseExpression | None:
    """The target of the key in `for i, x in enumerate(xs)` / `for k, v in d.items()`:
    an index or a dict key, never a tensor with a graph (a loss dict's names)."""
    if type(target) not in (cst.Tuple, cst.List) or len(target.elements) != 2 or type(iterable) is not cst.Call:
        return None
    func = iterable.func
    keyed = (type(func) is cst.Name and func.value == "enumerate") or (
        type(func) is cst.Attribute and func.attr.value == "items" and not iterable.args
    )
    return target.elements[0].value if keyed else None


_CONSTANTS = (cst.SimpleString, cst.ConcatenatedString, cst.Integer, cst.Float, cst.Imaginary)


def _names_in(expr: cst.CSTNode):
    stack = [expr]
    while stack:
        node = stack.pop()
        if type(node) in (cst.Name, cst.Attribute, cst.Subscript):
            yield node
        if isinstance(node, (cst.Lambda,)):
            continue
        stack.extend(children(node))


def _element_slot(loop: cst.CSTNode, target: cst.BaseExpression) -> bool:
    """Whether ``target`` is ``c[i]``, ``i`` and ``c`` the index and container of a loop
    over every index or key of ``c`` (see _index_loop_over)."""
    found = _index_loop_over(loop)
    if found is None or type(target) is not cst.Subscript or len(target.slice) != 1:
        return False
    index = target.slice[0].slice
    return (
        type(index) is cst.Index and type(index.value) is cst.Name and index.value.value == found[0]
        and dotted(target.value) is not None and dotted(target.value) == dotted(found[1])
    )


def _written_unless_none(loop: cst.CSTNode, stmt: cst.CSTNode) -> cst.Assign | None:
    """For ``stmt`` a statement of ``loop``'s body that is `if h is not None: c[i] = ...`
    alone (``h`` the loop's element, no `else`, ``c[i]`` its slot): that write; else None."""
    element = _loop_element(loop) if type(loop) is cst.For else None
    if element is None or type(stmt) is not cst.If or stmt.orelse is not None or len(stmt.body.body) != 1:
        return None
    if dotted(none_side(stmt.test, False)) != element or not any(line is stmt for line in loop.body.body):
        return None
    line = stmt.body.body[0]
    write = line.body[0] if type(line) is cst.SimpleStatementLine and len(line.body) == 1 else None
    if type(write) is not cst.Assign or len(write.targets) != 1 or not _element_slot(loop, write.targets[0].target):
        return None
    return write


def _loop_element(loop: cst.For) -> str | None:
    """The element's name in `for i, h in enumerate(c)` / `for k, h in d.items()`."""
    target = loop.target
    if type(target) is cst.Tuple and len(target.elements) == 2 and type(target.elements[1].value) is cst.Name:
        return target.elements[1].value.value
    return None


def _cut_on_the_spot(expr: cst.BaseExpression) -> bool:
    """``h.detach()``, ``h.data``: a value cut from its graph by the expression itself."""
    if type(expr) is cst.Attribute:
        return expr.attr.value == "data"
    return type(expr) is cst.Call and type(expr.func) is cst.Attribute and expr.func.attr.value in CUTTING_METHODS


def _directly_in(block, stmt: cst.CSTNode) -> bool:
    """Whether ``stmt`` is a statement of ``block`` (``with`` blocks aside), under no test or loop."""
    blocks = [block]
    while blocks:
        for line in blocks.pop():
            if line is stmt:
                return True
            if type(line) is cst.With:
                blocks.append(line.body.body)
    return False


def _index_loop_over(loop: cst.CSTNode) -> tuple[str, cst.BaseExpression] | None:
    """(index, container) of a loop over every index or key of a container:
    `for i, x in enumerate(c)`, `for i in range(len(c))`, `for k in d`,
    `for k in d.keys()`, `for k, v in d.items()`."""
    if type(loop) is not cst.For:
        return None
    call, target = loop.iter, loop.target
    pair = target.elements if type(target) is cst.Tuple and len(target.elements) == 2 else None
    index = pair[0].value.value if pair and type(pair[0].value) is cst.Name else None
    if type(call) in (cst.Name, cst.Attribute) and type(target) is cst.Name:
        return target.value, call  # `for k in states:` (a dict's keys)
    if type(call) is not cst.Call:
        return None
    if type(call.func) is cst.Attribute and not call.args:
        if call.func.attr.value == "keys" and type(target) is cst.Name:
            return target.value, call.func.value
        if call.func.attr.value == "items" and index:
            return index, call.func.value
        return None
    if type(call.func) is not cst.Name or len(call.args) != 1 or call.args[0].keyword is not None or call.args[0].star:
        return None  # (a start, `enumerate(c, 1)` or `range(1, len(c))`, skips elements)
    argument = call.args[0].value
    if call.func.value == "enumerate" and index:
        return index, argument
    if (
        call.func.value == "range" and type(target) is cst.Name
        and type(argument) is cst.Call and type(argument.func) is cst.Name and argument.func.value == "len"
        and len(argument.args) == 1
    ):
        return target.value, argument.args[0].value
    return None


def _detaches_in_place(loop: cst.For, name: str) -> bool:
    """Whether the loop body detaches its loop variable in place on every path."""
    for line in loop.body.body:
        if type(line) is cst.SimpleStatementLine:
            for small in line.body:
                call = small.value if type(small) is cst.Expr else None
                if (
                    type(call) is cst.Call
                    and type(call.func) is cst.Attribute
                    and call.func.attr.value == "detach_"
                    and type(call.func.value) is cst.Name
                    and call.func.value.value == name
                ):
                    return True
    return False


def _fresh_container(expr: cst.BaseExpression) -> bool:
    """A container built of constants (``{k: 0 for k in d}``, ``[0.0, 0.0]``, ``{}``)."""
    if type(expr) is cst.DictComp:
        return is_literal(expr.value)
    if type(expr) in (cst.ListComp, cst.SetComp):
        return is_literal(expr.elt)
    if type(expr) is cst.Dict:
        return all(type(e) is cst.DictElement and is_literal(e.value) for e in expr.elements)
    if type(expr) in (cst.List, cst.Set):
        return all(type(e) is cst.Element and is_literal(e.value) for e in expr.elements)
    return False


def older(origin: Origin) -> Origin:
    return origin if origin[1] == OUTER else (origin[0], min(origin[1] + 1, OLDEST))


def _update_past_sentinel(value: cst.BaseExpression, target: cst.BaseExpression) -> cst.BaseExpression:
    """``acc = loss if acc is None else 0.9 * acc + 0.1 * loss``: the update of every
    iteration but the first (the value itself when it is no such choice)."""
    if type(value) is not cst.IfExp or type(target) is not cst.Name:
        return value
    if dotted(none_side(value.test, True)) == target.value:
        return value.orelse  # `loss if acc is None else ...`
    if dotted(none_side(value.test, False)) == target.value:
        return value.body  # `... if acc is not None else loss`
    return value


def _sentinel_initialisations(body) -> list[cst.Assign]:
    """Assignments that run once: directly under an ``if P is None:`` whose test turns
    false once they ran, because the branch or a later statement of the same block
    binds ``P`` (``if self.val is None: self.avg = val`` ... ``self.val = val``)."""
    found = []
    blocks = [list(body)]
    while blocks:
        block = blocks.pop()
        for index, stmt in enumerate(block):
            if type(stmt) in (cst.FunctionDef, cst.ClassDef) or not isinstance(stmt, cst.BaseCompoundStatement):
                continue
            blocks.extend(list(inner) for inner in sub_blocks(stmt))
            tested = none_side(stmt.test, True) if type(stmt) is cst.If else None
            if tested is None:
                continue
            tested = dotted(tested)
            once = _assignments(stmt.body.body)
            if any(tested in _assigned_paths(a) for a in once + _assignments(block[index + 1 :])):
                found.extend(once)
    return found


def _assignments(statements) -> list[cst.Assign]:
    return [
        small
        for line in statements
        if type(line) is cst.SimpleStatementLine
        for small in line.body
        if type(small) is cst.Assign
    ]


def _assigned_paths(assign: cst.Assign) -> set[str]:
    return {dotted(target.target) for target in assign.targets} - {None}


def _sets_requires_grad(target: cst.BaseExpression, value: cst.BaseExpression) -> bool:
    return type(target) is cst.Attribute and target.attr.value == "requires_grad" and is_true(value)


def _iterable_key(stmt: cst.For) -> str:
    """Where a loop's pre-header keeps the iterable it evaluated (not a variable:
    never dead, and dropped with the frame's other keys)."""
    return f"<iterable of the for at {id(stmt)}>"


def _concatenated_elements(expr: cst.BaseExpression) -> list | None:
    """``[loss] + new_mems``: the display's elements, then the rest as one last part.

    The last part stands for every element from its index on (see
    _eval_Subscript's slices): transformer-XL returns its loss and the memories
    it detached that way, and the caller takes `ret[0]` and `ret[1:]`."""
    if type(expr) is not cst.BinaryOperation or type(expr.operator) is not cst.Add:
        return None
    head = display_parts(expr.left)
    return head + [expr.right] if head else None


from graphlint.model.calls import _CallEvaluator  # noqa: E402  (calls.py needs the classes above)
