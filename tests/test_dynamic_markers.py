"""Findings for the dynamic-checker tests, built without the static rules.

The rules are written concurrently, so the dynamic tests take their findings
from the fixtures themselves: ``# expect: GL00x`` markers in the positives,
and deliberately wrong findings injected into the clean fixtures on the
statements each trap is about (the backwards of a gl001 file, the state
updates of a gl002 file...). The tests below check the injection itself.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from graphlint.finding import Finding

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
HOSTILE = Path(__file__).resolve().parent / "hostile"
EXPECT = re.compile(r"#\s*expect:\s*([A-Z0-9 ,]+)")
LOOPS = (ast.For, ast.While, ast.AsyncFor)
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def expected_findings(path: Path) -> list:
    """One finding per code of every ``# expect:`` marker in ``path``."""
    findings = []
    for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        match = EXPECT.search(text)
        if match:
            for code in filter(None, (c.strip() for c in match.group(1).split(","))):
                findings.append(Finding(code, "from the fixture's expect marker", str(path), number, 1, number, 1))
    return findings


def positive_files() -> list:
    # *.fixed.py files are autofix expectations (fixtures/GL00x/fixed/), not positives.
    return sorted(p for p in FIXTURES.glob("GL00*/*.py") if not p.name.endswith(".fixed.py"))


def clean_files() -> list:
    return sorted(p for p in FIXTURES.glob("clean/gl00*.py") if not p.name.endswith(".fixed.py"))


def _names(node: ast.AST) -> set:
    return {ast.unparse(n) for n in ast.walk(node) if isinstance(n, (ast.Name, ast.Attribute))}


def _calls(stmt: ast.stmt, names: set) -> bool:
    for node in ast.walk(stmt):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in names:
                return True
    return False


def _is_trap(rule: str, stmt: ast.stmt) -> bool:
    if rule == "GL001":
        return _calls(stmt, {"backward", "manual_backward"})
    if rule == "GL003":
        return _calls(stmt, {"backward", "manual_backward", "zero_grad"})
    if rule == "GL002":
        if not isinstance(stmt, ast.Assign) or not isinstance(stmt.value, ast.Call):
            return False
        arguments = set()
        for arg in list(stmt.value.args) + [k.value for k in stmt.value.keywords]:
            arguments |= _names(arg)
        targets = set()
        for target in stmt.targets:
            targets |= _names(target)
        return bool(arguments & targets - {"self"})
    if rule == "GL004":
        text = ast.dump(stmt)
        return isinstance(stmt, (ast.Assign, ast.AugAssign, ast.Expr)) and (
            "param_groups" in text or "'lr'" in text or "attr='update'" in text
        )
    if rule == "GL005":
        return isinstance(stmt, ast.AugAssign) or (
            isinstance(stmt, ast.Expr) and _calls(stmt, {"append", "extend"})
        )
    return False


def injected_findings(path: Path) -> list:
    """Wrong findings of the file's rule on its trap statements inside loops."""
    rule = path.name[:5].upper()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    findings, seen = [], set()

    def visit(node: ast.AST, inside: bool) -> None:
        for child in ast.iter_child_nodes(node):
            nested = inside or isinstance(child, LOOPS)
            compound = LOOPS + FUNCTIONS + (ast.If, ast.With, ast.Try, ast.ClassDef)
            if isinstance(child, ast.stmt) and inside and not isinstance(child, compound):
                if _is_trap(rule, child) and child.lineno not in seen:
                    seen.add(child.lineno)
                    line = child.lineno
                    findings.append(Finding(rule, "injected: wrong on purpose", str(path), line, 1, line, 1))
            visit(child, nested)

    visit(tree, False)
    return findings


def test_expected_findings_follow_the_markers(tmp_path):
    source = "x = 1\ny = 2  # expect: GL001, GL003\n"
    path = tmp_path / "f.py"
    path.write_text(source)
    assert [(f.code, f.line) for f in expected_findings(path)] == [("GL001", 2), ("GL003", 2)]


def test_injection_picks_trap_statements_inside_loops_only(tmp_path):
    source = (
        '"""loss.backward() in a docstring is not a statement"""\n'
        "loss.backward()\n"
        "for step in range(3):\n"
        "    opt.zero_grad()\n"
        "    loss.backward()\n"
        "    total += loss.item()\n"
    )
    path = tmp_path / "gl003_example.py"
    path.write_text(source)
    assert [(f.code, f.line) for f in injected_findings(path)] == [("GL003", 4), ("GL003", 5)]
    gl005 = tmp_path / "gl005_example.py"
    gl005.write_text(source)
    assert [(f.code, f.line) for f in injected_findings(gl005)] == [("GL005", 6)]


def test_injection_finds_carried_state(tmp_path):
    path = tmp_path / "gl002_example.py"
    path.write_text("for x in xs:\n    out, h = rnn(x, h)\n    y = f(x)\n")
    assert [(f.code, f.line) for f in injected_findings(path)] == [("GL002", 2)]
