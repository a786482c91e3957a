"""The command line: a thin click layer over the engine and the reports."""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from pathlib import Path

import click

from graphlint import __version__
from graphlint.finding import Finding

_SKIP_DIRS = {".git", "__pycache__", "build", "dist", "site-packages", "node_modules", ".venv", "venv", ".tox", ".graphlint_cache"}


def _discover(paths: tuple[str, ...]) -> list[Path]:
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_file():
            found.append(path)
            continue
        for root, dirs, files in os.walk(path):
            dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not (Path(root) / d / "pyvenv.cfg").exists())
            found.extend(Path(root) / f for f in sorted(files) if f.endswith(".py"))
    return sorted(set(found))


def _codes(value: str | None) -> list[str] | None:
    return [c.strip().upper() for c in value.split(",") if c.strip()] if value else None


def _json(findings: list[Finding]) -> str:
    return json.dumps(
        [
            {
                "code": f.code,
                "message": f.message,
                "filename": f.path,
                "location": {"row": f.line, "column": f.col},
                "end_location": {"row": f.end_line, "column": f.end_col},
                "fix": None,
                "url": None,
                "noqa_row": f.line,
            }
            for f in findings
        ],
        indent=2,
    )


@click.group()
@click.version_option(__version__, prog_name="graphlint")
def main() -> None:
    """graphlint: find autograd misuse in PyTorch training code."""


@main.command()
@click.argument("paths", nargs=-1)
@click.option("--output-format", type=click.Choice(["text", "json"]), default="text")
@click.option("--select", default=None, help="Comma list of codes or prefixes to enable.")
@click.option("--ignore", default=None, help="Comma list of codes or prefixes to disable.")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when findings exist.")
@click.option("--quiet", is_flag=True, help="Print findings only.")
@click.option("--statistics", is_flag=True, help="Print counts per code.")
def check(paths, output_format, select, ignore, exit_zero, quiet, statistics) -> None:
    """Check PATHS (files or directories; default: the current directory)."""
    from graphlint.engine import Settings, check_files
    from graphlint.rules import select_codes

    paths = paths or (".",)
    missing = [p for p in paths if not Path(p).exists()]
    if missing:
        click.echo(f"graphlint: error: path does not exist: {missing[0]}", err=True)
        sys.exit(2)
    findings = check_files(_discover(paths), Settings(codes=select_codes(_codes(select), _codes(ignore))))
    if output_format == "json":
        click.echo(_json(findings))
    elif statistics:
        for code, count in Counter(f.code for f in findings).most_common():
            click.echo(f"{count:5d}\t{code}")
    else:
        for f in findings:
            click.echo(f"{f.path}:{f.line}:{f.col}: {f.code} {f.message}")
        if not quiet:
            click.echo(f"Found {len(findings)} error{'s' if len(findings) != 1 else ''}." if findings else "All checks passed!")
    sys.exit(0 if exit_zero or not findings else 1)


@main.command(name="rules")
def list_rules() -> None:
    """List every rule."""
    from graphlint.rules import ALL_RULES

    for rule in ALL_RULES:
        click.echo(f"{rule.CODE}  {rule.NAME:32s} {rule.SUMMARY}")


@main.command()
@click.argument("code")
def rule(code: str) -> None:
    """Show the documentation of one rule."""
    from graphlint.rules import RULES_BY_CODE, rule_doc

    if code.upper() not in RULES_BY_CODE:
        click.echo(f"graphlint: error: unknown rule {code}", err=True)
        sys.exit(2)
    click.echo(rule_doc(code.upper()))
