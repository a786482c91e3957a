"""Build the model's syntax tree (graphlint/model/syntax.py) from CPython's ``ast``.

Where libcst's tree has a shape ``ast`` does not keep, the source text decides:
a statement that is not the first on its line follows a ``;`` (one
``SimpleStatementLine``) or a header's colon (a ``SimpleStatementSuite``); an
``If`` alone in ``orelse`` at its parent's column is an ``elif``; a subscript's
tuple without its own parentheses is several ``SubscriptElement``s. Strings
keep their source text, as libcst's do; numbers are spelled by ``repr``.
"""

from __future__ import annotations

import ast

from graphlint.model import syntax as cst

_BINARY = {op: getattr(cst, name) for op, name in cst._BINARY.items()}
_AUGMENTED = {op: getattr(cst, name + "Assign") for op, name in cst._BINARY.items()}
_UNARY = {op: getattr(cst, name) for op, name in cst._UNARY.items()}
_BOOLEAN = {op: getattr(cst, name) for op, name in cst._BOOLEAN.items()}
_COMPARISON = {op: getattr(cst, name) for op, name in cst._COMPARISON.items()}


class TooDeep(Exception):
    """An expression nested deeper than the build allows (``node``: the first too deep)."""

    def __init__(self, node: ast.AST) -> None:
        super().__init__("expression nested too deeply")
        self.node = node


def build_module(tree: ast.Module, data: bytes, max_depth: int = 1_000) -> cst.Module:
    """The syntax tree of ``tree``, parsed from ``data`` (the source as UTF-8).

    Raises TooDeep past ``max_depth`` nested expressions: what is built here is
    analysed by recursion as deep.
    """
    builder = _Builder(data, max_depth)
    body = builder.block(tree.body)
    return cst.Module(body=body, lines=builder.lines, names=frozenset(builder.names), bound=builder.scope_bound())


def _spanned(node, source: ast.AST):
    node._span = (source.lineno, source.col_offset, source.end_lineno, source.end_col_offset)
    return node


def _name_at(value: str, line: int, column: int):
    """A Name spanning the identifier ``value`` written at (line, column), column in bytes."""
    name = cst.Name(value=value)
    name._span = (line, column, line, column + len(value.encode()))
    return name


def _around(node, first, last=None):
    """``node`` spanning from ``first``'s start to ``last``'s end (both nodes of this tree)."""
    start, end = first._span, (last or first)._span
    node._span = (start[0], start[1], end[2], end[3]) if start and end else start or end
    return node


class _Builder:
    def __init__(self, data: bytes, max_depth: int) -> None:
        self.lines = data.splitlines(keepends=True)  # bytes: ast's columns count UTF-8 bytes
        self.depth, self.max_depth = 0, max_depth
        # Every identifier the code spells (names, attributes, parameters, keywords,
        # imports, definitions): what the prefilter's second stage looks at.
        self.names: set[str] = set()
        # The names the scope being built binds, and those it declares global or
        # nonlocal: what statements.assigned_names finds by walking the built body,
        # gathered here for every function at no extra walk (see scope_bound).
        self.bound: set[str] = set()
        self.declared: set[str] = set()
        self.expressions = {
            ast.Name: self.name, ast.Attribute: self.attribute, ast.Call: self.call,
            ast.Subscript: self.subscript, ast.BinOp: self.binary, ast.BoolOp: self.boolean,
            ast.UnaryOp: self.unary, ast.Compare: self.comparison, ast.IfExp: self.if_expression,
            ast.Lambda: self.lambda_, ast.NamedExpr: self.named, ast.Await: self.await_,
            ast.Yield: self.yield_, ast.YieldFrom: self.yield_from, ast.Tuple: self.tuple_,
            ast.List: self.list_, ast.Set: self.set_, ast.Dict: self.dict_, ast.ListComp: self.list_comp,
            ast.SetComp: self.set_comp, ast.GeneratorExp: self.generator, ast.DictComp: self.dict_comp,
            ast.Constant: self.constant, ast.JoinedStr: self.joined, ast.Starred: self.starred,
            ast.Slice: self.slice_,
        }
        self.small_statements = {
            ast.Expr: self.expr_statement, ast.Assign: self.assign, ast.AnnAssign: self.ann_assign,
            ast.AugAssign: self.aug_assign, ast.Return: self.return_, ast.Raise: self.raise_,
            ast.Assert: self.assert_, ast.Delete: self.delete, ast.Pass: self.keyword_statement,
            ast.Break: self.keyword_statement, ast.Continue: self.keyword_statement,
            ast.Global: self.global_, ast.Nonlocal: self.global_, ast.Import: self.import_,
            ast.ImportFrom: self.import_from,
        }
        self.compound_statements = {
            ast.If: self.if_, ast.For: self.for_, ast.AsyncFor: self.for_, ast.While: self.while_,
            ast.With: self.with_, ast.AsyncWith: self.with_, ast.Try: self.try_,
            ast.FunctionDef: self.function, ast.AsyncFunctionDef: self.function, ast.ClassDef: self.class_,
            ast.Match: self.match,
        }
        if hasattr(ast, "TryStar"):
            self.compound_statements[ast.TryStar] = self.try_

    # Source text.

    def segment(self, node: ast.AST) -> str:
        return cst.text_between(self.lines, (node.lineno, node.col_offset, node.end_lineno, node.end_col_offset))

    def first_on_line(self, node: ast.AST) -> bool:
        return not self.lines[node.lineno - 1][: node.col_offset].strip()

    # Statements.

    def block(self, statements: list[ast.stmt]) -> list:
        """A module's or an indented block's statements: small ones grouped per line."""
        found: list = []
        line = None
        self.depth += 1  # a statement counts as a level, as in ast's own nesting
        for statement in statements:
            compound = self.compound_statements.get(type(statement))
            if compound is not None:
                found.append(compound(statement))
                line = None
                continue
            small = self.small(statement)
            if line is not None and not self.first_on_line(statement):  # after a `;`
                line.body.append(small)
                _around(line, line.body[0], small)
            else:
                line = _around(cst.SimpleStatementLine(body=[small]), small)
                found.append(line)
        self.depth -= 1
        return found

    def suite(self, statements: list[ast.stmt]):
        if not self.first_on_line(statements[0]):  # `if x: a; b`, after the header's colon
            self.depth += 1
            body = [self.small(statement) for statement in statements]
            self.depth -= 1
            return _around(cst.SimpleStatementSuite(body=body), body[0], body[-1])
        body = self.block(statements)
        return _around(cst.IndentedBlock(body=body), body[0], body[-1])

    def small(self, statement: ast.stmt):
        convert = self.small_statements.get(type(statement))
        if convert is None:  # a statement newer than this module (`type X = ...`)
            return _spanned(cst.Pass(), statement)
        return _spanned(convert(statement), statement)

    def else_(self, statements: list[ast.stmt], kind=cst.Else):
        if not statements:
            return None
        body = self.suite(statements)
        return _around(kind(body=body), body)

    def if_(self, node: ast.If):
        orelse = node.orelse
        if len(orelse) == 1 and type(orelse[0]) is ast.If and orelse[0].col_offset == node.col_offset \
                and orelse[0].lineno > node.lineno:
            tail = self.if_(orelse[0])  # `elif`
        else:
            tail = self.else_(orelse)
        return _spanned(cst.If(test=self.expression(node.test), body=self.suite(node.body), orelse=tail), node)

    def for_(self, node):
        return _spanned(cst.For(
            asynchronous=cst.Asynchronous() if type(node) is ast.AsyncFor else None,
            target=self.expression(node.target), iter=self.expression(node.iter),
            body=self.suite(node.body), orelse=self.else_(node.orelse),
        ), node)

    def while_(self, node: ast.While):
        return _spanned(cst.While(
            test=self.expression(node.test), body=self.suite(node.body), orelse=self.else_(node.orelse)
        ), node)

    def with_(self, node):
        items = []
        for item in node.items:
            value = self.expression(item.context_expr)
            alias = None
            if item.optional_vars is not None:
                target = self.expression(item.optional_vars)
                alias = _around(cst.AsName(name=target), target)
            items.append(_around(cst.WithItem(item=value, asname=alias), value, alias))
        return _spanned(cst.With(
            asynchronous=cst.Asynchronous() if type(node) is ast.AsyncWith else None,
            items=items, body=self.suite(node.body),
        ), node)

    def try_(self, node):
        star = type(node) is not ast.Try
        handlers = []
        for handler in node.handlers:
            name = None
            if handler.name is not None:
                self.bound.add(handler.name)
                name = cst.AsName(name=self.identifier(handler.name, handler, "as"))
                _around(name, name.name)
            kind = cst.ExceptStarHandler if star else cst.ExceptHandler
            handlers.append(_spanned(kind(
                type=self.expression(handler.type) if handler.type is not None else None,
                name=name, body=self.suite(handler.body),
            ), handler))
        return _spanned((cst.TryStar if star else cst.Try)(
            body=self.suite(node.body), handlers=handlers, orelse=self.else_(node.orelse),
            finalbody=self.else_(node.finalbody, cst.Finally),
        ), node)

    # Names bound per scope. A definition binds its name where it stands; what its
    # decorators, defaults, bases or a lambda bind counts for no scope, as in
    # statements.assigned_names, which stops at them.

    def scope_bound(self) -> frozenset[str]:
        return frozenset(self.bound - self.declared)

    def enter_scope(self) -> tuple[set[str], set[str]]:
        outer = self.bound, self.declared
        self.bound, self.declared = set(), set()
        return outer

    def function(self, node):
        outer = self.enter_scope()
        decorators = [self.decorator(d) for d in node.decorator_list]
        returns = self.annotation(node.returns)
        name = self.identifier(node.name, node, "def")
        params = self.parameters(node.args, node)
        self.bound, self.declared = set(), set()
        body = self.suite(node.body)
        built = _spanned(cst.FunctionDef(
            decorators=decorators,
            asynchronous=cst.Asynchronous() if type(node) is ast.AsyncFunctionDef else None,
            name=name, params=params, returns=returns, body=body, _bound=self.scope_bound(),
        ), node)
        self.bound, self.declared = outer
        self.bound.add(node.name)
        return built

    def class_(self, node: ast.ClassDef):
        outer = self.enter_scope()
        built = _spanned(cst.ClassDef(
            decorators=[self.decorator(d) for d in node.decorator_list],
            name=self.identifier(node.name, node, "class"),
            bases=[self.arg(base) for base in node.bases],
            keywords=[self.keyword(keyword) for keyword in node.keywords],
            body=self.suite(node.body),
        ), node)
        self.bound, self.declared = outer
        self.bound.add(node.name)
        return built

    def decorator(self, node: ast.expr):
        value = self.expression(node)
        return _around(cst.Decorator(decorator=value), value)

    def match(self, node: ast.Match):
        cases = []
        for case in node.cases:
            pattern = self.pattern(case.pattern)
            body = self.suite(case.body)
            guard = self.expression(case.guard) if case.guard is not None else None
            cases.append(_around(cst.MatchCase(pattern=pattern, guard=guard, body=body), pattern, body))
        return _spanned(cst.Match(subject=self.expression(node.subject), cases=cases), node)

    def pattern(self, node: ast.pattern):
        kind = type(node)
        if kind is ast.MatchValue:
            built = cst.MatchValue(value=self.expression(node.value))
        elif kind is ast.MatchSingleton:
            built = cst.MatchSingleton(value=_spanned(cst.Name(value=repr(node.value)), node))
        elif kind is ast.MatchAs:
            name = self.identifier(node.name, node, "") if node.name else None
            built = cst.MatchAs(pattern=self.pattern(node.pattern) if node.pattern else None, name=name)
        elif kind is ast.MatchStar:
            built = cst.MatchStar(name=self.identifier(node.name, node, "*") if node.name else None)
        elif kind is ast.MatchSequence:
            built = cst.MatchList(patterns=[self.sequence_pattern(p) for p in node.patterns])
        elif kind is ast.MatchMapping:
            elements = [
                cst.MatchMappingElement(key=self.expression(key), pattern=self.pattern(pattern))
                for key, pattern in zip(node.keys, node.patterns)
            ]
            for element in elements:
                _around(element, element.key, element.pattern)
            rest = self.identifier(node.rest, node, "**") if node.rest else None
            built = cst.MatchMapping(elements=elements, rest=rest)
        elif kind is ast.MatchClass:
            keywords = []
            for key, pattern in zip(node.kwd_attrs, node.kwd_patterns):
                value = self.pattern(pattern)
                line = self.lines[pattern.lineno - 1]
                found = _find_word(line, key.encode(), 0, pattern.col_offset, last=True)  # `key=` just before
                name = _name_at(key, pattern.lineno, found) if found >= 0 else _around(cst.Name(value=key), value)
                keywords.append(_around(cst.MatchKeywordElement(key=name, pattern=value), name, value))
            built = cst.MatchClass(
                cls=self.expression(node.cls), patterns=[self.sequence_pattern(p) for p in node.patterns],
                kwds=keywords,
            )
        else:  # MatchOr
            built = cst.MatchOr(patterns=[_around(cst.MatchOrElement(pattern=p), p) for p in map(self.pattern, node.patterns)])
        return _spanned(built, node)

    def sequence_pattern(self, node: ast.pattern):
        value = self.pattern(node)
        if type(node) is ast.MatchStar:
            return value  # `*rest` stands in the sequence unwrapped, as in libcst
        return _around(cst.MatchSequenceElement(value=value), value)

    # Small statements.

    def expr_statement(self, node: ast.Expr):
        return cst.Expr(value=self.expression(node.value))

    def assign(self, node: ast.Assign):
        targets = []
        for target in node.targets:
            built = self.expression(target)
            targets.append(_around(cst.AssignTarget(target=built), built))
        return cst.Assign(targets=targets, value=self.expression(node.value))

    def ann_assign(self, node: ast.AnnAssign):
        return cst.AnnAssign(
            target=self.expression(node.target), annotation=self.annotation(node.annotation),
            value=self.expression(node.value) if node.value is not None else None,
        )

    def aug_assign(self, node: ast.AugAssign):
        return cst.AugAssign(
            target=self.expression(node.target), operator=_AUGMENTED[type(node.op)](),
            value=self.expression(node.value),
        )

    def return_(self, node: ast.Return):
        return cst.Return(value=self.expression(node.value) if node.value is not None else None)

    def raise_(self, node: ast.Raise):
        return cst.Raise(
            exc=self.expression(node.exc) if node.exc is not None else None,
            cause=self.from_(node.cause) if node.cause is not None else None,
        )

    def assert_(self, node: ast.Assert):
        return cst.Assert(
            test=self.expression(node.test), msg=self.expression(node.msg) if node.msg is not None else None
        )

    def delete(self, node: ast.Delete):
        targets = [self.expression(target) for target in node.targets]
        if len(targets) == 1:
            return cst.Del(target=targets[0])
        elements = [_around(cst.Element(value=target), target) for target in targets]
        return cst.Del(target=_around(cst.Tuple(elements=elements), targets[0], targets[-1]))

    def keyword_statement(self, node: ast.stmt):
        return {ast.Pass: cst.Pass, ast.Break: cst.Break, ast.Continue: cst.Continue}[type(node)]()

    def global_(self, node):
        kind = cst.Global if type(node) is ast.Global else cst.Nonlocal
        self.declared.update(node.names)
        names = [cst.NameItem(name=self.identifier(name, node, kind.__name__.lower())) for name in node.names]
        for item in names:
            _around(item, item.name)
        return kind(names=names)

    def import_(self, node: ast.Import):
        return cst.Import(names=[self.alias(alias) for alias in node.names])

    def import_from(self, node: ast.ImportFrom):
        if len(node.names) == 1 and node.names[0].name == "*":
            names = cst.ImportStar()
        else:
            names = [self.alias(alias) for alias in node.names]
        module = None
        if node.module:
            line = self.lines[node.lineno - 1]
            found = line.find(node.module.encode(), node.col_offset + len("from"))
            module = self.dotted(node.module, node.lineno, found if found >= 0 else node.col_offset)
        return cst.ImportFrom(module=module, names=names, relative="." * (node.level or 0))

    def alias(self, alias: ast.alias):
        name = self.dotted(alias.name, alias.lineno, alias.col_offset)
        asname = None
        if alias.asname:
            asname = cst.AsName(name=self.identifier(alias.asname, alias, "as"))
            _around(asname, asname.name)
        return _spanned(cst.ImportAlias(name=name, asname=asname), alias)

    def dotted(self, dotted_name: str, line: int, column: int):
        """``a.b.c``, written from (line, column), as libcst spells a module path: Attributes over Names."""
        parts = dotted_name.split(".")
        self.names.update(parts)
        self.names.add(dotted_name)
        built = _name_at(parts[0], line, column)
        end = built._span[3]
        for part in parts[1:]:
            attr = _name_at(part, line, end + 1)
            end = attr._span[3]
            built = cst.Attribute(value=built, attr=attr)
            built._span = (line, column, line, end)
        return built

    def identifier(self, name: str, where: ast.AST, after: str):
        """A Name for an identifier ``ast`` keeps as a string, positioned where it follows
        ``after`` (a keyword or `*`, if any) on ``where``'s first line; else at ``where``."""
        self.names.add(name)
        line = self.lines[where.lineno - 1]
        start = where.col_offset
        if after:
            found = _find_word(line, after.encode(), start) if after.isidentifier() else line.find(after.encode(), start)
            start = found + len(after) if found >= 0 else start
        found = _find_word(line, name.encode(), start)
        if found < 0:
            return _spanned(cst.Name(value=name), where)
        return _name_at(name, where.lineno, found)

    def annotation(self, node: ast.expr | None):
        if node is None:
            return None
        value = self.expression(node)
        return _around(cst.Annotation(annotation=value), value)

    # Parameters and arguments.

    def parameters(self, arguments: ast.arguments, where: ast.AST):
        positional = arguments.posonlyargs + arguments.args
        defaults = [None] * (len(positional) - len(arguments.defaults)) + arguments.defaults
        built = [self.param(arg, default, "") for arg, default in zip(positional, defaults)]
        posonly = built[: len(arguments.posonlyargs)]
        if arguments.vararg is not None:
            star_arg = self.param(arguments.vararg, None, "*")
        elif arguments.kwonlyargs:
            star_arg = cst.ParamStar()
        else:
            star_arg = None
        kwonly = [self.param(arg, default, "") for arg, default in zip(arguments.kwonlyargs, arguments.kw_defaults)]
        star_kwarg = self.param(arguments.kwarg, None, "**") if arguments.kwarg is not None else None
        parameters = cst.Parameters(
            posonly_params=posonly, posonly_ind=cst.ParamSlash() if posonly else None,
            params=built[len(posonly):], star_arg=star_arg, kwonly_params=kwonly, star_kwarg=star_kwarg,
        )
        every = [p for p in (*built, star_arg, *kwonly, star_kwarg) if p is not None and p._span]
        return _around(parameters, every[0], every[-1]) if every else parameters

    def param(self, arg: ast.arg, default: ast.expr | None, star: str):
        self.names.add(arg.arg)
        param = cst.Param(
            name=_name_at(arg.arg, arg.lineno, arg.col_offset), annotation=self.annotation(arg.annotation),
            default=self.expression(default) if default is not None else None, star=star,
        )
        _spanned(param, arg)
        return _around(param, param, param.default) if param.default is not None else param

    def arguments(self, node: ast.Call) -> list:
        """A call's arguments in source order (``ast`` keeps keywords apart)."""
        args = [self.arg(value) for value in node.args]
        if not node.keywords:
            return args
        args.extend(self.keyword(keyword) for keyword in node.keywords)
        if node.args and len(args) > 1:
            args.sort(key=lambda arg: arg._span[:2])
        return args

    def arg(self, value: ast.expr):
        if type(value) is ast.Starred:
            return _spanned(cst.Arg(keyword=None, value=self.expression(value.value), star="*"), value)
        built = self.expression(value)
        return _around(cst.Arg(keyword=None, value=built, star=""), built)

    def keyword(self, keyword: ast.keyword):
        value = self.expression(keyword.value)
        if keyword.arg is None:
            return _spanned(cst.Arg(keyword=None, value=value, star="**"), keyword)
        self.names.add(keyword.arg)
        name = _name_at(keyword.arg, keyword.lineno, keyword.col_offset)
        return _spanned(cst.Arg(keyword=name, value=value, star=""), keyword)

    # Expressions.

    def expression(self, node: ast.expr):
        self.depth += 1
        if self.depth > self.max_depth:
            raise TooDeep(node)
        built = self.expressions[type(node)](node)
        built._span = (node.lineno, node.col_offset, node.end_lineno, node.end_col_offset)  # _spanned, inlined
        self.depth -= 1
        return built

    def name(self, node: ast.Name):
        self.names.add(node.id)
        if type(node.ctx) is ast.Store:  # a target: assigned, iterated, `with ... as`, `:=`
            self.bound.add(node.id)
        return cst.Name(value=node.id)

    def attribute(self, node: ast.Attribute):
        self.names.add(node.attr)
        attr = _name_at(node.attr, node.end_lineno, node.end_col_offset - len(node.attr.encode()))
        return cst.Attribute(value=self.expression(node.value), attr=attr)

    def call(self, node: ast.Call):
        return cst.Call(func=self.expression(node.func), args=self.arguments(node))

    def subscript(self, node: ast.Subscript):
        index = node.slice
        if type(index) is ast.Tuple and index.elts and not self.segment(index).startswith("("):
            parts = index.elts  # `x[:, 0]`: one element per part, as libcst has it
        else:
            parts = [index]
        elements = []
        for part in parts:
            if type(part) is ast.Slice:
                inner = self.expression(part)
            elif type(part) is ast.Starred:
                inner = _spanned(cst.Index(value=self.expression(part.value), star="*"), part)
            else:
                value = self.expression(part)
                inner = _around(cst.Index(value=value, star=None), value)
            elements.append(_around(cst.SubscriptElement(slice=inner), inner))
        return cst.Subscript(value=self.expression(node.value), slice=elements)

    def slice_(self, node: ast.Slice):
        return cst.Slice(**{
            part: self.expression(getattr(node, part)) if getattr(node, part) is not None else None
            for part in ("lower", "upper", "step")
        })

    def binary(self, node: ast.BinOp):
        return cst.BinaryOperation(
            left=self.expression(node.left), operator=_BINARY[type(node.op)](), right=self.expression(node.right)
        )

    def boolean(self, node: ast.BoolOp):
        """`a and b and c` as libcst nests it: ((a and b) and c)."""
        values = [self.expression(value) for value in node.values]
        operator = _BOOLEAN[type(node.op)]
        built = values[0]
        for value in values[1:]:
            built = _around(cst.BooleanOperation(left=built, operator=operator(), right=value), built, value)
        return built

    def unary(self, node: ast.UnaryOp):
        return cst.UnaryOperation(operator=_UNARY[type(node.op)](), expression=self.expression(node.operand))

    def comparison(self, node: ast.Compare):
        targets = []
        for operator, comparator in zip(node.ops, node.comparators):
            value = self.expression(comparator)
            targets.append(_around(cst.ComparisonTarget(operator=_COMPARISON[type(operator)](), comparator=value), value))
        return cst.Comparison(left=self.expression(node.left), comparisons=targets)

    def if_expression(self, node: ast.IfExp):
        return cst.IfExp(
            body=self.expression(node.body), test=self.expression(node.test), orelse=self.expression(node.orelse)
        )

    def lambda_(self, node: ast.Lambda):
        outer = self.enter_scope()
        built = cst.Lambda(params=self.parameters(node.args, node), body=self.expression(node.body))
        self.bound, self.declared = outer
        return built

    def named(self, node: ast.NamedExpr):
        return cst.NamedExpr(target=self.expression(node.target), value=self.expression(node.value))

    def await_(self, node: ast.Await):
        return cst.Await(expression=self.expression(node.value))

    def yield_(self, node: ast.Yield):
        return cst.Yield(value=self.expression(node.value) if node.value is not None else None)

    def yield_from(self, node: ast.YieldFrom):
        return cst.Yield(value=self.from_(node.value))

    def from_(self, node: ast.expr):
        """`from x` of `yield from x` and `raise e from x`."""
        item = self.expression(node)
        return _around(cst.From(item=item), item)

    def elements(self, values: list[ast.expr]) -> list:
        found = []
        for value in values:
            if type(value) is ast.Starred:
                found.append(self.expression(value))
            else:
                built = self.expression(value)
                found.append(_around(cst.Element(value=built), built))
        return found

    def starred(self, node: ast.Starred):
        return cst.StarredElement(value=self.expression(node.value))

    def tuple_(self, node: ast.Tuple):
        return cst.Tuple(elements=self.elements(node.elts))

    def list_(self, node: ast.List):
        return cst.List(elements=self.elements(node.elts))

    def set_(self, node: ast.Set):
        return cst.Set(elements=self.elements(node.elts))

    def dict_(self, node: ast.Dict):
        elements = []
        for key, value in zip(node.keys, node.values):
            built = self.expression(value)
            if key is None:
                elements.append(_around(cst.StarredDictElement(value=built), built))
            else:
                built_key = self.expression(key)
                elements.append(_around(cst.DictElement(key=built_key, value=built), built_key, built))
        return cst.Dict(elements=elements)

    def comprehension(self, generators: list[ast.comprehension]):
        """The ``for ... in ... if ...`` clauses, nested as libcst's CompFor chain."""
        inner = None
        for generator in reversed(generators):
            target = self.expression(generator.target)
            iterable = self.expression(generator.iter)
            ifs = []
            for test in generator.ifs:
                built = self.expression(test)
                ifs.append(_around(cst.CompIf(test=built), built))
            inner = cst.CompFor(
                asynchronous=cst.Asynchronous() if generator.is_async else None,
                target=target, iter=iterable, ifs=ifs, inner_for_in=inner,
            )
            _around(inner, target, inner.inner_for_in or (ifs[-1] if ifs else iterable))
        return inner

    def list_comp(self, node: ast.ListComp):
        return cst.ListComp(elt=self.expression(node.elt), for_in=self.comprehension(node.generators))

    def set_comp(self, node: ast.SetComp):
        return cst.SetComp(elt=self.expression(node.elt), for_in=self.comprehension(node.generators))

    def generator(self, node: ast.GeneratorExp):
        return cst.GeneratorExp(elt=self.expression(node.elt), for_in=self.comprehension(node.generators))

    def dict_comp(self, node: ast.DictComp):
        return cst.DictComp(
            key=self.expression(node.key), value=self.expression(node.value), for_in=self.comprehension(node.generators)
        )

    def constant(self, node: ast.Constant):
        value = node.value
        if value is None or value is True or value is False:
            return cst.Name(value=repr(value))
        if value is ...:
            return cst.Ellipsis()
        kind = type(value)
        if kind is str or kind is bytes:
            return cst.SimpleString(value=self.segment(node), _evaluated=value)
        # repr, not the source text: `int(node.value)` holds for `0x10` and `1_000` too.
        if kind is int:
            return cst.Integer(value=repr(value))
        return (cst.Float if kind is float else cst.Imaginary)(value=repr(value))

    def joined(self, node: ast.JoinedStr):
        return cst.FormattedString(parts=self.formatted_parts(node.values))

    def formatted_parts(self, values: list[ast.expr]) -> list:
        parts = []
        for value in values:
            if type(value) is ast.Constant:
                parts.append(cst.FormattedStringText(value=value.value))
                continue
            spec = self.formatted_parts(value.format_spec.values) if value.format_spec is not None else None
            conversion = chr(value.conversion) if value.conversion != -1 else None
            expression = self.expression(value.value)
            parts.append(_around(
                cst.FormattedStringExpression(expression=expression, format_spec=spec, conversion=conversion), expression
            ))
        return parts


def parse_module(text: str) -> cst.Module:
    """The syntax tree of ``text`` (raises SyntaxError): for code known to parse, and tests."""
    return build_module(ast.parse(text), text.encode("utf-8"))


def _find_word(line: bytes, word: bytes, start: int, end: int | None = None, *, last: bool = False) -> int:
    """Where ``word`` stands in ``line[start:end]`` as a whole identifier (the first, or the
    ``last``); -1 if nowhere."""
    end = len(line) if end is None else end
    index = line.rfind(word, start, end) if last else line.find(word, start, end)
    while index >= 0:
        before = line[index - 1:index] if index else b""
        after = line[index + len(word):index + len(word) + 1]
        if not (before.isalnum() or before == b"_") and not (after.isalnum() or after == b"_"):
            return index
        index = line.rfind(word, start, index) if last else line.find(word, index + 1, end)
    return -1
