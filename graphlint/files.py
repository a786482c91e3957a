"""Which files to check: walk the given paths the way git and Ruff users expect.

Directories are walked for source files, honouring every ``.gitignore`` between
the repository root and the file (with git's precedence: the deepest file that
has a matching pattern decides), ``.git/info/exclude``, and a fixed set of
directories that never hold the user's own code (virtual environments, build
output, caches). Files named on the command line are always checked. The
result is sorted, free of duplicates, and shown relative to the working
directory when the file lies under it.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable, Sequence

if TYPE_CHECKING:
    import pathspec

# The one place that says which files are source files: Python and Jupyter notebooks.
SOURCE_SUFFIXES: frozenset[str] = frozenset({".py", ".ipynb"})

# Directories that never contain the project's own training code, as gitignore
# patterns (a name with a trailing slash matches that directory at any depth).
# The `exclude` setting replaces this list and `extend-exclude` adds to it, as in Ruff.
DEFAULT_EXCLUDE: tuple[str, ...] = (
    ".git/",
    ".hg/",
    ".svn/",
    ".venv/",
    "venv/",
    "env/",
    "__pycache__/",
    "build/",
    "dist/",
    "site-packages/",
    "node_modules/",
    ".tox/",
    ".nox/",
    ".mypy_cache/",
    ".pytest_cache/",
    ".ruff_cache/",
    ".graphlint_cache/",
    ".eggs/",
    ".ipynb_checkpoints/",
)


class MissingPathError(Exception):
    """A path given by the user does not exist (a usage error, not a finding)."""

    def __init__(self, path: str) -> None:
        super().__init__(f"path does not exist: {path}")
        self.path = path


@dataclass
class Discovery:
    """The files to check, plus what could not be walked (shown as warnings)."""

    files: list[Path] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _IgnoreFile:
    """The patterns of one ignore file and the directory they are relative to."""

    base: Path
    spec: pathspec.GitIgnoreSpec


def gitignore_spec(lines: Sequence[str]) -> pathspec.GitIgnoreSpec:
    """Gitignore-style patterns, compiled (git's own semantics, negations included)."""
    return _pathspec().GitIgnoreSpec.from_lines(lines)


def _pathspec() -> ModuleType:
    """pathspec, imported on first use: only a directory walk, ``--force-exclude`` or
    per-file ignores need it, so checking named files never pays for it.

    Before Python 3.13, pathspec takes ``deprecated`` (for a few deprecated
    functions of its own API, none of which graphlint calls) from
    typing_extensions, whose decorator imports asyncio to tell coroutine
    functions apart: some 30-40 ms, more than pathspec itself. pathspec looks
    for the standard library's ``warnings.deprecated`` (Python 3.13) first, so
    while it is first imported an equivalent is put there (the decorated
    function warns with DeprecationWarning on each call), and taken away again.
    """
    module = sys.modules.get("pathspec")
    if module is not None:
        return module
    import warnings

    if hasattr(warnings, "deprecated"):
        import pathspec

        return pathspec
    warnings.deprecated = _deprecated  # type: ignore[attr-defined]
    try:
        import pathspec
    finally:
        del warnings.deprecated  # type: ignore[attr-defined]
    return pathspec


def _deprecated(message: str, /, *, category: type[Warning] | None = DeprecationWarning, stacklevel: int = 1):
    """What ``warnings.deprecated`` does to a function (PEP 702), for pathspec's import only."""
    import functools
    import warnings

    def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
        if isinstance(function, type):  # pathspec deprecates functions only; a class is marked, not wrapped
            function.__deprecated__ = message  # type: ignore[attr-defined]
            return function

        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if category is not None:
                warnings.warn(message, category=category, stacklevel=stacklevel + 1)
            return function(*args, **kwargs)

        wrapper.__deprecated__ = message  # type: ignore[attr-defined]
        return wrapper

    return decorate


def is_source_file(path: Path) -> bool:
    return path.suffix in SOURCE_SUFFIXES


def display_path(path: Path, cwd: Path | None = None) -> Path:
    """``path`` relative to the working directory when it lies under it, else as given."""
    cwd = cwd or Path.cwd()
    absolute = path if path.is_absolute() else cwd / path
    try:
        return Path(os.path.normpath(absolute)).relative_to(cwd)
    except ValueError:
        return Path(os.path.normpath(path))


def discover(
    paths: Sequence[str | Path],
    exclude: Sequence[str] = DEFAULT_EXCLUDE,
    root: Path | None = None,
    force_exclude: bool = False,
) -> Discovery:
    """All files to check under ``paths``.

    ``exclude`` holds gitignore-style patterns relative to ``root`` (the
    project root, default the working directory); they skip walked files and
    directories but not a file named explicitly, unless ``force_exclude``
    (what a pre-commit hook wants: it names every changed file). Raises
    MissingPathError for a path that does not exist.
    """
    cwd = Path.cwd()
    root = (root or cwd).absolute()
    compiled: list[_IgnoreFile | None] = []

    def exclusions() -> _IgnoreFile | None:
        # Compiled on first need: files named on the command line need none.
        if not compiled:
            compiled.append(_IgnoreFile(root, gitignore_spec(exclude)) if exclude else None)
        return compiled[0]

    result = Discovery()
    found: set[Path] = set()
    visited_dirs: set[Path] = set()
    for given in paths:
        path = Path(given)
        if not path.exists():
            raise MissingPathError(str(given))
        if path.is_dir():
            walker = _Walker(exclusions(), visited_dirs, result.warnings)
            for file in walker.walk(path):
                found.add(display_path(file, cwd))
        elif not (force_exclude and exclude and _excluded(exclusions(), path, is_dir=False)):
            found.add(display_path(path, cwd))
    result.files = sorted(found, key=lambda p: str(p))
    return result


class _Walker:
    """One directory walk; ``visited_dirs`` (resolved) is shared so symlink loops end."""

    def __init__(self, exclude: _IgnoreFile | None, visited_dirs: set[Path], warnings: list[str]) -> None:
        self.exclude = exclude
        self.visited_dirs = visited_dirs
        self.warnings = warnings

    def walk(self, top: Path):
        # An explicit stack, not recursion: directory trees can be deeper than Python's stack.
        pending: list[tuple[Path, list[_IgnoreFile]]] = [(top, _ignore_files_above(top))]
        while pending:
            directory, ignores = pending.pop()
            yield from self._files_in(directory, ignores, pending)

    def _files_in(self, directory: Path, ignores: list[_IgnoreFile], pending: list):
        try:
            real = directory.resolve()
        except (OSError, RuntimeError):  # RuntimeError: symlink loop on older Pythons
            return
        if real in self.visited_dirs:
            return
        self.visited_dirs.add(real)
        try:
            entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
        except OSError as error:
            self.warnings.append(f"cannot read directory {directory}: {error.strerror or error}")
            return
        own = _read_ignore_file(directory / ".gitignore", directory, self.warnings)
        if own is not None:
            ignores = ignores + [own]
        subdirectories: list[tuple[Path, list[_IgnoreFile]]] = []
        for entry in entries:
            path = Path(entry.path)
            try:
                is_dir = entry.is_dir()  # follows symlinks; loops are cut by visited_dirs
                is_file = not is_dir and entry.is_file()
            except OSError:
                continue
            if is_dir:
                if (path / "pyvenv.cfg").exists():  # a virtual environment, whatever its name
                    continue
                if not self._ignored(path, is_dir=True, ignores=ignores):
                    subdirectories.append((path, ignores))
            elif is_file and is_source_file(path) and not self._ignored(path, is_dir=False, ignores=ignores):
                yield path
        # Reversed onto the stack so directories are entered in name order: when two
        # symlinked routes reach one directory, the first by name is the one reported.
        pending.extend(reversed(subdirectories))

    def _ignored(self, path: Path, is_dir: bool, ignores: list[_IgnoreFile]) -> bool:
        if self.exclude is not None and _excluded(self.exclude, path, is_dir):
            return True
        return _decision(ignores, path, is_dir)


def _excluded(exclude: _IgnoreFile, path: Path, is_dir: bool) -> bool:
    """Exclude patterns are relative to the project root; outside it only the name can match."""
    absolute = path.absolute()
    try:
        relative = absolute.relative_to(exclude.base).as_posix()
    except ValueError:
        relative = absolute.name
    return bool(exclude.spec.match_file(relative + "/" if is_dir else relative))


def _decision(ignores: list[_IgnoreFile], path: Path, is_dir: bool) -> bool:
    """git's rule: the deepest ignore file with a matching pattern decides (negations included)."""
    absolute = path.absolute()
    for ignore in reversed(ignores):
        try:
            relative = absolute.relative_to(ignore.base).as_posix()
        except ValueError:
            continue
        if is_dir:
            relative += "/"
        verdict = ignore.spec.check_file(relative).include
        if verdict is not None:
            return verdict
    return False


def _read_ignore_file(path: Path, base: Path, warnings: list[str]) -> _IgnoreFile | None:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return None
    except OSError as error:
        warnings.append(f"cannot read {path}: {error.strerror or error}")
        return None
    try:
        spec = gitignore_spec(text.splitlines())
    except Exception as error:  # pathspec rejects some malformed patterns
        warnings.append(f"ignoring malformed {path}: {error}")
        return None
    return _IgnoreFile(base.absolute(), spec)


def _ignore_files_above(top: Path) -> list[_IgnoreFile]:
    """Ignore files that apply to ``top`` from its enclosing git repository, outermost first.

    Outside a git repository only the walked directories' own .gitignore
    files count, as with git itself.
    """
    start = top.absolute()
    chain = [start, *start.parents]
    repo_root = next((d for d in chain if (d / ".git").exists()), None)
    if repo_root is None:
        return []
    warnings: list[str] = []
    found: list[_IgnoreFile] = []
    exclude = _read_ignore_file(repo_root / ".git" / "info" / "exclude", repo_root, warnings)
    if exclude is not None:
        found.append(exclude)
    for directory in reversed(chain[1 : chain.index(repo_root) + 1]):
        ignore = _read_ignore_file(directory / ".gitignore", directory, warnings)
        if ignore is not None:
            found.append(ignore)
    return found
