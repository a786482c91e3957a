"""Live variables: which local names may still be read after each CFG node.

A graph held only by a dead variable (``loss`` before it is re-assigned) can
never be backwarded again, so its freed marks must not outlive it.
"""

from __future__ import annotations

from graphlint.model import syntax as cst

from graphlint.model.cfg import CFG, DEF, FOR, IF, ITER, MATCH, WHILE, WITH
from graphlint.model.names import bound_names
from graphlint.model.statements import read_names


def live_in(cfg: CFG) -> dict[int, frozenset[str]]:
    uses: dict[int, set[str]] = {}
    defs: dict[int, set[str]] = {}
    for node in cfg.nodes:
        uses[node.id], defs[node.id] = _uses_defs(node)
    live: dict[int, frozenset[str]] = {node.id: frozenset() for node in cfg.nodes}
    changed = True
    while changed:
        changed = False
        for node in reversed(cfg.nodes):
            out: set[str] = set()
            for succ, _ in node.succ:
                out |= live[succ]
            new = frozenset(uses[node.id] | (out - defs[node.id]))
            if new != live[node.id]:
                live[node.id] = new
                changed = True
    return live


def live_on_entry(cfg: CFG, live: dict[int, frozenset[str]]) -> dict[int, frozenset[str]]:
    """Per loop header: the names live when the loop is entered from outside.

    The analysis takes a loop to run at least once, so on entry the header goes
    into the body, never straight to the exit: a name the body re-assigns before
    any read (``loss`` in ``for t in ...: loss = ...``) is dead there.
    """
    result = {}
    for node in cfg.nodes:
        if node.kind in (FOR, WHILE):
            uses, defs = _uses_defs(node)
            body = set().union(*(live[succ] for succ, label in node.succ if label is True))
            result[node.id] = frozenset(uses | (body - defs))
    return result


def _uses_defs(node) -> tuple[set[str], set[str]]:
    stmt = node.stmt
    if stmt is None or node.kind == DEF:
        return set(), set()
    if node.kind in (IF, WHILE):
        return read_names(stmt.test), set()
    if node.kind == MATCH:
        return read_names(stmt.subject), set()
    if node.kind == FOR:
        return read_names(stmt.iter), bound_names(stmt.target)
    if node.kind == ITER:
        return read_names(stmt.iter), set()
    if node.kind == WITH:
        uses: set[str] = set()
        defs: set[str] = set()
        for item in stmt.items:
            uses |= read_names(item.item)
            if item.asname is not None:
                defs |= bound_names(item.asname.name)
        return uses, defs
    if type(stmt) is cst.Assign:
        defs = set()
        uses = read_names(stmt.value)
        for target in stmt.targets:
            defs |= bound_names(target.target)
            if type(target.target) not in (cst.Name, cst.Tuple, cst.List):
                uses |= read_names(target.target)
        return uses, defs
    return read_names(stmt), set()
