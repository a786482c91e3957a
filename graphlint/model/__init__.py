"""The training-loop model: one shared analysis of a module that every rule queries.

- ``cfg``: control-flow graphs of module and function bodies;
- ``events``: recognisers for forward calls, backwards, steps, zero_grads and cuts;
- ``provenance``: which forward graphs each value may carry, solved as a dataflow fixpoint;
- ``summaries``: what helpers of the same module do to their arguments.
"""

from graphlint.model.core import Diagnostic, ModuleModel, Span, build_model

__all__ = ["Diagnostic", "ModuleModel", "Span", "build_model"]
