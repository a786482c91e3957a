"""Input graphlint cannot analyse: one clear GL000 (or a clean pass), never a traceback, never lost findings."""

from __future__ import annotations

import time

import pytest

from graphlint.checker import check_source
from graphlint.source import MAX_EXPRESSION_DEPTH, MAX_SOURCE_BYTES

# Every bad input spells a backward so that the engine's prefilter keeps it.
SPELL = b"loss.backward()\n"


def only_finding(source: bytes | str) -> tuple[str, int, int, str]:
    findings = check_source(source, "bad.py")
    assert len(findings) == 1, findings
    [finding] = findings
    return finding.code, finding.line, finding.col, finding.message


@pytest.mark.parametrize(
    "source, line, col, message",
    [
        (SPELL + b"if loss\n    pass\n", 2, 8, "syntax error: expected ':'"),
        (SPELL + b"x = (1,\n", 2, 5, "syntax error: '(' was never closed"),
        (SPELL + b"def f():\nreturn 1\n", 3, 1, "indentation error: expected an indented block after function definition on line 2"),
        (SPELL + b"x = 1\n    y = 2\n", 3, 4, "indentation error: unexpected indent"),
        (SPELL + b"if x:\n\tpass\n        pass\n", 4, 1, "indentation error: inconsistent use of tabs and spaces in indentation"),
        (SPELL + b"print 'hello'\n", 2, 1, "syntax error: Missing parentheses in call to 'print'. Did you mean print(...)?"),
        (SPELL + b"x = 'unterminated\n", 2, 5, "syntax error: unterminated string literal (detected at line 2)"),
        # A name libcst's parser builds and then rejects (found by the fuzz test).
        (SPELL + "x = \U00013460\n".encode(), 2, 5, "syntax error: invalid non-printable character U+13460"),
    ],
)
def test_a_syntax_error_is_one_gl000_with_cpythons_message_and_position(source, line, col, message):
    assert only_finding(source) == ("GL000", line, col, message)


def test_bytes_that_are_not_utf8_are_located():
    code, line, col, message = only_finding(SPELL + b"name = 'caf\xe9'\n")
    assert (code, line, col) == ("GL000", 2, 12)
    assert "not valid utf-8" in message and "0xe9" in message


def test_a_declared_encoding_is_honoured():
    assert check_source(b"# -*- coding: latin-1 -*-\n" + SPELL + b"name = 'caf\xe9'\n", "ok.py") == []
    assert check_source(b"\xef\xbb\xbf" + SPELL, "bom.py") == []


def test_an_unknown_declared_encoding_is_reported():
    code, _, _, message = only_finding(b"# coding: klingon\n" + SPELL)
    assert code == "GL000" and "klingon" in message


def test_a_nul_byte_is_located():
    assert only_finding(SPELL + b"x = 1\x00\n") == ("GL000", 2, 6, "file contains a NUL byte; it is not Python source")
    assert only_finding((SPELL + b"\x00").decode())[:3] == ("GL000", 2, 1)


def test_an_empty_file_passes():
    assert check_source(b"", "empty.py") == []
    assert check_source(b"\n\n   \n", "blank.py") == []


def test_a_5_mb_file_is_reported_quickly():
    big = SPELL * (5_000_000 // len(SPELL))
    start = time.monotonic()
    code, line, col, message = only_finding(big)
    assert time.monotonic() - start < 2
    assert (code, line, col) == ("GL000", 1, 1)
    assert "too large" in message and "5.0 MB" in message
    assert len(big) > MAX_SOURCE_BYTES


NESTED = {
    "parentheses": "x = " + "(" * 1000 + "loss" + ")" * 1000,
    "calls": "x = " + "f(" * 1000 + "loss" + ")" * 1000,
    "lists": "x = " + "[" * 1000 + "loss" + "]" * 1000,
    "binary operators": "x = " + " + ".join(["loss"] * 1000),
    "attribute chain": "x = loss" + ".a" * 1000,
    "conditional expressions": "x = " + "a if b else " * 1000 + "loss",
    "lambdas": "x = " + "lambda: " * 1000 + "loss",
    "not": "x = " + "not " * 1000 + "loss",
    "unary minus": "x = " + "-" * 1000 + "loss",
    "100,000 binary operators": "x = " + "+".join(["a"] * 100_000),
    "parenthesised chain over lines": "x = (\n" + "\n+ ".join(["loss"] * 3000) + "\n)",
}


@pytest.mark.parametrize("shape", list(NESTED))
def test_deeply_nested_expressions_are_reported_or_pass_quickly(shape):
    source = SPELL.decode() + NESTED[shape] + "\n"
    start = time.monotonic()
    findings = check_source(source, "deep.py")
    elapsed = time.monotonic() - start
    assert elapsed < 5, f"{shape}: {elapsed:.1f} s"
    assert all(finding.code == "GL000" for finding in findings)
    assert len(findings) <= 1
    if findings:
        assert "nested" in findings[0].message or "syntax error" in findings[0].message


def test_the_depth_limit_is_documented_in_the_message():
    [finding] = check_source(SPELL.decode() + NESTED["binary operators"] + "\n", "deep.py")
    assert str(MAX_EXPRESSION_DEPTH) in finding.message


def test_deep_statement_nesting_is_a_syntax_error_not_a_crash():
    source = "".join(" " * depth + "if x:\n" for depth in range(120)) + " " * 120 + "loss.backward()\n"
    [finding] = check_source(source, "deep.py")
    assert finding.code == "GL000" and "indentation" in finding.message


def test_a_bad_file_does_not_hide_the_findings_of_the_others(run_cli, tmp_path):
    bad = {
        "a_syntax.py": SPELL + b"if loss\n",
        "b_latin1.py": SPELL + b"s = '\xe9'\n",
        "c_nul.py": SPELL + b"\x00",
        "d_empty.py": b"",
        "e_big.py": SPELL * (5_000_000 // len(SPELL)),
        "f_deep.py": SPELL + ("x = " + "(" * 1000 + "1" + ")" * 1000 + "\n").encode(),
        "g_chain.py": SPELL + ("x = " + "+".join(["a"] * 20_000) + "\n").encode(),
    }
    for name, data in bad.items():
        (tmp_path / name).write_bytes(data)
    (tmp_path / "z_last.py").write_bytes(SPELL + b"for\n")
    result = run_cli("check", "--jobs", "1", ".")
    assert result.exit_code == 1
    reported = [line.split(":")[0] for line in result.stdout.splitlines()[:-1]]
    assert reported == ["a_syntax.py", "b_latin1.py", "c_nul.py", "e_big.py", "f_deep.py", "g_chain.py", "z_last.py"]
    assert all(": GL000 " in line for line in result.stdout.splitlines()[:-1])
    assert result.stdout.endswith("Found 7 errors.\n")


def test_a_bug_in_the_analysis_costs_one_file_not_the_run(monkeypatch):
    import types

    import graphlint.checker

    def check(model):
        raise KeyError("the analysis tripped")
        yield

    broken_rule = types.SimpleNamespace(CODE="GL001", NAME="x", SUMMARY="x", check=check)
    monkeypatch.setattr(graphlint.checker, "ALL_RULES", (broken_rule,))
    monkeypatch.delenv("GRAPHLINT_DEBUG", raising=False)
    [finding] = check_source(SPELL, "t.py")
    assert finding.code == "GL000"
    assert finding.message == "internal error while analysing this file: KeyError: 'the analysis tripped'"
    monkeypatch.setenv("GRAPHLINT_DEBUG", "1")
    with pytest.raises(KeyError):
        check_source(SPELL, "t.py")


def test_a_broken_file_without_training_code_is_reported_like_any_other(run_cli, tmp_path):
    # Issue #2: the prefilter drops files that spell no backward, zero_grad, ...
    # from the analysis, but every file that does not parse is still one GL000.
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "bad.py").write_bytes(b"def f(:\n")
    (tmp_path / "pkg" / "latin1.py").write_bytes(b"s = '\xe9'\n")
    (tmp_path / "pkg" / "util.py").write_bytes(b"def add(a, b):\n    return a + b\n")
    (tmp_path / "pkg" / "train.py").write_bytes(
        b"import torch\nmodel = torch.nn.Linear(2, 1)\nloss = model(torch.randn(4, 2)).sum()\n"
        b"loss.backward()\nloss.backward()\n"
    )
    walked = run_cli("check", "--jobs", "1", "pkg")
    assert walked.exit_code == 1
    assert walked.stdout.splitlines() == [
        "pkg/bad.py:1:7: GL000 syntax error: invalid syntax",
        "pkg/latin1.py:1:6: GL000 file is not valid utf-8 (byte 0xe9); save it as UTF-8 or declare its encoding",
        walked.stdout.splitlines()[2],
        "Found 3 errors.",
    ]
    assert walked.stdout.splitlines()[2].startswith("pkg/train.py:5:1: GL001 ")
    # A file named on the command line behaves as the same file found by a walk.
    for name in ("bad.py", "latin1.py", "util.py"):
        explicit = run_cli("check", "--jobs", "1", f"pkg/{name}")
        expected = [line for line in walked.stdout.splitlines() if line.startswith(f"pkg/{name}:")]
        assert explicit.stdout.splitlines()[:-1] == expected
        assert explicit.exit_code == (1 if expected else 0)
    # --ignore GL000 hides them, as for any unanalysable file.
    assert run_cli("check", "--jobs", "1", "--ignore", "GL000", "pkg/bad.py").stdout == "All checks passed!\n"


def test_a_broken_file_without_training_code_is_reported_from_the_cache_too(monkeypatch, tmp_path):
    from click.testing import CliRunner

    from graphlint.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GRAPHLINT_NO_CACHE", raising=False)
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "bad.py").write_bytes(b"def f(:\n")
    outputs = [CliRunner().invoke(main, ["check", "."]) for _ in range(2)]
    assert (tmp_path / ".graphlint_cache").is_dir()
    assert [result.exit_code for result in outputs] == [1, 1]
    assert outputs[0].stdout == outputs[1].stdout == "bad.py:1:7: GL000 syntax error: invalid syntax\nFound 1 error.\n"
