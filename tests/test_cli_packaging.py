"""What `pip install .` installs: every package, rules/ as graphlint.rules, one version, the entry point."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile

import pytest

import graphlint
from conftest import REPO_ROOT


def _source_packages() -> set[str]:
    packages = {"graphlint.rules"}
    for init in (REPO_ROOT / "graphlint").rglob("__init__.py"):
        if "__pycache__" not in init.parts:
            packages.add(".".join(init.parent.relative_to(REPO_ROOT).parts))
    return packages


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    # Built from a copy: an in-tree build would write build/ into the shared checkout.
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO_ROOT / name, source / name)
    for folder in ("graphlint", "rules"):
        shutil.copytree(REPO_ROOT / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", str(source), "-w", str(out)],
        check=True, capture_output=True, timeout=300,
    )
    [built] = out.glob("graphlint-*.whl")
    return zipfile.ZipFile(built)


def test_every_package_of_the_tree_is_shipped(wheel):
    names = set(wheel.namelist())
    for package in _source_packages():
        assert package.replace(".", "/") + "/__init__.py" in names, f"{package} missing from pyproject's packages"
    assert not any(name.startswith("rules/") for name in names), "rules/ must ship only as graphlint.rules"
    assert "graphlint/rules/gl001_backward_through_freed_graph.py" in names


def test_the_wheel_has_the_package_version_and_the_entry_point(wheel):
    metadata = next(name for name in wheel.namelist() if name.endswith(".dist-info/METADATA"))
    assert re.search(rf"^Version: {re.escape(graphlint.__version__)}$", wheel.read(metadata).decode(), re.MULTILINE)
    entry_points = next(name for name in wheel.namelist() if name.endswith(".dist-info/entry_points.txt"))
    assert "graphlint = graphlint.cli:main" in wheel.read(entry_points).decode()


def test_runtime_dependencies_do_not_include_torch(wheel):
    metadata = next(name for name in wheel.namelist() if name.endswith(".dist-info/METADATA"))
    requires = [line for line in wheel.read(metadata).decode().splitlines() if line.startswith("Requires-Dist:")]
    unconditional = [line for line in requires if "extra ==" not in line]
    assert not any("torch" in line for line in unconditional)
    assert any("torch" in line and 'extra == "dynamic"' in line for line in requires)
