"""Drive functions and methods that nothing calls, with stand-in arguments.

Library-style code (``def train(model, loader, optimizer, epochs)``, a
Trainer's ``fit``) never runs when its file runs as a script. For each
function holding flagged lines that nothing entered, we pick what to call (the
outermost function of the file that leads to it), infer from the bodies how
each parameter is used (usage.py) and build duck-typed stand-ins:

- called like a model: a small ``nn.Module`` whose output depends on its
  inputs and its parameters (so state fed back stays graph-connected) and
  unpacks the way the call site unpacks it;
- called with a model's output, or named like one: a loss function that
  returns a scalar;
- iterated: a few small batches shaped the way the loop unpacks them (labels
  are class indices, or float targets when the file uses a regression loss);
- ``.step()``/``.zero_grad()``/``.param_groups``: a real ``torch.optim.SGD``
  over the stand-in model's parameters (paired by name for GANs);
- ``range(epochs)``: a small int, ``% k``: 2; ``device``: "cpu"; loggers that
  are only ever told things: a sink that accepts any method call.

A parameter whose use we cannot read makes the function undrivable: the
verdict says which one (inconclusive, never a guess).
"""

from __future__ import annotations

import ast
import re
import tempfile
import types

import torch
import torch.nn as nn
import torch.utils.data

from .judge import RunEnd
from .usage import Facts, collect, init_aliases

BATCH, FEATURES, CLASSES, BATCHES = 4, 3, 3, 4
# Labels are class indices unless the file regresses (then they are float targets).
REGRESSION = re.compile(r"mse_loss|MSELoss|l1_loss|L1Loss|smooth_l1|SmoothL1|huber|Huber|regress", re.IGNORECASE)
MODEL_METHODS = {"parameters", "named_parameters", "train", "eval", "state_dict", "to", "cuda", "zero_grad",
                 "modules", "children", "load_state_dict", "requires_grad_", "half", "float", "apply"}
HIDDEN_NAMES = {"h", "hx", "h0", "hc", "hidden", "hiddens", "state", "states", "carry", "memory", "mem",
                "prev_hid", "h_state", "prev_state"}
FLOAT_WORDS = ("lr", "rate", "clip", "norm", "eps", "alpha", "beta", "gamma", "momentum", "decay", "weight",
               "temperature", "temp", "scale", "coef", "lambda", "lam", "tau", "ratio", "dropout", "margin")
SINK_WORDS = ("writer", "logger", "log", "callback", "tb", "wandb", "tracker", "meter", "pbar", "progress",
              "printer", "recorder", "monitor", "summary", "board", "run", "experiment")
PERIOD_WORDS = ("accum", "every", "interval", "freq", "period", "steps_per")
LABEL_WORDS = ("label", "target_class", "action", "class", "tag")
TARGET_WORDS = ("return", "reward", "advantage", "value", "target", "mask")


class CannotDrive(Exception):
    """We cannot build arguments for this function; the message says why."""


# -- stand-in objects -------------------------------------------------------------------


class StandInModel(nn.Module):
    """A model of any input: output = f(inputs, parameters), shaped like the call site wants."""

    def __init__(self, shape="value", methods: dict | None = None, scalar: bool = False,
                 attributes: set | None = None) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.linspace(-0.5, 0.5, CLASSES))
        self.bias = nn.Parameter(torch.zeros(CLASSES))
        self.mix = nn.Parameter(torch.full((CLASSES,), 0.1))
        self._gl_shape = shape
        self._gl_methods = dict(methods or {})
        self._gl_scalar = scalar
        # outputs.loss / outputs.logits: an output object; logits.float() is a tensor's own.
        self._gl_attributes = sorted(a for a in (attributes or ()) if not hasattr(torch.Tensor, a))

    def forward(self, *args, **kwargs):
        feature = _feature(list(args) + list(kwargs.values()))
        # One shared core, like an RNN's output and state: backwarding any output
        # traverses the node every other output (fed back as state) depends on.
        core = torch.tanh(feature * self.weight + self.bias)
        if self._gl_attributes and self._gl_shape == "value":
            return Output({
                name: core.pow(2).mean() if name == "loss" else core * (i + 1)
                for i, name in enumerate(self._gl_attributes)
            })
        return self._build(self._gl_shape, core, 0)

    def _build(self, shape, core, depth: int):
        if isinstance(shape, tuple) and shape[0] == "tuple":
            return tuple(self._build(part, core, depth + i + 1) for i, part in enumerate(shape[1]))
        out = core * (depth + 1) + self.mix * depth if depth else core
        if self._gl_scalar and depth == 0:
            return out.pow(2).mean()
        return out

    def __getattr__(self, name: str):
        try:
            return super().__getattr__(name)
        except AttributeError:
            methods = self.__dict__.get("_gl_methods", {})
            if name in methods:
                shape = methods[name]
                return lambda *args, **kwargs: _zeros_like_shape(shape)
            raise

    def extra_repr(self) -> str:
        return "graphlint stand-in"


class Output(dict):
    """A model output read by attribute (``outputs.loss``), key or position, like transformers'."""

    def __getattr__(self, name: str):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __getitem__(self, key):
        if isinstance(key, int):
            return list(self.values())[key]
        return super().__getitem__(key)


class StandInLoss(nn.Module):
    """A loss of any inputs: a scalar connected to every floating input."""

    def forward(self, *args, **kwargs):
        total = None
        for tensor in _tensors(list(args) + list(kwargs.values())):
            if tensor.is_floating_point():
                term = tensor.pow(2).mean()
                total = term if total is None else total + term
        return total if total is not None else torch.zeros(())


class Sink:
    """A logger or callback: accepts every method call and ignores it."""

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        return lambda *args, **kwargs: None

    def __repr__(self) -> str:
        return "<graphlint sink>"


def _tensors(values: list, depth: int = 0) -> list:
    found = []
    for value in values:
        if isinstance(value, torch.Tensor):
            found.append(value)
        elif isinstance(value, (list, tuple)) and depth < 2:
            found.extend(_tensors(list(value), depth + 1))
        elif isinstance(value, dict) and depth < 2:
            found.extend(_tensors(list(value.values()), depth + 1))
    return found


def _feature(values: list) -> torch.Tensor:
    tensors = _tensors(values)
    batch = next((t.shape[0] for t in tensors if t.dim() >= 1), BATCH)
    feature = torch.zeros(batch, 1)
    for tensor in tensors:
        tensor = tensor.float() if not tensor.is_floating_point() else tensor
        if tensor.dim() >= 1 and tensor.shape[0] == batch:
            feature = feature + tensor.reshape(batch, -1).mean(1, keepdim=True)
        else:
            feature = feature + tensor.mean()
    return feature


def _zeros_like_shape(shape):
    if isinstance(shape, tuple) and shape[0] == "tuple":
        return tuple(_zeros_like_shape(part) for part in shape[1])
    return torch.zeros(BATCH, CLASSES)


# -- roles ----------------------------------------------------------------------------


def _has_word(name: str, words: tuple) -> bool:
    """Whether one of the name's words (snake_case or camelCase) is one of ``words``
    (or its plural, or, for long words, starts with it): "num_steps" holds no "eps"."""
    tokens = [t for t in re.split(r"[_\W\d]+", re.sub(r"([a-z])([A-Z])", r"\1_\2", name).lower()) if t]
    return any(
        token == word or token == word + "s" or (len(word) >= 5 and token.startswith(word))
        for token in tokens for word in words
    )


def role_of(name: str, facts: Facts) -> str:
    lower = name.lower()
    methods, attributes = set(facts.methods), facts.attributes
    if "sched" in lower and ("step" in methods or "get_last_lr" in methods):
        return "scheduler"
    if "zero_grad" in methods and not facts.calls or "param_groups" in attributes or (
        "step" in methods and "opt" in lower
    ):
        return "optimizer"
    if {"scale", "unscale_", "update"} & methods and "scal" in lower:
        return "scaler"
    if facts.iterated:
        return "loader"
    if facts.calls or methods & MODEL_METHODS - {"zero_grad", "to"}:
        if _has_word(name, ("crit", "criterion", "loss", "objective", "cost")) or (
            facts.called_with_model_output and not methods & MODEL_METHODS
        ):
            return "loss"
        return "model"
    if "step" in methods:
        return "optimizer"
    if facts.modulo or _has_word(name, PERIOD_WORDS):
        return "period"
    if facts.in_range or lower in ("epochs", "n_epochs", "num_epochs", "steps", "n_steps", "iters", "epoch"):
        return "int"
    if "device" in lower or lower in ("dev",):
        return "device"
    if lower in HIDDEN_NAMES:
        return "hidden"
    if lower.endswith(("dir", "folder")):
        return "dir"
    if lower.endswith(("path", "file", "ckpt", "checkpoint", "filename")):
        return "path"
    if methods and not facts.calls and not facts.subscripted and not facts.arithmetic and any(
        _has_word(name, (word,)) for word in SINK_WORDS
    ):
        return "sink"
    if facts.subscripted or {"size", "shape", "view", "reshape", "to", "float", "long", "dim"} & (methods | attributes):
        return "tensor"
    if lower.startswith(("n_", "num_")) or lower.endswith(("_size", "_dim", "_len", "_count")):
        return "int"
    if _has_word(name, LABEL_WORDS + TARGET_WORDS) and not methods:
        return "data"
    if facts.arithmetic or facts.compared:
        return "float" if _has_word(name, FLOAT_WORDS) else "int"
    if lower.startswith(("use_", "is_", "do_")) or lower in ("verbose", "debug", "quiet", "amp", "fp16"):
        return "bool"
    if not facts.used:
        return "unused"
    if facts.passed_to and not facts.calls and not facts.iterated:
        return "data"  # handed to a model or a function: an input, a label or a target
    return "unknown"


# Roles whose stand-in is a tensor: a parameter annotated ``torch.Tensor`` keeps one
# of these when its use says so (labels, a hidden state), and is a batch otherwise.
TENSOR_ROLES = frozenset({"tensor", "data", "hidden"})


def role_of_annotation(annotation) -> str | None:
    """A parameter's annotation, when it names a class, says what to pass."""
    if not isinstance(annotation, type):
        return None
    simple = {int: "int", float: "float", bool: "bool", torch.device: "device"}
    if annotation in simple:
        return simple[annotation]
    if issubclass(annotation, torch.Tensor):
        # not ``torch.Tensor()``: an empty tensor that no layer accepts
        return "data"
    if issubclass(annotation, nn.Module):
        return None  # usage says whether it is a model or a loss
    if issubclass(annotation, torch.optim.Optimizer):
        return "optimizer"
    if issubclass(annotation, torch.utils.data.DataLoader):
        return "loader"
    if annotation.__module__ in ("builtins", "typing", "collections.abc"):
        return None
    return "instance"


def _annotations(node: ast.AST, namespace: dict) -> dict:
    """Annotations naming something defined in the module (``accelerator: Accelerator``)."""
    found = {}
    for arg in node.args.args + node.args.kwonlyargs:
        annotation = arg.annotation
        if isinstance(annotation, ast.Name) and annotation.id in namespace:
            found[arg.arg] = namespace[annotation.id]
        elif isinstance(annotation, ast.Attribute) and isinstance(annotation.value, ast.Name):
            owner = namespace.get(annotation.value.id)
            if owner is not None and hasattr(owner, annotation.attr):
                found[arg.arg] = getattr(owner, annotation.attr)
    return found


# -- values ---------------------------------------------------------------------------


class Builder:
    """Builds the stand-ins of one call, sharing models between optimizers and loaders."""

    def __init__(self, source: str, facts_of=None) -> None:
        # how a batch variable is used, following it into the file's helpers
        self.facts_of = facts_of or (lambda name, functions: collect(functions, {name})[name])
        self.classification = not REGRESSION.search(source)
        self.models: dict = {}
        self.optimizers: dict = {}
        self.instance = None  # the object whose method is driven, once constructed
        self.batch_facts: dict = {}
        self.described: list = []

    def build(self, params: list, facts: dict, functions: list, annotations: dict | None = None) -> dict:
        roles = {name: role_of(name, facts[name]) for name in params}
        instances = {}
        for name, annotation in (annotations or {}).items():
            role = role_of_annotation(annotation)
            if role == "instance":
                try:
                    instances[name] = annotation()
                except Exception:
                    continue
            if role == "data" and roles.get(name) in TENSOR_ROLES:
                continue
            if role is not None:
                roles[name] = role
        unknown = [name for name in params if roles[name] == "unknown"]
        if unknown:
            raise CannotDrive(f"cannot tell what parameter {unknown[0]!r} should be from how the code uses it")
        values = {}
        last = ("model", "loss", "optimizer", "scheduler")
        # in the order of the parameters, not of a set (its order changes with the hash seed,
        # and so would the stand-ins' random values, drawn in this order, and the description)
        order = ["model", "loss"] + [r for r in dict.fromkeys(roles[n] for n in params) if r not in last]
        order += ["optimizer", "scheduler"]
        for role in order:
            for name in params:
                if roles[name] == role:
                    if role == "instance":
                        values[name] = instances[name]
                        self.described.append(f"{name}={type(instances[name]).__name__}()")
                    else:
                        values[name] = self.value(name, role, facts[name], functions)
        return values

    def value(self, name: str, role: str, facts: Facts, functions: list):
        if role == "model":
            shape = facts.calls[0] if facts.calls else "value"
            for candidate in facts.calls:
                if isinstance(candidate, tuple) and candidate[0] == "tuple":
                    shape = candidate
                    break
            scalar = facts.call_results_backwarded and not isinstance(shape, tuple)
            model = StandInModel(_plain(shape), facts.methods, scalar, facts.result_attributes)
            self.models[name] = model
            self.described.append(f"{name}=model stand-in")
            return model
        if role == "loss":
            self.described.append(f"{name}=loss stand-in")
            return StandInLoss()
        if role == "loader":
            batches = [self.batch(facts.iterated[0], functions) for _ in range(BATCHES)]
            self.described.append(f"{name}={BATCHES} batches of {_describe(batches[0])}")
            return batches
        if role == "optimizer":
            params = self.parameters_for(name)
            optimizer = torch.optim.SGD(params, lr=0.01)
            self.optimizers[name] = optimizer
            self.described.append(f"{name}=SGD")
            return optimizer
        if role == "scheduler":
            optimizer = next(iter(self.optimizers.values()), None)
            if optimizer is None:
                optimizer = torch.optim.SGD(self.parameters_for(name), lr=0.01)
            self.described.append(f"{name}=StepLR")
            return torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)
        if role == "scaler":
            self.described.append(f"{name}=GradScaler")
            return torch.amp.GradScaler("cpu")
        simple = {
            "int": 3, "period": 2, "device": "cpu", "bool": False, "unused": None,
        }
        if role in simple:
            self.described.append(f"{name}={simple[role]!r}")
            return simple[role]
        if role == "float":
            value = 1.0 if _has_word(name, ("clip", "norm", "scale", "temp", "temperature")) else 0.01
            self.described.append(f"{name}={value}")
            return value
        if role == "hidden":
            self.described.append(f"{name}=" + ("None" if facts.none_checked else "zeros"))
            return None if facts.none_checked else torch.zeros(BATCH, CLASSES)
        if role == "tensor":
            self.described.append(f"{name}=tensor[16, {FEATURES}]")
            return torch.randn(16, FEATURES)
        if role == "data":
            value = self.data(name, facts)
            self.described.append(f"{name}={_describe(value)}")
            return value
        if role in ("dir", "path"):
            folder = tempfile.mkdtemp(prefix="graphlint-confirm-")
            self.described.append(f"{name}=a temporary {'folder' if role == 'dir' else 'file'}")
            return folder if role == "dir" else folder + "/" + name
        if role == "sink":
            self.described.append(f"{name}=sink")
            return Sink()
        raise CannotDrive(f"cannot build a stand-in for parameter {name!r}")

    def data(self, name: str, facts: Facts):
        """A batch tensor for a parameter handed to a model: shaped for the model the
        instance holds when there is one (its first layer), labels within its classes."""
        consumers = [getattr(self.instance, c[5:], None) for c, _ in facts.passed_to if c.startswith("self.")]
        modules = [m for m in consumers if isinstance(m, nn.Module)]
        if _has_word(name, LABEL_WORDS):
            classes = CLASSES
            held = modules
            if not held and self.instance is not None:
                held = [v for v in vars(self.instance).values() if isinstance(v, nn.Module)]
            # the smallest head bounds every class index (a value head of width 1 makes them all 0)
            outs = [m.out_features for module in held for m in module.modules() if isinstance(m, nn.Linear)]
            if outs:
                classes = max(1, min(outs))
            return torch.randint(0, classes, (BATCH,))
        if _has_word(name, TARGET_WORDS):
            return torch.randn(BATCH)
        for module in modules:
            for layer in module.modules():
                if isinstance(layer, nn.Linear):
                    return torch.randn(BATCH, layer.in_features)
                if isinstance(layer, nn.Embedding):
                    return torch.randint(0, layer.num_embeddings, (BATCH, 6))
                if isinstance(layer, nn.RNNBase):
                    shape = (BATCH, 6, layer.input_size) if layer.batch_first else (6, BATCH, layer.input_size)
                    return torch.randn(*shape)
        return self.input()

    def parameters_for(self, name: str) -> list:
        models = self.models
        if not models:
            return [nn.Parameter(torch.zeros(CLASSES))]
        key = _suffix(name, ("optimizer", "optimiser", "optim", "opt"))
        for model_name, model in models.items():
            if key and _suffix(model_name, ("network", "model", "net")) == key:
                return list(model.parameters())
        if len(models) == 1:
            return list(next(iter(models.values())).parameters())
        return [p for model in models.values() for p in model.parameters()]

    def batch(self, shape, functions: list):
        if isinstance(shape, tuple) and shape[0] == "name":
            facts = self.facts_of(shape[1], functions)
            unpacked = [s for s in facts.iterated if isinstance(s, tuple) and s[0] == "tuple"]
            if facts.keys:
                return {key: self.tensor_for(key) for key in sorted(facts.keys)}
            if facts.double_star:
                return {"input_ids": self.tensor_for("input_ids"), "labels": self.label()}
            if unpacked:
                shape = unpacked[0]
            elif facts.indexes:
                shape = ("tuple", ["value"] * (max(facts.indexes) + 1))
            elif facts.iterated:
                shape = ("tuple", ["value", "value"])  # `for t in batch`: a list of tensors
            else:
                return self.input()  # used whole: passed to the model, .to(device), ...
        if isinstance(shape, tuple) and shape[0] == "tuple":
            parts = []
            for position, part in enumerate(shape[1]):
                if isinstance(part, tuple) and part[0] == "tuple":
                    parts.append(self.batch(part, functions))
                else:
                    parts.append(self.label() if position == 1 else self.input())
            return tuple(parts)
        return self.input()

    def tensor_for(self, key: str):
        lower = key.lower()
        if lower in ("label", "labels", "target", "targets", "y"):
            return self.label()
        if any(word in lower for word in ("ids", "mask", "token")):
            return torch.randint(0, 10, (BATCH, 6))
        return self.input()

    def input(self):
        return torch.randn(BATCH, FEATURES)

    def label(self):
        if self.classification:
            return torch.randint(0, CLASSES, (BATCH,))
        return torch.randn(BATCH, CLASSES)


def _plain(shape):
    if isinstance(shape, tuple) and shape[0] == "tuple":
        return ("tuple", [_plain(p) for p in shape[1]])
    return "value"


def _suffix(name: str, prefixes: tuple) -> str:
    lower = name.lower().replace("_", "")
    for prefix in prefixes:
        if lower.startswith(prefix):
            return lower[len(prefix):]
        if lower.endswith(prefix):
            return lower[: -len(prefix)]
    return lower


def _describe(value) -> str:
    if isinstance(value, torch.Tensor):
        kind = "float" if value.is_floating_point() else "long"
        return f"{kind}{list(value.shape)}"
    if isinstance(value, tuple):
        return "(" + ", ".join(_describe(v) for v in value) + ")"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_describe(v)}" for k, v in value.items()) + "}"
    return type(value).__name__


# -- what to call -----------------------------------------------------------------------


class Module:
    """The original (not instrumented) module's functions, classes and call graph."""

    def __init__(self, source: str) -> None:
        self.tree = ast.parse(source)
        self.functions = {
            node.name: node for node in self.tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        }
        self.classes = {node.name: node for node in self.tree.body if isinstance(node, ast.ClassDef)}

    def methods(self, class_name: str) -> dict:
        node = self.classes.get(class_name)
        if node is None:
            return {}
        return {n.name: n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}

    def callers(self, name: str, scope: dict, through_self: bool) -> list:
        """Functions of ``scope`` whose bodies call ``name``."""
        found = []
        for other, node in scope.items():
            if other == name:
                continue
            for call in ast.walk(node):
                if not isinstance(call, ast.Call):
                    continue
                func = call.func
                if through_self and isinstance(func, ast.Attribute) and func.attr == name and isinstance(
                    func.value, ast.Name
                ) and func.value.id == "self":
                    found.append(other)
                    break
                if not through_self and isinstance(func, ast.Name) and func.id == name:
                    found.append(other)
                    break
        return found

    def entry(self, name: str, scope: dict, through_self: bool) -> str:
        """The outermost function of ``scope`` that leads to ``name`` (or ``name`` itself)."""
        seen, current = {name}, name
        while True:
            callers = [c for c in self.callers(current, scope, through_self) if c not in seen and not c.startswith("_")]
            if not callers:
                return current
            current = callers[0]
            seen.add(current)


def _parameters(function: ast.AST, skip_self: bool) -> tuple:
    """Required parameter names (those without defaults) and all positional names."""
    args = function.args
    positional = [a.arg for a in getattr(args, "posonlyargs", [])] + [a.arg for a in args.args]
    if skip_self and positional:
        positional = positional[1:]
    defaults = len(args.defaults)
    required = positional[: len(positional) - defaults] if defaults else list(positional)
    required += [a.arg for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is None]
    return required, positional


def _merged_facts(module: Module, functions: list, names: set, aliases: dict, depth: int = 0,
                  methods: dict | None = None) -> dict:
    """Facts about ``names``, following them into the file's functions (and the class's
    methods) they are passed to."""
    facts = collect(functions, names, aliases)
    if depth >= 2:
        return facts
    for name, fact in facts.items():
        for callee, position in list(fact.passed_to):
            if callee.startswith("self."):
                target, skip = (methods or {}).get(callee[5:]), True
            else:
                target, skip = module.functions.get(callee), False
            if target is None:
                continue
            _, positional = _parameters(target, skip_self=skip)
            if position < 0 or position >= len(positional):
                continue
            inner = _merged_facts(module, [target], {positional[position]}, {}, depth + 1, methods)
            _merge(fact, inner[positional[position]])
    return facts


def _merge(into: Facts, other: Facts) -> None:
    into.calls += other.calls
    into.iterated += other.iterated
    for key, value in other.methods.items():
        into.methods.setdefault(key, value)
    into.attributes |= other.attributes
    into.keys |= other.keys
    into.indexes |= other.indexes
    for flag in ("call_results_backwarded", "called_with_model_output", "subscripted", "in_range", "modulo",
                 "arithmetic", "compared", "none_checked", "used"):
        setattr(into, flag, getattr(into, flag) or getattr(other, flag))


class _Site:
    def __init__(self, kind: str, qualpath: list) -> None:
        self.kind, self.qualpath, self.name = kind, qualpath, qualpath[-1]


def _outer_site(module: Module, site):
    """A nested function (a closure) runs when the function or method holding it runs."""
    if site.kind != "nested":
        return site
    head = site.qualpath[0]
    if head in module.classes and len(site.qualpath) >= 3 and site.qualpath[1] in module.methods(head):
        return _Site("method", site.qualpath[:2])
    if head in module.functions:
        return _Site("function", site.qualpath[:1])
    return site


def plan_call(module: Module, site, source: str, namespace: dict):
    """(callable, kwargs, description, repeat) for the function ``site`` names."""
    site = _outer_site(module, site)
    if site.kind == "function":
        builder = Builder(source, lambda n, fs: _merged_facts(module, fs, {n}, {})[n])
        name = module.entry(site.name, module.functions, through_self=False)
        node = module.functions[name]
        function = namespace.get(name)
        if not callable(function):
            raise CannotDrive(f"{name}() is not defined after the module ran")
        required, _ = _parameters(node, skip_self=False)
        functions = [node] + [module.functions[c] for c in _called(node, module.functions)]
        facts = _merged_facts(module, functions, set(required), {})
        kwargs = builder.build(required, facts, functions, _annotations(node, namespace))
        repeat = 1 if name != site.name or _has_loop(node) else 3
        return function, kwargs, f"{name}({', '.join(builder.described)})", repeat
    if site.kind == "method":
        class_name = site.qualpath[0]
        cls = namespace.get(class_name)
        if not isinstance(cls, type):
            raise CannotDrive(f"class {class_name} is not defined after the module ran")
        methods = module.methods(class_name)
        builder = Builder(source, lambda n, fs: _merged_facts(module, fs, {n}, {}, methods=methods)[n])
        init = methods.get("__init__")
        aliases = init_aliases(init)
        everything = list(methods.values())
        if init is not None:
            required, _ = _parameters(init, skip_self=True)
            facts = _merged_facts(module, everything, set(required), aliases, methods=methods)
            init_kwargs = builder.build(required, facts, everything, _annotations(init, namespace))
        else:
            init_kwargs = {}
        init_described = list(builder.described)
        try:
            instance = cls(**init_kwargs)
        except Exception as error:
            reason = f"cannot construct {class_name} with stand-ins: {type(error).__name__}: {error}"
            raise CannotDrive(reason) from None
        builder.instance = instance
        name = module.entry(site.name, {k: v for k, v in methods.items() if k != "__init__"}, through_self=True)
        node = methods[name]
        required, _ = _parameters(node, skip_self=True)
        builder.described = []
        functions = [node] + [methods[c] for c in _called_methods(node, methods)]
        facts = _merged_facts(module, functions, set(required), {}, methods=methods)
        kwargs = builder.build(required, facts, functions, _annotations(node, namespace))
        repeat = 1 if name != site.name or _has_loop(node) else 3
        description = f"{class_name}({', '.join(init_described)}).{name}({', '.join(builder.described)})"
        return getattr(instance, name), kwargs, description, repeat
    raise CannotDrive(f"the flagged code sits in a nested function ({'.'.join(site.qualpath)}) that nothing called")


def _called(node: ast.AST, functions: dict) -> list:
    return sorted({c.func.id for c in ast.walk(node) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
                   and c.func.id in functions and functions[c.func.id] is not node})


def _called_methods(node: ast.AST, methods: dict) -> list:
    return sorted({
        c.func.attr for c in ast.walk(node)
        if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and isinstance(c.func.value, ast.Name)
        and c.func.value.id == "self" and c.func.attr in methods and methods[c.func.attr] is not node
    })


def _has_loop(node: ast.AST) -> bool:
    return any(isinstance(n, (ast.For, ast.While, ast.AsyncFor)) for n in ast.walk(node))


def drive_uncalled(plan, probe, namespace: dict, source: str, filename: str, execute) -> dict:
    """Call each function holding flagged lines that nothing called; fid -> RunEnd."""
    ends: dict = {}
    waiting = {}
    for index, target in plan.targets.items():
        if target.function is None or probe.hits[index] or probe.scope_calls.get(target.function):
            continue
        waiting.setdefault(target.function, []).append(index)
    if not waiting:
        return ends
    try:
        module = Module(source)
    except SyntaxError as error:
        return {fid: RunEnd(False, f"cannot read the functions to drive: {error}") for fid in waiting}
    # Functions and methods first: driving them may reach the nested ones too.
    for fid, indexes in sorted(waiting.items(), key=lambda item: plan.functions[item[0]].kind == "nested"):
        if probe.scope_calls.get(fid) or any(probe.hits[i] for i in indexes):
            continue  # an earlier drive reached it
        site = plan.functions[fid]
        try:
            function, kwargs, description, repeat = plan_call(module, site, source, namespace)
        except CannotDrive as error:
            # Nothing ran: the rest of the run is as clean as it was.
            ends[fid] = RunEnd(True, f"{site.name}() is never called and {error}")
            continue
        except Exception as error:  # stand-in construction ran user code (an __init__) that failed
            ends[fid] = RunEnd(False, f"{site.name}() is never called and its stand-ins failed: "
                                      f"{type(error).__name__}: {error}")
            continue
        for index in indexes:
            probe.driving_used[index] = description
        probe.driving = description

        def call(function=function, kwargs=kwargs, repeat=repeat):
            for _ in range(repeat):
                result = function(**kwargs)
                if isinstance(result, types.GeneratorType):
                    for _ in result:
                        pass

        end = execute(call, probe, filename)
        probe.driving = None
        if not end.clean and end.reason:
            end = RunEnd(False, f"{end.reason}, while driving {description}", end.exception)
        ends[fid] = end
        if probe.stop_reason is not None and probe.stop_clean:
            break
    return ends
