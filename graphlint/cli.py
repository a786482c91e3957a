"""The command line: a thin click layer over discovery, the engine and the reports.

Exit codes (Ruff's): 0 no findings, 1 findings (GL000 included), 2 a usage,
configuration or internal error. Heavy modules (the model and the rules,
libcst for fixes, the dynamic checker) are imported only by the commands
that need them, so ``graphlint --version``, ``graphlint rules`` and a check
with nothing to analyse start fast; so are the lighter ones only some runs
need (pathspec for a directory walk, tomllib for a configuration file, the
notebook reader, the process pool, the report formats not asked for).
tests/test_rules_registry.py checks what a check imports.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import IO, Any

import click

from graphlint import __version__
from graphlint.report import FORMATS, ReportOptions

# Set to see the traceback of an internal error instead of the one-line message.
DEBUG_ENVIRONMENT_VARIABLE = "GRAPHLINT_DEBUG"

DEFAULT_CONFIRM_TIMEOUT = 30.0



class GraphlintError(click.ClickException):
    """A usage or configuration problem: one line on stderr, exit status 2."""

    exit_code = 2

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"graphlint: error: {self.format_message()}", err=True, file=file)


class _Graphlint(click.Group):
    """The command group; turns an unexpected exception into one line and exit status 2."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except BrokenPipeError:
            # The reader went away (`graphlint check | head`): not an error worth a message.
            _silence_stdout()
            ctx.exit(1)
        except Exception as error:
            if os.environ.get(DEBUG_ENVIRONMENT_VARIABLE):
                raise
            detail = str(error).splitlines()[0] if str(error) else ""
            click.echo(
                f"graphlint: internal error: {type(error).__name__}{': ' + detail if detail else ''}"
                f" (set {DEBUG_ENVIRONMENT_VARIABLE}=1 for the traceback)",
                err=True,
            )
            ctx.exit(2)


def _silence_stdout() -> None:
    # Python flushes stdout at exit; pointing it at /dev/null keeps that quiet too.
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


@click.group(cls=_Graphlint, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="graphlint", message="%(prog)s %(version)s")
def main() -> None:
    """graphlint: find autograd misuse in PyTorch training code."""


def _selectors(option: str, value: str | None) -> tuple[str, ...] | None:
    """A comma list of codes or prefixes; each must name at least one code."""
    from graphlint.config import ConfigError, parse_selectors

    if value is None:
        return None
    try:
        return parse_selectors([item for item in value.split(",") if item.strip()], option)
    except ConfigError as error:
        raise GraphlintError(str(error)) from None


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=str))
@click.option(
    "--output-format",
    type=click.Choice(list(FORMATS)),
    default="text",
    show_default=True,
    help="How findings are printed.",
)
@click.option("--select", metavar="CODES", help="Comma list of codes or prefixes to enable (e.g. GL001,GL002).")
@click.option("--ignore", metavar="CODES", help="Comma list of codes or prefixes to disable.")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when findings exist.")
@click.option("-q", "--quiet", is_flag=True, help="Print the findings only, no summary.")
@click.option("--statistics", is_flag=True, help="Print how many findings each code has instead of the findings.")
@click.option(
    "--jobs",
    type=click.IntRange(min=0),
    default=None,
    metavar="N",
    help="Worker processes (default: one per CPU; 1 checks in this process).",
)
@click.option("--no-cache", is_flag=True, help="Neither read nor write .graphlint_cache/.")
@click.option(
    "--confirm",
    "confirm_",
    is_flag=True,
    help="Run each flagged loop under torch and report whether the misuse happens. "
    "This EXECUTES the code being checked.",
)
@click.option(
    "--confirm-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help=f"Wall-clock limit in seconds for confirming one file  [default: {DEFAULT_CONFIRM_TIMEOUT:g}].",
)
@click.option(
    "--python",
    "python",
    default=None,
    metavar="PATH",
    help="Interpreter that runs the code under --confirm (needs torch). Default: this one.",
)
@click.option("--verbose", is_flag=True, help="With --confirm, show what the checked code printed.")
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Read settings from this file instead of the nearest pyproject.toml with [tool.graphlint].",
)
@click.option("--isolated", is_flag=True, help="Ignore all configuration files.")
@click.option(
    "--force-exclude",
    is_flag=True,
    help="Apply exclude patterns to files named on the command line too (for pre-commit).",
)
@click.option(
    "--fix",
    "fix",
    is_flag=True,
    help="Apply the safe fixes in place, then report what remains (exit 0 only when nothing remains).",
)
@click.option(
    "--unsafe-fixes",
    is_flag=True,
    help="With --fix or --diff, also apply fixes that change behaviour beyond the bug (review them).",
)
@click.option(
    "--diff",
    is_flag=True,
    help="Print a unified diff of what --fix would change and change nothing (exit 1 when there is something to fix).",
)
@click.option(
    "--stdin-filename",
    metavar="PATH",
    default=None,
    help="Read the source from stdin (path `-`) and report it under this name (what editors send).",
)
def check(
    paths: tuple[str, ...],
    output_format: str,
    select: str | None,
    ignore: str | None,
    exit_zero: bool,
    quiet: bool,
    statistics: bool,
    jobs: int | None,
    no_cache: bool,
    confirm_: bool,
    confirm_timeout: float | None,
    python: str | None,
    verbose: bool,
    config_file: Path | None,
    isolated: bool,
    force_exclude: bool,
    stdin_filename: str | None,
    fix: bool = False,
    unsafe_fixes: bool = False,
    diff: bool = False,
) -> None:
    """Check PATHS (files or directories; default: the current directory).

    Settings come from the nearest pyproject.toml with a [tool.graphlint]
    table above each path (or --config); options given here override them.
    """
    import shutil

    from graphlint.engine import Settings

    from_stdin = paths == ("-",) or (not paths and stdin_filename is not None)
    if "-" in paths and not from_stdin:
        raise GraphlintError("'-' (read stdin) cannot be combined with other paths")
    if from_stdin:
        stdin_name = stdin_filename or "-"
        groups: list[tuple[Any, list[Path]]] = []
        primary = _config_for(Path(stdin_filename) if stdin_filename else Path.cwd(), config_file, isolated)
    else:
        groups = _plan(list(paths) or ["."], config_file, isolated, force_exclude)
        primary = groups[0][0] if groups else None
    python = python or (primary.confirm_python if primary else None)
    if python is not None and shutil.which(python) is None:
        raise GraphlintError(f"--python: no such interpreter: {python}")

    cli_select = _selectors("--select", select)
    cli_ignore = _selectors("--ignore", ignore)

    def codes_for(config) -> frozenset[str]:
        return _codes(
            cli_select if cli_select is not None else config.select,
            cli_ignore if cli_ignore is not None else config.ignore,
        )

    findings: list = []
    sources: dict[str, str] = {}
    config_of: dict[str, Any] = {}
    if from_stdin:
        findings, sources = _check_stdin(stdin_name, codes_for(primary))
        findings = _without_per_file_ignores(findings, primary)
    for config, files in groups:
        settings = Settings(codes=codes_for(config), jobs=jobs)
        if no_cache:
            settings = _replace(settings, cache=False)
        config_of.update((str(file), config) for file in files)
        findings.extend(_without_per_file_ignores(_check_files(files, settings), config))
    if len(groups) > 1:  # the engine orders each group's findings; merged groups need it again
        findings.sort(key=lambda finding: finding.sort_key())

    fixed: int | None = None
    hidden_unsafe = 0
    if fix or diff:
        if from_stdin:
            findings, fixed, hidden_unsafe, status = _fix_stdin(
                sources, stdin_name, codes_for(primary), primary, findings, unsafe_fixes, diff
            )
            if diff:
                sys.exit(status)
        else:

            def file_codes(path: str) -> frozenset[str]:
                config = config_of.get(path, primary)
                return _without_ignored(codes_for(config), config.ignored_codes(path))

            run = _fix_files(findings, file_codes, unsafe_fixes, write=not diff)
            if diff:
                from graphlint.fix.cli_support import write_diffs

                write_diffs(run, sys.stdout)
                sys.stdout.flush()
                plural = "" if run.fixed == 1 else "s"
                click.echo(f"Would fix {run.fixed} error{plural}." if run.fixed else "No fixes available.", err=True)
                sys.exit(1 if run.diffs else 0)
            findings, fixed, hidden_unsafe = run.findings, run.fixed, run.hidden_unsafe
    elif output_format in ("json", "sarif"):
        from graphlint.fix.cli_support import with_fixes

        findings = with_fixes(findings, sources)

    if confirm_:
        from graphlint.dynamic.cli_support import run_confirm

        timeout = confirm_timeout or (primary.confirm_timeout if primary else None) or DEFAULT_CONFIRM_TIMEOUT
        watching = output_format == "text" and sys.stdout.isatty() and sys.stderr.isatty()
        findings = run_confirm(
            findings, sources or None, timeout=timeout, python=python, verbose=verbose, progress=watching
        )

    options = ReportOptions(
        show_source=_is_terminal(sys.stdout),
        quiet=quiet,
        statistics=statistics,
        sources=sources,
        fixed=fixed,
        hidden_unsafe_fixes=hidden_unsafe,
    )
    # With --fix on stdin, stdout carries the fixed source (what editors read back).
    _write_report(output_format, findings, options, sys.stderr if (fix and from_stdin) else sys.stdout)
    sys.exit(exit_status(findings, exit_zero))


def _without_ignored(codes: frozenset[str], ignored: frozenset[str]) -> frozenset[str]:
    return frozenset(code for code in codes if not any(code.startswith(prefix) for prefix in ignored))


def _fix_files(findings: list, codes_for, unsafe: bool, write: bool):
    from graphlint.fix.cli_support import fix_files

    run = fix_files(findings, codes_for, unsafe, write)
    for error in run.errors:
        click.echo(f"graphlint: error: {error}", err=True)
    return run


def _fix_stdin(sources, name, codes, config, findings, unsafe, diff):
    """Fix the source read from stdin: the fixed text (or its diff) goes to stdout."""
    from graphlint.fix.cli_support import fix_stdin, stdin_diff

    text = sources.get(name)
    if text is None:  # not text at all: nothing to fix, the GL000 finding says why
        return findings, 0, 0, 0
    if config is not None:
        codes = _without_ignored(codes, config.ignored_codes(name))
    fixed_text, run = fix_stdin(text, name, codes, unsafe, findings)
    if diff:
        patch = stdin_diff(name, text, fixed_text)
        sys.stdout.write(patch)
        sys.stdout.flush()
        return run.findings, run.fixed, 0, 1 if patch else 0
    sys.stdout.write(fixed_text)
    sys.stdout.flush()
    return run.findings, run.fixed, run.hidden_unsafe, 0


def _config_for(path: Path, config_file: Path | None, isolated: bool):
    from graphlint.config import ConfigError, config_for

    try:
        return config_for(path, config_file, isolated)
    except ConfigError as error:
        raise GraphlintError(str(error)) from None


def _check_stdin(name: str, codes: frozenset[str]) -> tuple[list, dict[str, str]]:
    """Findings of the source on stdin, and its text for the report (code frames, fingerprints)."""
    from graphlint.checker import check_source
    from graphlint.source import read_text

    data = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read().encode()
    text = read_text(data, name)
    return check_source(data, name, codes), ({name: text} if isinstance(text, str) else {})


def _plan(
    paths: list[str], config_file: Path | None, isolated: bool, force_exclude: bool = False
) -> list[tuple[Any, list[Path]]]:
    """The files to check, grouped by the configuration that applies to them.

    A file reached from two paths is checked once, under the first path's settings.
    """
    from graphlint.config import ConfigError, ConfigFinder
    from graphlint.files import MissingPathError, discover

    for path in paths:
        if not Path(path).exists():
            raise GraphlintError(str(MissingPathError(path)))
    owner: dict[Path, Any] = {}
    # One lookup per directory and one parse per configuration file, however
    # many files of one project the command line names (pre-commit).
    configs = ConfigFinder(config_file, isolated)
    try:
        for path in paths:
            config = configs.config_for(Path(path))
            discovery = discover([path], config.all_excludes(), root=config.root, force_exclude=force_exclude)
            for warning in discovery.warnings:
                click.echo(f"graphlint: warning: {warning}", err=True)
            for file in discovery.files:
                owner.setdefault(file, config)
    except ConfigError as error:
        raise GraphlintError(str(error)) from None
    if not owner:
        click.echo("graphlint: warning: no Python files found under the given paths", err=True)
    groups: dict[Any, list[Path]] = {}
    for file in sorted(owner, key=str):
        groups.setdefault(owner[file], []).append(file)
    return list(groups.items())


def _codes(select, ignore) -> frozenset[str]:
    from graphlint.rules import select_codes

    return select_codes(list(select) if select is not None else None, list(ignore) if ignore is not None else None)


def _replace(settings, **changes):
    import dataclasses

    return dataclasses.replace(settings, **changes)


def _check_files(files: list[Path], settings) -> list:
    # Looked up at call time so the engine can be swapped (tests, benchmarks).
    from graphlint import engine

    # graphlint.notebook.is_notebook, without importing the notebook reader into runs that have none.
    notebooks = [file for file in files if str(file).endswith(".ipynb")]
    findings = engine.check_files([file for file in files if not str(file).endswith(".ipynb")], settings)
    if notebooks:
        # Checked here rather than by the engine, whose byte and compiled-code
        # prefilters read .py text (a notebook's JSON compiles as a dict literal).
        findings = sorted(findings + _check_notebooks(notebooks, settings.codes), key=lambda f: f.sort_key())
    return findings


def _check_notebooks(notebooks: list[Path], codes: frozenset[str]) -> list:
    from graphlint.checker import check_source
    from graphlint.source import unanalysable

    findings = []
    for notebook in notebooks:
        try:
            data = notebook.read_bytes()
        except OSError as error:
            findings.append(unanalysable(str(notebook), f"cannot read file: {error.strerror or error}"))
            continue
        findings.extend(check_source(data, str(notebook), codes))
    return findings


def _without_per_file_ignores(findings: list, config) -> list:
    kept = []
    ignored_by_path: dict[str, frozenset[str]] = {}
    for finding in findings:
        if finding.path not in ignored_by_path:
            ignored_by_path[finding.path] = config.ignored_codes(finding.path)
        if not any(finding.code.startswith(prefix) for prefix in ignored_by_path[finding.path]):
            kept.append(finding)
    return kept


def exit_status(findings: list, exit_zero: bool = False) -> int:
    """0 when nothing counts against the run, else 1; a not-reproduced finding does not count."""
    if exit_zero:
        return 0
    failing = [f for f in findings if f.confirmation is None or f.confirmation.status != "not reproduced"]
    return 1 if failing else 0


def _is_terminal(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _write_report(output_format: str, findings: list, options: ReportOptions, stream: IO[str] | None = None) -> None:
    from graphlint import report

    # --statistics has a text and a JSON shape (Ruff's); other formats show it as text.
    if options.statistics and output_format not in ("text", "json"):
        output_format = "text"
    stream = stream or sys.stdout
    report.write(output_format, findings, stream, options)
    stream.flush()


@main.command(name="rules")
def list_rules() -> None:
    """List every rule: code, name and what it finds."""
    from graphlint.rules import GL000_NAME, GL000_SUMMARY, RULES

    rows = [("GL000", GL000_NAME, GL000_SUMMARY)] + [(rule.code, rule.name, rule.summary) for rule in RULES]
    name_width = max(len(name) for _, name, _ in rows)
    for code, name, summary in rows:
        click.echo(f"{code}  {name:<{name_width}}  {summary}")


@main.command()
@click.argument("code")
def rule(code: str) -> None:
    """Show the documentation of the rule CODE, such as GL001."""
    from graphlint.rules import RULE_INFO, rule_doc

    wanted = code.strip().upper()
    if wanted == "GL000":
        from graphlint.report import GL000_DOC

        click.echo(GL000_DOC.rstrip())
        return
    if wanted not in RULE_INFO:
        raise GraphlintError(f"unknown rule code {code!r} (see `graphlint rules`)")
    click.echo(rule_doc(wanted))
