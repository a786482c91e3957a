"""Which branch points of a graph decide anything: post-dominators and the region of a test.

A test's two branches meet again at its immediate post-dominator (the first
node every path from the test must reach). What lies between the test and
that node is the test's region: the only code whose running depends on the
outcome. A test whose region holds nothing an analysis tracks cannot change
its result, so there is no point in deciding it per path (gradorder.py keeps
counters, None-tests and flags only for tests that matter: each one
multiplies its states).
"""

from __future__ import annotations

from collections.abc import Sequence


def immediate_post_dominators(successors: Sequence[Sequence[int]]) -> dict[int, int]:
    """Node -> its immediate post-dominator, for nodes ``0..n-1`` given their successor lists.

    Every node without successors leads to one virtual exit, ``n``. A node from
    which no exit can be reached (an endless loop) has no entry.
    Cooper, Harvey and Kennedy's iterative algorithm, on the reversed graph.
    """
    count = len(successors)
    exit_node = count
    predecessors: list[list[int]] = [[] for _ in range(count + 1)]
    for node, succs in enumerate(successors):
        if not succs:
            predecessors[exit_node].append(node)
        for succ in succs:
            predecessors[succ].append(node)
    order = _reverse_postorder(exit_node, predecessors)
    rank = {node: position for position, node in enumerate(order)}
    ipdom = {exit_node: exit_node}

    def meet(a: int, b: int) -> int:
        while a != b:
            while rank[a] > rank[b]:
                a = ipdom[a]
            while rank[b] > rank[a]:
                b = ipdom[b]
        return a

    changed = True
    while changed:
        changed = False
        for node in order[1:]:
            found = None
            for succ in successors[node] or (exit_node,):
                if succ in ipdom:
                    found = succ if found is None else meet(found, succ)
            if found is not None and ipdom.get(node) != found:
                ipdom[node] = found
                changed = True
    del ipdom[exit_node]
    return ipdom


def _reverse_postorder(root: int, edges: list[list[int]]) -> list[int]:
    seen = {root}
    postorder: list[int] = []
    stack = [(root, iter(edges[root]))]
    while stack:
        node, pending = stack[-1]
        for following in pending:
            if following not in seen:
                seen.add(following)
                stack.append((following, iter(edges[following])))
                break
        else:
            stack.pop()
            postorder.append(node)
    postorder.reverse()
    return postorder


def region(test: int, successors: Sequence[Sequence[int]], ipdom: dict[int, int]) -> list[int] | None:
    """The nodes between ``test`` and the point where its branches meet.

    None when that is not known: some path from the test never reaches an exit
    (an endless loop), so the post-dominator ignored it.
    """
    stop = ipdom.get(test)
    if stop is None:
        return None
    seen = {test, stop}
    todo = [succ for succ in successors[test] if succ not in seen]
    seen.update(todo)
    found = []
    while todo:
        node = todo.pop()
        if node not in ipdom:
            return None
        found.append(node)
        for succ in successors[node]:
            if succ not in seen:
                seen.add(succ)
                todo.append(succ)
    return found
