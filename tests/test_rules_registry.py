"""The static rule table says what the rule modules say, and start-up imports only what a run needs.

graphlint.rules.RULES lets the command line list codes, names and summaries
and resolve --select/--ignore without importing the rule modules (and with
them libcst). The modules stay the source of truth: these tests fail when a
rule is added, renamed or re-summarised there and the table is not updated.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import graphlint.rules
from graphlint.rules import ALL_CODES, ALL_RULES, RULE_INFO, RULES, RULES_BY_CODE, rule_doc, rule_name, rule_summary

RULES_DIR = Path(graphlint.rules.__file__).parent


def test_the_table_lists_every_rule_module_in_order():
    on_disk = sorted(path.stem for path in RULES_DIR.glob("gl[0-9][0-9][0-9]_*.py"))
    assert [rule.module for rule in RULES] == on_disk
    assert list(ALL_CODES) == ["GL000"] + [rule.code for rule in RULES]
    assert [module.__name__ for module in ALL_RULES] == [f"graphlint.rules.{rule.module}" for rule in RULES]


@pytest.mark.parametrize("rule", RULES, ids=lambda rule: rule.code)
def test_the_table_says_what_the_module_says(rule):
    module = rule.load()
    assert (rule.code, rule.name, rule.summary) == (module.CODE, module.NAME, module.SUMMARY)
    assert RULES_BY_CODE[rule.code] is module
    assert rule_name(rule.code) == module.NAME and rule_summary(rule.code) == module.SUMMARY
    assert module.__doc__.strip().startswith(f"{module.CODE} {module.NAME}")


@pytest.mark.parametrize("code", sorted(RULE_INFO))
def test_documentation_read_from_the_source_is_the_module_docstring(code):
    rule = RULE_INFO[code]
    module = rule.load()
    assert graphlint.rules._docstring_from_source(module.__name__).strip() == module.__doc__.strip() == rule_doc(code)
    # The file's docstring, as Python reads it (no import involved).
    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    assert ast.get_docstring(tree, clean=False).strip() == rule_doc(code)


def test_gl000_has_a_name_and_summary_and_unknown_codes_have_none():
    assert rule_name("GL000") == "unanalysable-input" and rule_summary("GL000")
    assert rule_name("GL999") == ""


def _modules_after(args: list[str], cwd: Path) -> set[str]:
    """The modules a fresh interpreter has imported after ``graphlint ARGS`` (output discarded)."""
    script = (
        "import io, json, sys\n"
        "from graphlint.cli import main\n"
        "out = sys.stdout\n"
        "sys.stdout = io.StringIO()\n"
        "try:\n"
        f"    main.main({args!r}, prog_name='graphlint')\n"
        "except SystemExit:\n"
        "    pass\n"
        "out.write(json.dumps(sorted(sys.modules)))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=cwd, capture_output=True, text=True, check=True)
    return set(json.loads(done.stdout))


HEAVY = ("libcst", "graphlint.model", "graphlint.checker", "graphlint.rules.gl001_backward_through_freed_graph")


def _imported(modules: set[str], names) -> list[str]:
    return sorted(name for name in names if name in modules)


def test_checking_a_file_with_nothing_to_analyse_imports_no_analysis(tmp_path: Path):
    (tmp_path / "util.py").write_text("def add(a, b):\n    return a + b\n")
    modules = _modules_after(["check", "--no-cache", "util.py"], tmp_path)
    assert _imported(modules, HEAVY) == []
    # Nor what only other runs need: a walk's ignore files, notebooks, a pool, a config file, reports not asked for.
    others = ("pathspec", "asyncio", "graphlint.notebook", "concurrent.futures", "tomllib", "graphlint.report.json")
    assert _imported(modules, others) == []


def test_a_directory_walk_reads_gitignore_without_importing_asyncio(tmp_path: Path):
    (tmp_path / ".gitignore").write_text("generated/\n")
    (tmp_path / "util.py").write_text("def add(a, b):\n    return a + b\n")
    modules = _modules_after(["check", "--no-cache", "."], tmp_path)
    assert "pathspec" in modules
    assert _imported(modules, HEAVY + ("asyncio",)) == []


def test_pathspecs_deprecations_still_warn():
    from graphlint.files import _deprecated

    @_deprecated("old")
    def old(x):
        return x + 1

    with pytest.warns(DeprecationWarning, match="old"):
        assert old(1) == 2
    assert old.__deprecated__ == "old" and old.__name__ == "old"


@pytest.mark.parametrize("args", [["rules"], ["rule", "GL003"], ["check", "--select", "GL001", "--no-cache", "."]])
def test_listing_and_documenting_rules_imports_no_analysis(tmp_path: Path, args: list[str]):
    assert _imported(_modules_after(args, tmp_path), HEAVY) == []
