"""How a function's body uses each of its parameters (for stand-ins).

Read from the original source with ``ast``: what is called, iterated,
unpacked, subscripted, which methods and attributes are used, and whether a
value flows into ``range()``, ``%`` or a ``.backward()``. ``self.<attr>``
assigned from an ``__init__`` parameter counts as that parameter, so a
trainer's ``self.model(x)`` in any method says what ``model`` must be.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field


@dataclass
class Facts:
    """Everything seen about one name."""

    calls: list = field(default_factory=list)  # output shapes expected at call sites
    call_results_backwarded: bool = False
    called_with_model_output: bool = False
    iterated: list = field(default_factory=list)  # batch shapes expected by for loops
    methods: dict = field(default_factory=dict)  # method name -> output shape at its call site
    attributes: set = field(default_factory=set)
    subscripted: bool = False
    keys: set = field(default_factory=set)  # constant string subscripts: batch["input_ids"]
    double_star: bool = False  # passed as **name: a mapping
    result_attributes: set = field(default_factory=set)  # outputs = model(x); outputs.loss
    indexes: set = field(default_factory=set)  # constant int subscripts: batch[0]
    in_range: bool = False
    modulo: bool = False
    arithmetic: bool = False
    compared: bool = False
    none_checked: bool = False
    used: bool = False
    passed_to: list = field(default_factory=list)  # (callee name, position) for calls to module functions


def shape_of_target(target: ast.AST, body: list | None = None):
    """The structure an assignment or for target expects: "value" or ("tuple", [...])."""
    if isinstance(target, (ast.Tuple, ast.List)):
        return ("tuple", [shape_of_target(elt, body) for elt in target.elts])
    if isinstance(target, ast.Name):
        return ("name", target.id)
    return "value"


def _name_of(node: ast.AST, aliases: dict) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
        and node.attr in aliases
    ):
        return aliases[node.attr]
    return None


class Collector(ast.NodeVisitor):
    def __init__(self, names: set, aliases: dict | None = None) -> None:
        self.names = set(names)
        self.aliases = aliases or {}
        self.facts = {name: Facts() for name in names}
        self.results: dict = {}  # local name -> parameter whose call produced it
        self.model_outputs: dict = {}  # local name -> parameter whose call produced it

    def _facts(self, node: ast.AST) -> Facts | None:
        name = _name_of(node, self.aliases)
        if name in self.facts:
            return self.facts[name]
        return None

    # -- assignments: record what a call's result must unpack to -------------------------

    def visit_Assign(self, node: ast.Assign) -> None:
        if isinstance(node.value, ast.Call):
            self._call_assigned(node.value, node.targets[0])
        elif isinstance(node.value, (ast.Name, ast.Attribute)):
            facts = self._facts(node.value)
            if facts is not None and isinstance(node.targets[0], (ast.Tuple, ast.List)):
                facts.subscripted = True
                facts.iterated.append(shape_of_target(node.targets[0]))
        self.generic_visit(node)

    def _call_assigned(self, call: ast.Call, target: ast.AST) -> None:
        shape = shape_of_target(target)
        facts = self._facts(call.func)
        if facts is not None:
            facts.calls.append(shape)
            for name in _target_names(target):
                self.results[name] = call.func
                self.model_outputs[name] = _name_of(call.func, self.aliases)
        elif isinstance(call.func, ast.Attribute):
            owner = self._facts(call.func.value)
            if owner is not None:
                owner.methods[call.func.attr] = shape

    def visit_For(self, node) -> None:
        source = node.iter
        if isinstance(source, ast.Call) and isinstance(source.func, ast.Name) and source.args:
            if source.func.id in ("enumerate", "tqdm", "iter", "list"):
                shape = shape_of_target(node.target)
                if source.func.id == "enumerate" and isinstance(shape, tuple) and len(shape[1]) == 2:
                    shape = shape[1][1]
                facts = self._facts(source.args[0])
                if facts is not None:
                    facts.iterated.append(shape)
                    facts.used = True
            elif source.func.id == "zip":
                for arg in source.args:
                    facts = self._facts(arg)
                    if facts is not None:
                        facts.iterated.append("value")
                        facts.used = True
            elif source.func.id == "range":
                for arg in source.args:
                    for sub in ast.walk(arg):
                        facts = self._facts(sub)
                        if facts is not None:
                            facts.in_range = True
                            facts.used = True
        else:
            facts = self._facts(source)
            if facts is not None:
                facts.iterated.append(shape_of_target(node.target))
                facts.used = True
        self.generic_visit(node)

    visit_AsyncFor = visit_For

    # -- calls and methods -------------------------------------------------------------

    def visit_Call(self, node: ast.Call) -> None:
        facts = self._facts(node.func)
        if facts is not None:
            facts.used = True
            if not facts.calls:
                facts.calls.append("value")
            # Fed with another callable's output: a loss (a model fed its own output is recurrent).
            callee = _name_of(node.func, self.aliases)
            for arg in node.args:
                producer = self.model_outputs.get(arg.id) if isinstance(arg, ast.Name) else None
                if isinstance(arg, ast.Call):
                    producer = _name_of(arg.func, self.aliases) if self._facts(arg.func) is not None else None
                if producer is not None and producer != callee:
                    facts.called_with_model_output = True
        if isinstance(node.func, ast.Attribute):
            owner = self._facts(node.func.value)
            if owner is not None:
                owner.used = True
                owner.methods.setdefault(node.func.attr, "value")
            if node.func.attr == "backward":
                self._backwarded(node.func.value)
        if isinstance(node.func, ast.Name) and node.func.id == "backward" and node.args:
            self._backwarded(node.args[0])
        callee = None
        if isinstance(node.func, ast.Name):
            callee = node.func.id
        elif _is_self_attribute(node.func):
            callee = "self." + node.func.attr
        for position, arg in enumerate(list(node.args) + [k.value for k in node.keywords if k.arg]):
            facts_arg = self._facts(arg)
            if facts_arg is not None:
                facts_arg.used = True
                # "?" : a callee we cannot follow (a library function, a method of a value)
                facts_arg.passed_to.append((callee or "?", position if position < len(node.args) else -1))
        for keyword in node.keywords:
            if keyword.arg is None:
                facts_arg = self._facts(keyword.value)
                if facts_arg is not None:
                    facts_arg.double_star = True
                    facts_arg.used = True
        if isinstance(node.func, ast.Name) and node.func.id in ("len",) and node.args:
            facts_arg = self._facts(node.args[0])
            if facts_arg is not None:
                facts_arg.attributes.add("__len__")
        self.generic_visit(node)

    def _backwarded(self, value: ast.AST) -> None:
        if isinstance(value, ast.Call):
            facts = self._facts(value.func)
            if facts is not None:
                facts.call_results_backwarded = True
            return
        if isinstance(value, ast.Name) and value.id in self.results:
            facts = self._facts(self.results[value.id])
            if facts is not None:
                facts.call_results_backwarded = True

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if isinstance(node.value, ast.Name) and self.model_outputs.get(node.value.id) in self.facts:
            self.facts[self.model_outputs[node.value.id]].result_attributes.add(node.attr)
        owner = self._facts(node.value)
        if owner is not None:
            owner.used = True
            owner.attributes.add(node.attr)
        facts = self._facts(node)
        if facts is not None:
            facts.used = True
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        facts = self._facts(node.value)
        if facts is not None:
            facts.subscripted = True
            facts.used = True
            key = node.slice.value if type(node.slice).__name__ == "Index" else node.slice  # Python 3.8
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                facts.keys.add(key.value)
            elif isinstance(key, ast.Constant) and isinstance(key.value, int):
                facts.indexes.add(key.value)
        self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        for side in (node.left, node.right):
            facts = self._facts(side)
            if facts is not None:
                facts.arithmetic = True
                facts.used = True
                if isinstance(node.op, ast.Mod) and side is node.right:
                    facts.modulo = True
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        sides = [node.left] + list(node.comparators)
        none = any(isinstance(s, ast.Constant) and s.value is None for s in sides)
        for side in sides:
            facts = self._facts(side)
            if facts is not None:
                facts.used = True
                if none:
                    facts.none_checked = True
                else:
                    facts.compared = True
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in self.facts:
            self.facts[node.id].used = True


def _is_self_attribute(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"


def _target_names(target: ast.AST) -> list:
    return [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]


def collect(functions: list, names: set, aliases: dict | None = None) -> dict:
    """Facts about ``names`` over the bodies of ``functions``."""
    collector = Collector(names, aliases)
    for function in functions:
        for stmt in function.body:
            collector.visit(stmt)
    return collector.facts


def init_aliases(init: ast.AST | None) -> dict:
    """``self.attr = param`` in ``__init__``: attr -> param."""
    aliases = {}
    if init is None:
        return aliases
    params = {a.arg for a in init.args.args + init.args.kwonlyargs}
    for node in ast.walk(init):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id in params:
            for target in node.targets:
                if _is_self_attribute(target):
                    aliases[target.attr] = node.value.id
    return aliases
