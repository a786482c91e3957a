"""Names: import aliases, dotted paths, and what well-known callables are.

Every table of torch spellings the model relies on lives here, so a new
spelling is added in one place.
"""

from __future__ import annotations

from graphlint.model import syntax as cst

from graphlint.model.walk import children

# Builtins whose result carries no graph whatever the arguments.
CUTTING_BUILTINS = frozenset({
    "float", "int", "bool", "str", "repr", "len", "isinstance", "issubclass", "hasattr",
    "id", "print", "range", "type", "callable", "hash", "format", "open", "input", "vars",
    "dir", "round", "divmod", "ord", "chr", "bin", "hex", "oct", "setattr", "delattr",
})
# Builtins whose result carries the graphs of their arguments.
PASSING_BUILTINS = frozenset({
    "sum", "max", "min", "abs", "list", "tuple", "dict", "set", "sorted", "reversed",
    "zip", "enumerate", "iter", "next", "map", "filter", "getattr", "pow", "frozenset",
})

# Tensor methods and torch functions with a boolean or integer-bitwise result.
_BOOLEAN_OPERATIONS = (
    "logical_not", "logical_and", "logical_or", "logical_xor",
    "bitwise_not", "bitwise_and", "bitwise_or", "bitwise_xor", "isclose", "isneginf", "isposinf", "signbit",
)
# Methods that return a graph-free value (a number, a copy without history, an index...).
CUTTING_METHODS = frozenset({
    "detach", "item", "tolist", "numpy", "argmax", "argmin", "argsort", "size", "dim",
    "numel", "nelement", "eq", "ne", "lt", "gt", "le", "ge", "long", "int", "bool", "byte",
    "short", "nonzero", "isnan", "isinf", "isfinite", "data_ptr", "element_size",
    "stride", "is_contiguous", "get_device", "state_dict", "keys", "__len__", "count",
    "index", "equal", "all", "any", "type_as_str", "sign", "floor_divide",
    # New tensors that only borrow dtype and device: no graph of the receiver.
    "new_zeros", "new_ones", "new_empty", "new_full", "new_tensor",
    # Hook registrations return a handle, not a tensor.
    "register_hook", "register_post_accumulate_grad_hook",
    # Integer draws: no graph of the probabilities (`probs.multinomial(1)`).
    "multinomial",
    # Boolean and bitwise results never require grad (`mask.logical_not()`).
    *_BOOLEAN_OPERATIONS,
})
# Tensor methods whose first argument is a boolean mask (no graph flows through
# a mask), and torch functions whose first is a condition (`torch.where(c, a, b)`).
MASK_FIRST_METHODS = frozenset({"masked_fill", "masked_fill_", "masked_select", "masked_scatter", "masked_scatter_"})
CONDITION_FIRST_FUNCTIONS = frozenset({"where", "masked_fill", "masked_select", "masked_scatter"})
# Tensor methods returning a (values, indices) pair: ``t.max(1)[1]`` is graph-free.
# (Called without a dimension, max, min and median return a 0-d tensor, which
# ``[1]`` cannot index: ``[1]`` right after the call implies the pair.)
INDEXED_REDUCTIONS = frozenset({"max", "min", "topk", "sort", "kthvalue", "median", "mode", "cummax", "cummin"})
# Drawing from a torch distribution runs under no_grad (rsample() is the
# differentiable draw). Cut only when the method is not one of a class of the file
# or a module's: a VAE's own `sample(mu, logvar)` reparameterises.
SAMPLING_METHODS = frozenset({"sample", "sample_n"})
# Methods of a tensor that cut it in place.
INPLACE_CUTS = frozenset({"detach_", "requires_grad_"})
# Attributes that read a graph-free value off a tensor.
CUTTING_ATTRIBUTES = frozenset({
    "data", "grad", "shape", "dtype", "device", "requires_grad", "is_leaf", "ndim",
    "is_cuda", "layout", "names", "indices",
})

# Attributes of a tensor that are the tensor seen another way (a node of its graph).
# Any other attribute read off a parameter is state kept on it (metadata, or what a
# library attaches: BackPACK's `grad_batch`, Opacus's `grad_sample`), not the parameter.
TENSOR_VIEW_ATTRIBUTES = frozenset({"T", "mT", "H", "mH", "real", "imag"})

TORCH_FACTORIES = frozenset({
    "zeros", "ones", "randn", "rand", "randint", "empty", "full", "arange", "linspace",
    "logspace", "eye", "tensor", "as_tensor", "from_numpy", "zeros_like", "ones_like",
    "randn_like", "rand_like", "randint_like", "empty_like", "full_like", "randperm",
    "normal", "bernoulli", "multinomial", "load", "Tensor", "FloatTensor", "LongTensor",
    "DoubleTensor", "IntTensor", "BoolTensor", "ByteTensor", "HalfTensor", "manual_seed",
    "Generator", "device", "get_default_dtype", "is_tensor", "numel", "tril_indices",
    "triu_indices", "meshgrid_indices",
})
# torch functions whose result has no graph (comparisons, indices).
TORCH_CUTTING = frozenset({
    "argmax", "argmin", "argsort", "eq", "ne", "lt", "gt", "le", "ge", "isfinite",
    "isnan", "isinf", "equal", "allclose", "isclose", "is_tensor", "numel", "sign",
    "bucketize", "searchsorted", "count_nonzero", "is_grad_enabled", "no_grad",
    "inference_mode", "enable_grad", "set_grad_enabled", "save", *_BOOLEAN_OPERATIONS,
})

# Methods of an optimizer that clear the gradients it steps: Paddle's optimizers
# (behind deepxde's backend switch) spell `zero_grad` as `clear_grad`.
ZERO_GRAD_METHODS = frozenset({"zero_grad", "clear_grad"})

OPTIMIZER_CLASSES = frozenset({
    "SGD", "Adam", "AdamW", "Adagrad", "Adadelta", "Adamax", "RMSprop", "Rprop", "ASGD",
    "LBFGS", "NAdam", "RAdam", "SparseAdam", "Adafactor", "Lion", "LAMB", "Lamb",
    "FusedAdam", "FusedLAMB", "FusedSGD", "AdamW8bit", "Adam8bit", "Muon", "Shampoo",
    "Adan", "Lookahead", "SophiaG", "ZeroRedundancyOptimizer",
})
SCALER_CLASSES = frozenset({"GradScaler", "ShardedGradScaler"})
# torch.nn modules without parameters (as constructed by default): calling one
# is a function of its inputs, with no graph of its own (`nn.ZeroPad2d(1)(z)`
# of a constant is a constant). Loss modules are left out: their call is where
# findings say a loss was built.
PARAMETER_FREE_MODULES = frozenset({
    "Identity", "Flatten", "Unflatten",
    "Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout",
    "ReLU", "ReLU6", "LeakyReLU", "ELU", "SELU", "CELU", "GELU", "SiLU", "Mish", "Sigmoid", "Tanh",
    "Softplus", "Softsign", "Softshrink", "Hardshrink", "Hardtanh", "Hardsigmoid", "Hardswish",
    "LogSigmoid", "Tanhshrink", "Threshold", "GLU", "Softmax", "Softmax2d", "LogSoftmax", "Softmin",
    "MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d",
    "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d",
    "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d", "LPPool1d", "LPPool2d",
    "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d",
    "ZeroPad1d", "ZeroPad2d", "ZeroPad3d", "ConstantPad1d", "ConstantPad2d", "ConstantPad3d",
    "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d",
    "ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d",
    "CircularPad1d", "CircularPad2d", "CircularPad3d",
    "Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d",
    "PixelShuffle", "PixelUnshuffle", "ChannelShuffle", "Fold", "Unfold",
    "CosineSimilarity", "PairwiseDistance",
})


# Methods that add their argument to the receiver: list spellings on any receiver,
# the generic ones (`add`, `update`) only on a receiver known to be a container
# (`metric.add(loss)` may be an Accumulator that takes float() of it).
LIST_ADDS = frozenset({"append", "extend", "insert", "appendleft"})
CONTAINER_ADDS = frozenset({"add", "update", "setdefault", "put"})
# Module methods that do not run a forward.
MODULE_HOUSEKEEPING = frozenset({
    "train", "eval", "to", "cuda", "cpu", "half", "float", "double", "zero_grad",
    "state_dict", "load_state_dict", "apply", "named_modules", "modules", "children",
    "register_buffer", "register_forward_hook", "requires_grad_", "init_hidden",
    "init_hidden_state", "reset_parameters", "save_pretrained", "named_buffers", "buffers",
})
PARAMETER_METHODS = frozenset({"parameters", "named_parameters"})
# Tensor methods that only reshape or compute on their receiver (and arguments):
# on a graph-free receiver of no known kind (`x.view(n, -1)` of data) they build
# nothing, where an unknown object's unknown method may run a forward.
TENSOR_METHODS = frozenset({
    "view", "view_as", "reshape", "reshape_as", "t", "transpose", "permute", "flatten",
    "unsqueeze", "squeeze", "contiguous", "expand", "expand_as", "repeat", "narrow",
    "sum", "mean", "std", "var", "norm", "prod", "pow", "exp", "log", "abs", "sqrt",
    "sigmoid", "tanh", "relu", "softmax", "log_softmax", "clamp", "clip", "neg", "sign",
    "mul", "div", "add", "sub", "matmul", "mm", "bmm", "dot", "float", "double", "half",
})
# Name shapes of module methods that read or move state rather than run a forward
# (`get_input_embeddings`, `save_checkpoint`, `_zero3_consolidated_16bit_state_dict`).
_HOUSEKEEPING_PREFIXES = ("get_", "set_", "register_", "named_", "save", "load", "to_", "_")
_HOUSEKEEPING_PARTS = ("state_dict", "checkpoint")


def is_module_housekeeping(method: str, call: cst.Call | None = None) -> bool:
    """Whether calling ``module.<method>(...)`` (``call``, when known) surely runs no
    forward. A getter handed a computed value (`policy.get_action_logprob(state)`,
    `agent.get_action_and_value(obs)`) computes from it, unlike
    `get_input_embeddings()` or `get_submodule("fc")`."""
    if call is not None and method.startswith("get_") and not all(is_literal(arg.value) for arg in call.args):
        return False
    return (
        method in MODULE_HOUSEKEEPING
        or method in PARAMETER_METHODS
        or method.startswith(_HOUSEKEEPING_PREFIXES)
        or any(part in method for part in _HOUSEKEEPING_PARTS)
    )


class Imports:
    """Maps local names bound by imports to the dotted names they stand for."""

    def __init__(self, module: cst.Module) -> None:
        self.aliases: dict[str, str] = {}
        for node in _walk_imports(module):
            if type(node) is cst.Import:
                for alias in node.names:
                    full = dotted(alias.name) or ""
                    if alias.asname is not None:
                        self.aliases[_as_name(alias)] = full
                    else:
                        root = full.split(".")[0]
                        self.aliases[root] = root
            elif type(node) is cst.ImportFrom and type(node.names) is not cst.ImportStar:
                base = dotted(node.module) if node.module is not None else ""
                base = "." * len(node.relative) + (base or "")
                for alias in node.names:
                    name = dotted(alias.name) or ""
                    local = _as_name(alias) if alias.asname is not None else name
                    self.aliases[local] = f"{base}.{name}" if base else name

    def qualify(self, expr: cst.BaseExpression) -> str | None:
        """The dotted name of an imported callable or attribute (``nn.Linear`` -> ``torch.nn.Linear``)."""
        return self.qualify_path(dotted(expr))

    def qualify_path(self, path: str | None) -> str | None:
        """``qualify`` for a dotted path already in text form."""
        if not path:
            return None
        root, _, rest = path.partition(".")
        if root not in self.aliases:
            return None
        full = self.aliases[root]
        return f"{full}.{rest}" if rest else full

    def is_imported(self, name: str) -> bool:
        return name in self.aliases


def _as_name(alias: cst.ImportAlias) -> str:
    assert alias.asname is not None
    return dotted(alias.asname.name) or ""


# Nodes that can hold statements: an import sits in one of these, at any depth
# (functions, `if TYPE_CHECKING:`, try-import blocks), never in an expression.
_STATEMENT_HOLDERS = frozenset({
    cst.Module, cst.IndentedBlock, cst.SimpleStatementLine, cst.SimpleStatementSuite,
    cst.FunctionDef, cst.ClassDef, cst.If, cst.Else, cst.For, cst.While, cst.With,
    cst.Try, cst.TryStar, cst.ExceptHandler, cst.ExceptStarHandler, cst.Finally,
    cst.Match, cst.MatchCase,
})


def _walk_imports(module: cst.Module):
    stack: list[cst.CSTNode] = [module]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is cst.Import or kind is cst.ImportFrom:
            yield node
        elif kind in _STATEMENT_HOLDERS:
            stack.extend(children(node))


def bound_names(target: cst.CSTNode) -> set[str]:
    """The names an assignment target binds (``a``, ``a, (b, *c)``); attributes and items bind none."""
    if type(target) is cst.Name:
        return {target.value}
    if type(target) in (cst.Tuple, cst.List):
        found: set[str] = set()
        for element in target.elements:
            found |= bound_names(element.value)
        return found
    if type(target) is cst.StarredElement:
        return bound_names(target.value)
    return set()


def display_parts(expr: cst.BaseExpression) -> list[cst.BaseExpression] | None:
    """The parts of a tuple or list display without a starred part (``x, y``), else None."""
    if type(expr) in (cst.Tuple, cst.List) and not any(type(e) is cst.StarredElement for e in expr.elements):
        return [e.value for e in expr.elements]
    return None


def paired_parts(target: cst.BaseExpression, value: cst.BaseExpression) -> list[tuple] | None:
    """(target part, value part) for each position of ``a, b = x, y``: both sides
    displays of one length without a starred part, so that each part of the
    target is bound the value part at its position; else None.

    The one reading of this shape: with a star on either side, a position no
    longer says which value a part gets (``a, *b = x, y, z``, ``a, b = *xs, y``).
    """
    targets, values = display_parts(target), display_parts(value)
    if targets is None or values is None or len(targets) != len(values):
        return None
    return list(zip(targets, values))


def related_paths(a: str, b: str) -> bool:
    """Whether one object path is the other or lies inside it (`model`, `model.head`)."""
    return a == b or a.startswith(b + ".") or b.startswith(a + ".")


def dotted(expr: cst.CSTNode | None) -> str | None:
    """``a.b.c`` for a chain of names and attributes, else None."""
    kind = type(expr)
    if kind is cst.Name:
        return expr.value
    if kind is not cst.Attribute:
        return None
    try:
        return expr._dotted  # asked a million times on the corpus, mostly of the same nodes
    except AttributeError:
        pass
    parts: list[str] = []
    node = expr
    while type(node) is cst.Attribute:
        parts.append(node.attr.value)
        node = node.value
    found = None
    if type(node) is cst.Name:
        parts.append(node.value)
        found = ".".join(reversed(parts))
    expr._dotted = found
    return found


def last_part(qualified: str) -> str:
    return qualified.rsplit(".", 1)[-1]


def is_torch_factory(qualified: str) -> bool:
    return qualified.startswith("torch.") and last_part(qualified) in TORCH_FACTORIES and qualified.count(".") == 1


def is_module_class(qualified: str) -> bool:
    """``torch.nn.Linear`` and friends: constructing one builds a module (graph-free)."""
    parts = qualified.split(".")
    return (
        len(parts) >= 3
        and parts[0] == "torch"
        and parts[1] == "nn"
        and parts[2] not in ("functional", "utils", "init", "Parameter", "parameter")
        and parts[-1][:1].isupper()
        and parts[-1] != "Parameter"
    )


def is_optimizer_class(qualified: str) -> bool:
    name = last_part(qualified)
    if "lr_scheduler" in qualified or "scheduler" in name.lower():
        return False
    return name in OPTIMIZER_CLASSES or (
        qualified.startswith("torch.optim.") and name[:1].isupper() and name != "Optimizer"
    )


def is_scheduler_class(qualified: str) -> bool:
    return "lr_scheduler" in qualified or qualified.endswith(("LR", "Scheduler", "Plateau"))


def is_integer_literal(expr: cst.BaseExpression) -> bool:
    """An integer as written, negative or not (`0`, `-1`)."""
    if type(expr) is cst.UnaryOperation and type(expr.operator) is cst.Minus:
        expr = expr.expression
    return type(expr) is cst.Integer


def is_literal(expr: cst.BaseExpression) -> bool:
    """A number, a string, True, False or None, as written."""
    if type(expr) is cst.UnaryOperation:
        expr = expr.expression
    if type(expr) is cst.Name:
        return expr.value in ("True", "False", "None")
    return type(expr) in (cst.Integer, cst.Float, *STRING_LITERALS)


def constant_string(expr: cst.BaseExpression) -> str | None:
    if type(expr) is cst.SimpleString:
        try:
            value = expr.evaluated_value
        except Exception:  # noqa: BLE001 - odd prefixes: not a plain constant
            return None
        return value if isinstance(value, str) else None
    return None


# String literals as the tree spells them (an f-string and an implicit concatenation too).
STRING_LITERALS = (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)


def keyword(call: cst.Call, name: str) -> cst.BaseExpression | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg.value
    return None


def positional(call: cst.Call) -> list[cst.BaseExpression]:
    return [arg.value for arg in call.args if arg.keyword is None and not arg.star]


def bound_arguments(params: list[str], call: cst.Call) -> dict[str, cst.BaseExpression] | None:
    """Parameter -> the argument this call passes it; None when a `*`/`**` argument
    hides which parameter gets what."""
    if any(arg.star for arg in call.args):
        return None
    passed = dict(zip(params, positional(call)))
    passed.update({arg.keyword.value: arg.value for arg in call.args if arg.keyword is not None})
    return passed


def is_true(expr: cst.BaseExpression | None) -> bool:
    return type(expr) is cst.Name and expr.value == "True"


def is_false(expr: cst.BaseExpression | None) -> bool:
    return type(expr) is cst.Name and expr.value in ("False", "None")


def written_in_place(expr: cst.BaseExpression) -> tuple[str | None, cst.BaseExpression | None]:
    """(method, ``y``) of the call ``x.add_(y)`` (``alpha=`` allowed), ``x.lerp_(y, w)``
    or ``x.copy_(y)``: a tensor made before the loop takes ``y``'s graph in place.
    ``lerp_`` moves ``x`` towards ``y``, an ``add_`` of a part of ``y``.

    The fixer asks this of libcst's nodes, the model of its own, which have the
    same class names: hence the tests by name (and in ``receiver_in_place``)."""
    if type(expr).__name__ != "Call" or type(expr.func).__name__ != "Attribute":
        return None, None
    method = expr.func.attr.value
    plain = [arg for arg in expr.args if arg.keyword is None]
    if any(arg.star for arg in expr.args) or not plain:
        return None, None
    if method == "lerp_" and len(plain) == 2:
        return "add_", plain[0].value
    others = [arg.keyword.value for arg in expr.args if arg.keyword is not None]
    if method not in ("add_", "copy_") or len(plain) != 1 or others not in ([], ["alpha"]):
        return None, None
    if method == "copy_" and others:
        return None, None
    return method, plain[0].value


def receiver_in_place(func: cst.Attribute) -> cst.BaseExpression:
    """The tensor an in-place method writes: ``x`` of ``x.mul_(0.9).add_(y)`` too
    (each in-place method returns its receiver)."""
    receiver = func.value
    while (
        type(receiver).__name__ == "Call" and type(receiver.func).__name__ == "Attribute"
        and receiver.func.attr.value in _IN_PLACE_CHAINED
    ):
        receiver = receiver.func.value
    return receiver


_IN_PLACE_CHAINED = frozenset({"mul_", "div_", "add_", "sub_", "lerp_", "clamp_", "zero_"})
