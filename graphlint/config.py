"""``[tool.graphlint]`` in pyproject.toml: the project's settings, read with tomllib.

    [tool.graphlint]
    select = ["GL001", "GL002"]       # codes or prefixes, like --select
    ignore = ["GL005"]                # like --ignore
    exclude = ["legacy/"]             # replaces the default exclusions (Ruff's meaning)
    extend-exclude = ["generated/"]   # adds to them
    per-file-ignores = { "tests/*" = ["GL003"] }

    [tool.graphlint.confirm]          # settings of --confirm (it is never switched on here)
    timeout = 60
    python = ".venv/bin/python"

The file is found by walking up from each checked path to the nearest
pyproject.toml with a ``[tool.graphlint]`` table (``--config`` names one
instead; a file not called pyproject.toml holds the keys at its top level).
Patterns are gitignore-style and relative to the file's directory. A key the
file may not have, or a value of the wrong type, is an error naming both.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graphlint.files import DEFAULT_EXCLUDE


class ConfigError(Exception):
    """The configuration cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class Config:
    path: Path | None = None  # the file the settings came from (None: defaults)
    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] | None = None
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    extend_exclude: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    confirm_timeout: float | None = None
    confirm_python: str | None = None
    # Where relative patterns are anchored: the config file's directory.
    root: Path = field(default_factory=Path.cwd)

    def all_excludes(self) -> list[str]:
        return [*self.exclude, *self.extend_exclude]

    def ignored_codes(self, path: str) -> frozenset[str]:
        """Code prefixes that ``per-file-ignores`` turns off for ``path``."""
        if not self.per_file_ignores:
            return frozenset()
        from graphlint.files import gitignore_spec

        absolute = Path(path).absolute()
        try:
            relative = absolute.relative_to(self.root.absolute()).as_posix()
        except ValueError:
            relative = absolute.name
        ignored: set[str] = set()
        for pattern, codes in self.per_file_ignores:
            if gitignore_spec([pattern]).match_file(relative):
                ignored.update(codes)
        return frozenset(ignored)


def find_config(start: Path) -> Path | None:
    """The nearest pyproject.toml with a [tool.graphlint] table at or above ``start``."""
    return ConfigFinder().find(start)


def load_config(path: Path) -> Config:
    """Read and validate the settings in ``path``."""
    return ConfigFinder().load(path)


def config_for(path: Path, explicit: Path | None = None, isolated: bool = False) -> Config:
    """The settings that apply to a checked path."""
    return ConfigFinder(explicit, isolated).config_for(path)


class ConfigFinder:
    """The settings of many checked paths, for the duration of one run.

    Each directory is looked up once (the nearest configuration of a directory
    is its own pyproject.toml with a [tool.graphlint] table, else its parent's),
    and each configuration file is read and parsed once: a pre-commit hook
    passes hundreds of files of one project on the command line. The answers
    are those of ``config_for`` for each path; files edited during the run are
    not read again.
    """

    def __init__(self, explicit: Path | None = None, isolated: bool = False) -> None:
        self.explicit = explicit
        self.isolated = isolated
        self._nearest: dict[Path, Path | None] = {}  # directory -> its configuration file
        self._documents: dict[Path, dict[str, Any]] = {}  # parsed TOML of each file read
        self._configs: dict[Path, Config] = {}
        self._default: Config | None = None

    def config_for(self, path: Path) -> Config:
        if self.isolated:
            return self._defaults()
        found = self.explicit if self.explicit is not None else self.find(path)
        return self.load(found) if found is not None else self._defaults()

    def find(self, start: Path) -> Path | None:
        """The nearest pyproject.toml with a [tool.graphlint] table at or above ``start``."""
        start = start.absolute()
        candidate = start if start.is_dir() else start.parent
        # Up the lexical parents, nearest first, until a directory already
        # looked up; every directory passed on the way gets the answer.
        passed: list[Path] = []
        found: Path | None = None
        while True:
            if candidate in self._nearest:
                found = self._nearest[candidate]
                break
            passed.append(candidate)
            pyproject = candidate / "pyproject.toml"
            if pyproject.is_file() and self._has_graphlint_table(pyproject):
                found = pyproject
                break
            parent = candidate.parent
            if parent == candidate:
                break
            candidate = parent
        for directory in passed:
            self._nearest[directory] = found
        return found

    def load(self, path: Path) -> Config:
        """Read and validate the settings in ``path``."""
        path = path.absolute()
        config = self._configs.get(path)
        if config is None:
            if not path.is_file():
                raise ConfigError(f"config file does not exist: {path}")
            config = self._configs[path] = _config_of(self._document(path), path)
        return config

    def _defaults(self) -> Config:
        if self._default is None:
            self._default = Config()
        return self._default

    def _has_graphlint_table(self, pyproject: Path) -> bool:
        # A cheap text test first: most pyproject.toml files never mention graphlint.
        try:
            text = pyproject.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return False
        if "graphlint" not in text:
            return False
        return "graphlint" in self._document(pyproject).get("tool", {})

    def _document(self, path: Path) -> dict[str, Any]:
        path = path.absolute()
        document = self._documents.get(path)
        if document is None:
            document = self._documents[path] = _read_toml(path)
        return document


def _config_of(document: dict[str, Any], path: Path) -> Config:
    if path.name == "pyproject.toml":
        table = document.get("tool", {}).get("graphlint", {})
        where = f"[tool.graphlint] of {path}"
    else:
        table = document
        where = str(path)
    if not isinstance(table, dict):
        raise ConfigError(f"{where} must be a table")
    return _parse_table(table, where, path)


def _read_toml(path: Path) -> dict[str, Any]:
    # Imported here: most runs find no configuration file to read.
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on Python 3.10 only
        import tomli as tomllib

    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"cannot parse {path}: {error}") from None
    except OSError as error:
        raise ConfigError(f"cannot read {path}: {error.strerror or error}") from None


_KEYS = ("select", "ignore", "exclude", "extend-exclude", "per-file-ignores", "confirm")
_CONFIRM_KEYS = ("timeout", "python")


def _parse_table(table: dict[str, Any], where: str, path: Path) -> Config:
    for key in table:
        if key not in _KEYS:
            raise ConfigError(f"unknown key {key!r} in {where} (known keys: {', '.join(_KEYS)})")
    values: dict[str, Any] = {"path": path, "root": path.parent}
    if "select" in table:
        values["select"] = _selectors(table["select"], "select", where)
    if "ignore" in table:
        values["ignore"] = _selectors(table["ignore"], "ignore", where)
    if "exclude" in table:
        values["exclude"] = _strings(table["exclude"], "exclude", where)
    if "extend-exclude" in table:
        values["extend_exclude"] = _strings(table["extend-exclude"], "extend-exclude", where)
    if "per-file-ignores" in table:
        values["per_file_ignores"] = _per_file_ignores(table["per-file-ignores"], where)
    if "confirm" in table:
        values.update(_confirm(table["confirm"], where, path.parent))
    return Config(**values)


def _strings(value: Any, key: str, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ConfigError(f"{key!r} in {where} must be a list of strings, not {_describe(value)}")
    return tuple(value)


def _selectors(value: Any, key: str, where: str) -> tuple[str, ...]:
    return parse_selectors(_strings(value, key, where), f"{key!r} in {where}")


def parse_selectors(items: list[str] | tuple[str, ...], what: str) -> tuple[str, ...]:
    """Upper-cased codes or prefixes (``ALL`` is every code); each must name at least one code."""
    from graphlint.rules import ALL_CODES

    selectors = []
    for item in items:
        selector = item.strip().upper()
        if selector == "ALL":
            selector = "GL"
        if not selector or not any(code.startswith(selector) for code in ALL_CODES):
            raise ConfigError(f"{what}: unknown rule code or prefix {item.strip()!r} (see `graphlint rules`)")
        selectors.append(selector)
    return tuple(selectors)


def _per_file_ignores(value: Any, where: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    if not isinstance(value, dict):
        raise ConfigError(f"'per-file-ignores' in {where} must be a table of pattern = [codes], not {_describe(value)}")
    return tuple(
        (pattern, _selectors(codes, f"per-file-ignores.{pattern}", where)) for pattern, codes in value.items()
    )


def _confirm(value: Any, where: str, base: Path) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"'confirm' in {where} must be a table, not {_describe(value)}")
    for key in value:
        if key not in _CONFIRM_KEYS:
            raise ConfigError(f"unknown key 'confirm.{key}' in {where} (known keys: {', '.join(_CONFIRM_KEYS)})")
    settings: dict[str, Any] = {}
    if "timeout" in value:
        timeout = value["timeout"]
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            raise ConfigError(f"'confirm.timeout' in {where} must be a number of seconds > 0, not {_describe(timeout)}")
        settings["confirm_timeout"] = float(timeout)
    if "python" in value:
        python = value["python"]
        if not isinstance(python, str) or not python:
            raise ConfigError(f"'confirm.python' in {where} must be a path or command name, not {_describe(python)}")
        # A path relative to the config file (a bare name is looked up on PATH).
        if "/" in python and not Path(python).is_absolute():
            python = str(base / python)
        settings["confirm_python"] = python
    return settings


def _describe(value: Any) -> str:
    kind = {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list", dict: "a table"}
    return f"{kind.get(type(value), type(value).__name__)} ({value!r})"
