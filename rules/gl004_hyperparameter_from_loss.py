"""GL004 hyperparameter-from-loss

## What it does
Finds optimizer hyperparameters (`opt.param_groups[i][k] = v`,
`for g in opt.param_groups: g[k] = v`, `g.update(lr=v)`,
`opt.defaults[k] = v`) assigned a value that still carries an autograd
graph: a loss or model output that was not cut with `.item()`, `float()`
or `.detach()`.

## Why is this bad?
The learning rate (weight decay, momentum, betas) becomes a tensor whose
graph keeps every iteration's forward alive: SGD runs silently with an lr
whose `grad_fn` chain grows each step (memory grows without bound), and
Adam with a tensor `weight_decay` raises `TypeError`.

## Example
```python
loss.backward()
for group in optimizer.param_groups:
    group["lr"] = base_lr * torch.exp(-loss)   # GL004
```

## Fix
Take a number from the loss: `group["lr"] = base_lr * math.exp(-loss.item())`
(or `float(...)`, or `.detach()` when a graph-free tensor is wanted).

Reported at the assignment.
"""

from __future__ import annotations

from typing import Iterator

from graphlint.model import syntax as cst

from graphlint.model import Diagnostic, ModuleModel
from graphlint.model.names import constant_string

CODE = "GL004"
NAME = "hyperparameter-from-loss"
SUMMARY = "Optimizer hyperparameter assigned a value that carries an autograd graph."


def check(model: ModuleModel) -> Iterator[Diagnostic]:
    reported = set()
    for write in model.facts.hyperparameters:
        if write.stmt in reported or not model.carries_graph(write.value, certain=True):
            continue
        if _written_key(write.target) == "params":
            continue  # the group's parameter list (re-pointed after a move), not a hyperparameter
        reported.add(write.stmt)
        graph = [o[0] for o in write.value if model.origin_is_graph(o, certain=True)]
        # The forward call in the function that writes (not a line of the model's forward).
        origin_line = model.site_line(model.nearest(graph, model.line(write.stmt)))
        yield model.diagnostic(
            write.stmt,
            f"optimizer hyperparameter '{model.code(write.target)}' is assigned a value that carries "
            f"the autograd graph built at line {origin_line}; it keeps every iteration's graph alive, "
            f"and some optimizers reject a tensor there (Adam's weight_decay raises TypeError). "
            f"Take a number instead: .item() or float(...)",
        )


def _written_key(target) -> str | None:
    """``'lr'`` for ``group['lr'] = ...``."""
    if type(target) is cst.Subscript and len(target.slice) == 1 and type(target.slice[0].slice) is cst.Index:
        return constant_string(target.slice[0].slice.value)
    return None
