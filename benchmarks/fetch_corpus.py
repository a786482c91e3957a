"""Fetch the pinned benchmark corpus: real training code from PyPI wheels.

    python benchmarks/fetch_corpus.py

Downloads each pinned wheel with pip (no dependencies, no builds), unpacks only
its ``.py`` files into ``benchmarks/corpus/<name>-<version>/`` and writes
``benchmarks/corpus/files.txt``, the sorted list of files every timed tool runs
on. Re-runnable and idempotent: a package whose directory is complete is not
downloaded again. The corpus is git-ignored: it is third-party code.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

CORPUS = Path(__file__).resolve().parent / "corpus"
FILE_LIST = CORPUS / "files.txt"
COMPLETE_MARKER = ".complete"


@dataclass(frozen=True)
class Package:
    name: str
    version: str
    # Extra pip options, for packages with no wheel for this Python (fairseq
    # ships cp38 wheels only; its .py files are what we want, not the binary).
    pip_options: tuple[str, ...] = ()
    # Keep only files whose path inside the wheel passes this test (None: all).
    keep: "callable | None" = None


# transformers 5.x alone is 53 MB of Python, mostly ~400 model ports; keeping the
# training machinery and a few representative models keeps a run short while the
# code stays real.
_TRANSFORMERS_MODELS = {"bert", "gpt2", "llama", "t5", "vit", "whisper"}


def _transformers_subset(member: str) -> bool:
    parts = member.split("/")
    return not (len(parts) > 3 and parts[1] == "models" and parts[2] not in _TRANSFORMERS_MODELS)


PACKAGES: tuple[Package, ...] = (
    Package("transformers", "5.23.0", keep=_transformers_subset),
    Package("accelerate", "1.15.0"),
    Package(
        "fairseq",
        "0.12.2",
        pip_options=(
            "--python-version", "3.8", "--implementation", "cp", "--abi", "cp38",
            "--platform", "manylinux1_x86_64",
        ),
    ),
    Package("torchtune", "0.6.1"),
    Package("pytorch-ignite", "0.5.5"),
    Package("pytorch-lightning", "2.6.6"),
    Package("allennlp", "2.10.1"),
    Package("skorch", "1.4.0"),
    Package("timm", "1.0.31"),
    Package("d2l", "1.0.3"),
    Package("trl", "1.16.0"),
)


def package_dir(package: Package) -> Path:
    return CORPUS / f"{package.name}-{package.version}"


def download_wheel(package: Package, into: Path) -> Path:
    command = [
        sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
        "--only-binary", ":all:", *package.pip_options,
        f"{package.name}=={package.version}", "--dest", str(into),
    ]
    subprocess.run(command, check=True)
    wheels = sorted(into.glob("*.whl"))
    if len(wheels) != 1:
        raise SystemExit(f"expected one wheel for {package.name}, found {wheels}")
    return wheels[0]


def unpack_python_files(wheel: Path, package: Package, target: Path) -> int:
    count = 0
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.infolist():
            name = member.filename
            if not name.endswith(".py") or ".dist-info/" in name:
                continue
            if package.keep is not None and not package.keep(name):
                continue
            destination = (target / name).resolve()
            # A wheel is untrusted input: never write outside the package dir.
            if target.resolve() not in destination.parents:
                continue
            destination.parent.mkdir(parents=True, exist_ok=True)
            destination.write_bytes(archive.read(member))
            count += 1
    return count


def fetch(package: Package) -> None:
    target = package_dir(package)
    if (target / COMPLETE_MARKER).exists():
        print(f"{target.name}: present")
        return
    shutil.rmtree(target, ignore_errors=True)
    with tempfile.TemporaryDirectory() as scratch:
        wheel = download_wheel(package, Path(scratch))
        target.mkdir(parents=True)
        count = unpack_python_files(wheel, package, target)
    (target / COMPLETE_MARKER).write_text(f"{count}\n")
    print(f"{target.name}: {count} files")


def write_file_list() -> list[Path]:
    files = sorted(
        path.relative_to(CORPUS)
        for package in PACKAGES
        for path in package_dir(package).rglob("*.py")
    )
    FILE_LIST.write_text("".join(f"{path}\n" for path in files))
    return files


def main() -> None:
    CORPUS.mkdir(parents=True, exist_ok=True)
    for package in PACKAGES:
        fetch(package)
    files = write_file_list()
    size = sum((CORPUS / path).stat().st_size for path in files)
    print(f"{len(files)} files, {size / 1e6:.1f} MB listed in {FILE_LIST}")


if __name__ == "__main__":
    main()
