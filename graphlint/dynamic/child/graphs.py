"""Walking autograd graphs from Python: which nodes a value's graph holds.

Identity of a node is ``id()`` of its Python object: torch caches that object
on the C++ node while it is referenced, and the probes keep a reference to
every node they remember, so an id can never be reused for another node.
"""

from __future__ import annotations

import torch

# A graph larger than this is not walked to the end; verdicts that need the
# whole graph become inconclusive instead of guessing.
NODE_LIMIT = 200_000
# How deep and how wide to look inside containers for tensors.
CONTAINER_DEPTH = 4
CONTAINER_ITEMS = 20_000

LEAF_NODE = "AccumulateGrad"


class Contents:
    """The tensors found in a value and what else was in it."""

    def __init__(self) -> None:
        self.tensors: list = []
        self.foreign: set = set()  # type names of objects we cannot look into
        self.complete = True


def tensors_in(value, contents: Contents | None = None, depth: int = 0) -> Contents:
    contents = contents if contents is not None else Contents()
    if len(contents.tensors) >= CONTAINER_ITEMS:
        contents.complete = False
        return contents
    if isinstance(value, torch.Tensor):
        contents.tensors.append(value)
    elif value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
        pass
    elif depth >= CONTAINER_DEPTH:
        contents.complete = False
    elif isinstance(value, dict):
        for item in list(value.values())[:CONTAINER_ITEMS]:
            tensors_in(item, contents, depth + 1)
    elif isinstance(value, (list, tuple, set, frozenset)) or type(value).__name__ == "deque":
        for item in list(value)[:CONTAINER_ITEMS]:
            tensors_in(item, contents, depth + 1)
    elif type(value).__module__.startswith("numpy"):
        pass
    else:
        contents.foreign.add(type(value).__name__)
    return contents


class Walk:
    """The non-leaf nodes and the leaf tensors reachable from some roots."""

    def __init__(self) -> None:
        self.nodes: dict = {}
        self.leaves: dict = {}
        # node id -> ids of what it feeds into (nodes, or leaf tensors by their id)
        self.edges: dict = {}
        self.complete = True


def walk(grad_fns, limit: int = NODE_LIMIT) -> Walk:
    result = Walk()
    stack = [fn for fn in grad_fns if fn is not None]
    seen = set()
    while stack:
        fn = stack.pop()
        key = id(fn)
        if key in seen:
            continue
        seen.add(key)
        if type(fn).__name__ == LEAF_NODE:
            variable = getattr(fn, "variable", None)
            if variable is not None:
                result.leaves[id(variable)] = variable
            continue
        if len(result.nodes) >= limit:
            result.complete = False
            break
        result.nodes[key] = fn
        try:
            following = fn.next_functions
        except Exception:
            continue
        children = []
        for nxt, _ in following:
            if nxt is None:
                continue
            if type(nxt).__name__ == LEAF_NODE:
                variable = getattr(nxt, "variable", None)
                if variable is not None:
                    children.append(id(variable))
            else:
                children.append(id(nxt))
            if id(nxt) not in seen:
                stack.append(nxt)
        result.edges[key] = children
    return result


def needed(result: Walk, inputs) -> dict:
    """The nodes a backward restricted to ``inputs`` executes (and so frees).

    torch runs only the nodes from which some input is reachable; the others
    keep their buffers, so they must not be counted as traversed.
    """
    targets = set()
    for tensor in inputs:
        targets.add(id(tensor.grad_fn) if getattr(tensor, "grad_fn", None) is not None else id(tensor))
    memo: dict = {}
    for start in result.nodes:
        if start in memo:
            continue
        stack = [(start, False)]
        while stack:
            key, expanded = stack.pop()
            if key in memo:
                continue
            children = result.edges.get(key, [])
            if not expanded:
                stack.append((key, True))
                for child in children:
                    if child in result.nodes and child not in memo:
                        stack.append((child, False))
                continue
            memo[key] = key in targets or any(
                child in targets or memo.get(child, False) for child in children
            )
    return {key: node for key, node in result.nodes.items() if memo.get(key)}


def walk_value(value, limit: int = NODE_LIMIT) -> tuple:
    contents = tensors_in(value)
    roots = [t.grad_fn for t in contents.tensors if t.grad_fn is not None]
    return walk(roots, limit), contents, roots


def has_grad(tensor) -> bool:
    """Whether a parameter holds a gradient with any non-zero entry."""
    grad = getattr(tensor, "grad", None)
    if grad is None:
        return False
    try:
        if grad.is_sparse:
            grad = grad.coalesce().values()
        return bool(grad.ne(0).any())
    except Exception:
        return True


def node_name(fn) -> str:
    try:
        return fn.name()
    except Exception:
        return type(fn).__name__
