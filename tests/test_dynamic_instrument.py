"""The instrumented copy behaves like the original (no torch needed).

With a probe that never stops a loop, the rewritten module must compute
exactly what the original computes (loops with else/break/continue,
generators, returns from loops, class bodies, nested functions, future
imports) and keep every line number; the plan must locate findings on the
right statements and loops.
"""

from __future__ import annotations

import textwrap

import pytest

from graphlint.dynamic.child.instrument import PlanError, accumulator_of, build_plan


class QuietProbe:
    """The probe API, recording calls, never stopping anything."""

    UNREADABLE = object()

    def __init__(self, stop_after: int | None = None) -> None:
        self.calls = []
        self.stop_after = stop_after

    def loop_enter(self, lid):
        probe = self

        class Activation:
            iterations = 0

            def tick(self):
                self.iterations += 1
                probe.calls.append(("tick", lid))
                return probe.stop_after is not None and self.iterations > probe.stop_after

            def fail(self):
                probe.calls.append(("fail", lid))

            def close(self):
                probe.calls.append(("close", lid))

        return Activation()

    def scope_enter(self, fid):
        self.calls.append(("scope", fid))

    def mark(self, mid):
        self.calls.append(("mark", mid))

    def before(self, sid):
        self.calls.append(("before", sid))

    def after(self, sid, value=None):
        self.calls.append(("after", sid, value))

    def forward(self, sid, value):
        self.calls.append(("forward", sid))
        return value


PROGRAM = '''
from __future__ import annotations
import sys

log = []

def gen(n):
    for i in range(n):
        if i == 2:
            continue
        yield i * i

def first_even(xs):
    for x in xs:
        if x % 2 == 0:
            return x
    else:
        return None

class Box:
    items = []
    for k in range(3):
        items.append(k)

    def total(self):
        t = 0
        while t < 10:
            t += 3
        else:
            t += 100
        return t

def nested():
    def inner(v):
        out = []
        for j in range(v):
            try:
                if j == 3:
                    break
                out.append(j)
            finally:
                log.append(j)
        return out
    return inner(5)

for w in range(4):
    log.append(w)
    if w == 2:
        break
else:
    log.append("never")

result = (list(gen(5)), first_even([1, 3, 4]), first_even([1]), Box.items, Box().total(), nested(), log)
'''


def _run(source: str, findings=(), probe=None):
    plan = build_plan(textwrap.dedent(source), "/virtual/program.py", list(findings))
    namespace = {"__name__": "__main__", "_gl_probe": probe or QuietProbe()}
    exec(plan.code, namespace)
    return plan, namespace


def test_instrumented_program_computes_what_the_original_computes():
    original = {"__name__": "__main__"}
    exec(compile(PROGRAM, "/virtual/program.py", "exec"), original)
    findings = [{"index": 0, "code": "GL005", "line": 24, "col": 1}, {"index": 1, "code": "GL002", "line": 9, "col": 1}]
    _, instrumented = _run(PROGRAM, findings)
    assert instrumented["result"] == original["result"]


def test_exceptions_keep_the_original_line_numbers():
    source = "x = 1\nfor i in range(3):\n    y = i\n    if i == 1:\n        raise ValueError('boom')\n"
    with pytest.raises(ValueError) as raised:
        _run(source, [{"index": 0, "code": "GL001", "line": 3, "col": 1}])
    tb, lines = raised.value.__traceback__, []
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "/virtual/program.py":
            lines.append(tb.tb_lineno)
        tb = tb.tb_next
    assert lines == [5]


def test_a_loop_can_be_stopped_by_the_probe_and_skips_its_else():
    probe = QuietProbe(stop_after=2)
    source = "seen = []\nfor i in range(10):\n    seen.append(i)\nelse:\n    seen.append('else')\n"
    _, namespace = _run(source, probe=probe)
    assert namespace["seen"] == [0, 1]
    assert ("close", 1) in probe.calls


def test_a_failing_loop_reports_the_failure_and_closes():
    probe = QuietProbe()
    with pytest.raises(ZeroDivisionError):
        _run("for i in range(3):\n    1 / (i - 1)\n", probe=probe)
    assert probe.calls[-2:] == [("fail", 1), ("close", 1)]


def test_plan_locates_findings_statements_loops_and_functions():
    source = '''
    import torch

    def train(model, loader, opt):
        for epoch in range(2):
            for x, y in loader:
                loss = model(x).sum()
                loss.backward()
                total += loss
                opt.step()
    '''
    findings = [
        {"index": 0, "code": "GL001", "line": 8, "col": 1},
        {"index": 1, "code": "GL005", "line": 9, "col": 1},
        {"index": 2, "code": "GL003", "line": 3, "col": 1},
    ]
    plan = build_plan(textwrap.dedent(source), "/virtual/t.py", findings)
    backward, accumulate, blank = plan.targets[0], plan.targets[1], plan.targets[2]
    assert backward.context_loop != backward.outer_loop
    assert plan.loops[backward.context_loop].line == 6 and plan.loops[backward.outer_loop].line == 5
    assert plan.functions[backward.function].qualpath == ["train"]
    assert plan.functions[backward.function].kind == "function"
    assert plan.sites[accumulate.sid].accumulator == "total"
    assert blank.problem == "line 3 holds no statement"
    marked = {plan.marks[m].line for m in plan.loops[backward.outer_loop].marks}
    assert marked == {8, 10}  # the backward and the step must run before "not reproduced"


def test_header_lines_of_compound_statements_are_statements():
    source = "with open('f') as handle:\n    data = handle.read()\n\nfor x in []:\n    pass\n"
    plan = build_plan(source, "/virtual/t.py", [
        {"index": 0, "code": "GL001", "line": 1, "col": 1},
        {"index": 1, "code": "GL001", "line": 3, "col": 1},
    ])
    assert plan.targets[0].problem is None and plan.sites[plan.targets[0].sid].end_line == 1
    assert plan.targets[1].problem == "line 3 holds no statement"


def test_gl002_statement_results_pass_through_the_forward_probe():
    probe = QuietProbe()
    source = "def rnn(x, h):\n    return x + h, x\n\nh = 0\nfor x in range(3):\n    out, h = rnn(x, h)\n"
    _, namespace = _run(source, [{"index": 0, "code": "GL002", "line": 6, "col": 1}], probe)
    assert namespace["out"] == 3 and probe.calls.count(("forward", 1)) == 3
    afters = [call for call in probe.calls if call[0] == "after"]
    assert afters[-1] == ("after", 1, (3, 2))  # the assigned state, for operators without a call


def test_accumulator_expressions():
    import ast

    def acc(text):
        node = accumulator_of(ast.parse(text).body[0])
        return ast.unparse(node) if node is not None else None

    assert acc("total += loss") == "total"
    assert acc("stats['loss'] += loss") == "stats['loss']"
    assert acc("self.history[k].append(loss)") == "self.history[k]"
    assert acc("running = running + loss") == "running"
    assert acc("print(loss)") is None


def test_code_the_child_interpreter_cannot_parse_is_reported():
    with pytest.raises(PlanError, match="cannot parse"):
        build_plan("def broken(:\n", "/virtual/t.py", [])


def test_docstring_and_future_imports_stay_first():
    source = '"""Doc."""\nfrom __future__ import annotations\nfor i in range(2):\n    x: int = i\n'
    plan, namespace = _run(source, [
        {"index": 0, "code": "GL001", "line": 1, "col": 1},
        {"index": 1, "code": "GL001", "line": 2, "col": 1},
        {"index": 2, "code": "GL005", "line": 4, "col": 1},
    ])
    assert "docstring or a __future__ import" in plan.targets[0].problem
    assert "docstring or a __future__ import" in plan.targets[1].problem
    assert namespace["x"] == 1 and namespace["__annotations__"] == {"x": "int"}


def test_deeply_nested_loops_still_compile():
    depth = 12  # with a try around every loop this would pass Python's 20 nested blocks
    lines, indent = ["total = 0"], ""
    for level in range(depth):
        lines.append(f"{indent}for i{level} in range(2):")
        indent += "    "
    lines.append(f"{indent}total += 1")
    _, namespace = _run("\n".join(lines) + "\n", [{"index": 0, "code": "GL005", "line": depth + 1, "col": 1}])
    assert namespace["total"] == 2 ** depth


def test_deep_expressions_are_fine():
    source = "x = " + " + ".join(["1"] * 3000) + "\nfor i in range(2):\n    y = " + "(" * 150 + "i" + ")" * 150 + "\n"
    _, namespace = _run(source, [{"index": 0, "code": "GL002", "line": 3, "col": 1}])
    assert namespace["x"] == 3000 and namespace["y"] == 1
