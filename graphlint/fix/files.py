"""Fixing files on disk: read, fix, re-check, and write back atomically.

The file is written through a temporary file in its own directory and
``os.replace`` (never half-written), in its own encoding (a BOM or a coding
cookie is kept) with its own newlines and permission bits, and only when
its bytes are still the ones that were read.
"""

from __future__ import annotations

import difflib
import io
import os
import stat
import tempfile
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

from graphlint.finding import Finding
from graphlint.fix import FixOutcome, fix_text


class FileChangedError(Exception):
    """The file changed on disk between reading and writing it."""


@dataclass
class FileFix:
    path: str
    original: str
    outcome: FixOutcome
    encoding: str = "utf-8"
    written: bool = False
    error: str | None = None
    extra_remaining: list[Finding] = field(default_factory=list)

    @property
    def fixed(self) -> list[Finding]:
        return self.outcome.fixed if self.error is None else []

    @property
    def remaining(self) -> list[Finding]:
        return self.outcome.remaining if self.error is None else self.extra_remaining

    def diff(self) -> str:
        if self.outcome.text == self.original:
            return ""
        lines = difflib.unified_diff(
            self.original.splitlines(keepends=True),
            self.outcome.text.splitlines(keepends=True),
            fromfile=self.path,
            tofile=self.path,
        )
        return "".join(
            line if line.endswith(("\n", "\r")) else line + "\n\\ No newline at end of file\n" for line in lines
        )


def _encoding(data: bytes) -> str:
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError:
        encoding = "utf-8"
    return encoding


def fix_file(
    path: str, findings: list[Finding], codes: frozenset[str] | None, unsafe: bool, write: bool
) -> FileFix | None:
    """Fix one file whose ``findings`` are known; None when the file cannot be read as text."""
    try:
        data = Path(path).read_bytes()
    except OSError:
        return None
    encoding = _encoding(data)
    try:
        original = data.decode(encoding)
    except (UnicodeDecodeError, LookupError):
        return None
    outcome = fix_text(original, path, codes, unsafe, findings=findings)
    result = FileFix(path, original, outcome, encoding)
    if write and outcome.text != original:
        try:
            write_atomically(Path(path), outcome.text.encode(encoding), expected=data)
            result.written = True
        except FileChangedError:
            result.error = "changed on disk while it was being fixed; left as it is"
            result.extra_remaining = findings
        except (OSError, UnicodeEncodeError) as error:
            result.error = f"cannot write the fixed file: {getattr(error, 'strerror', None) or error}"
            result.extra_remaining = findings
    return result


def write_atomically(path: Path, data: bytes, expected: bytes) -> None:
    """Replace ``path`` with ``data`` if it still holds ``expected``; keeps its permission bits."""
    mode = stat.S_IMODE(path.stat().st_mode)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".graphlint-fix")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temporary, mode)
        if path.read_bytes() != expected:
            raise FileChangedError(str(path))
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise
