"""Attach the probe to torch: every backward entry point and every optimizer step.

- ``Tensor.backward``, ``torch.autograd.backward`` and ``torch.autograd.grad``
  are wrapped; a re-entrancy guard makes the inner call of a wrapped entry
  point (Tensor.backward calls torch.autograd.backward) count once. Wrappers
  built on them (GradScaler, accelerate, Lightning's manual_backward) end up
  here too, and the user's line is found on the call stack.
- Steps are seen through torch's global optimizer step hooks, which every
  ``torch.optim.Optimizer`` subclass runs (also when ``GradScaler.step`` or an
  LBFGS closure is involved).
- ``Optimizer.__init__`` is wrapped to keep a weak list of optimizers, whose
  param_groups the GL004 check reads.
"""

from __future__ import annotations

import inspect

import torch
import torch.autograd
import torch.optim
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

from . import graphs
from .probes import Stop


def install(probe) -> None:
    guard = {"depth": 0}

    def observed(kind, roots, retain, inputs, call):
        if guard["depth"]:
            return call()
        guard["depth"] += 1
        try:
            event = None
            try:
                event = probe.backward_begin(roots, retain, kind, inputs)
            except Stop:
                raise
            except Exception as error:
                probe.internal_error(error)
            try:
                result = call()
            except Exception as error:
                if event is not None:
                    try:
                        probe.backward_end(event, error)
                    except Exception as inner:
                        probe.internal_error(inner)
                raise
            if event is not None:
                try:
                    probe.backward_end(event, None)
                except Exception as inner:
                    probe.internal_error(inner)
            return result
        finally:
            guard["depth"] -= 1

    def wrap(original, kind, roots_arg, inputs_arg):
        signature = inspect.signature(original)

        def wrapper(*args, **kwargs):
            try:
                arguments = signature.bind(*args, **kwargs).arguments
            except TypeError:
                return original(*args, **kwargs)
            roots = graphs.tensors_in(arguments.get(roots_arg)).tensors
            create = bool(arguments.get("create_graph", False))
            retain = arguments.get("retain_graph")
            retain = create if retain is None else bool(retain)
            inputs = arguments.get(inputs_arg) if inputs_arg else None
            return observed(kind, roots, retain, inputs, lambda: original(*args, **kwargs))

        wrapper.__name__ = getattr(original, "__name__", "backward")
        wrapper.__doc__ = getattr(original, "__doc__", None)
        wrapper.__wrapped__ = original
        return wrapper

    torch.Tensor.backward = wrap(torch.Tensor.backward, "backward", "self", "inputs")
    torch.autograd.backward = wrap(torch.autograd.backward, "backward", "tensors", "inputs")
    torch.autograd.grad = wrap(torch.autograd.grad, "grad", "outputs", "inputs")

    def before_step(optimizer, args, kwargs):
        try:
            probe.step_begin(optimizer)
        except Stop:
            raise
        except Exception as error:
            probe.internal_error(error)

    def after_step(optimizer, args, kwargs):
        try:
            probe.step_end(optimizer)
        except Exception as error:
            probe.internal_error(error)

    register_optimizer_step_pre_hook(before_step)
    register_optimizer_step_post_hook(after_step)

    scaler = getattr(torch.amp, "GradScaler", None)
    if scaler is not None:
        original_scaler_step = scaler.step

        def scaler_step(self, optimizer, *args, **kwargs):
            try:
                probe.scaler_step(optimizer)
            except Stop:
                raise
            except Exception as error:
                probe.internal_error(error)
            return original_scaler_step(self, optimizer, *args, **kwargs)

        scaler_step.__wrapped__ = original_scaler_step
        scaler.step = scaler_step

    original_init = torch.optim.Optimizer.__init__

    def init(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        probe.track_optimizer(self)

    init.__wrapped__ = original_init
    torch.optim.Optimizer.__init__ = init
