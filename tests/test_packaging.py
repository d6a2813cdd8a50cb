"""pyproject.toml ships the whole tree and keeps the core slim: every folder of mimojax/, envs/ and
kernels/ is a listed package with its data files declared, the extras match mimojax/extras.py,
and no extra's package is a core dependency."""

from __future__ import annotations

import fnmatch
import re
import subprocess
from pathlib import Path

import pytest

from mimojax.extras import EXTRAS

tomllib = pytest.importorskip("tomllib")  # Python >= 3.11

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
# distribution -> import name, for the extras' packages
IMPORT_NAMES = {"scikit-image": "skimage"}


def _dist(requirement: str) -> str:
    return re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].strip().lower()


def _tracked_files() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "mimojax", "envs", "kernels"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [f for f in out if (ROOT / f).is_file()]


def _installed_name(path: str) -> tuple[str, str]:
    """(package, file name) a tracked file installs as."""
    parts = Path(path).parts
    top = {"mimojax": ["mimojax"], "envs": ["mimojax", "envs"], "kernels": ["mimojax", "kernels"]}
    return ".".join(top[parts[0]] + list(parts[1:-1])), parts[-1]


def test_every_folder_is_a_listed_package_and_every_data_file_is_declared():
    st = PYPROJECT["tool"]["setuptools"]
    packages, package_data = set(st["packages"]), st["package-data"]
    undeclared, unlisted = [], set()
    for path in _tracked_files():
        package, name = _installed_name(path)
        if name == "README.md":  # the worlds' READMEs stay in the repo
            continue
        if package not in packages:
            unlisted.add(package)
        elif not name.endswith(".py") and not any(
            fnmatch.fnmatch(name, pattern) for pattern in package_data.get(package, ())
        ):
            undeclared.append(path)
    assert not unlisted, f"add to [tool.setuptools] packages: {sorted(unlisted)}"
    assert not undeclared, f"add to [tool.setuptools.package-data]: {undeclared}"
    stale = {p for p in packages if p not in {_installed_name(f)[0] for f in _tracked_files()}}
    assert not stale, stale


def test_the_extras_match_the_modules_the_code_requires():
    optional = PYPROJECT["project"]["optional-dependencies"]
    for extra, modules in EXTRAS.items():
        dists = [_dist(r) for r in optional[extra]]
        assert sorted(IMPORT_NAMES.get(d, d) for d in dists) == sorted(modules), extra
    assert optional["all"] == [f"mimojax[{','.join(EXTRAS)}]"]
    assert "mimojax[all]" in optional["test"]  # the tests exercise every extra


def test_no_extra_package_is_a_core_dependency():
    core = {_dist(r) for r in PYPROJECT["project"]["dependencies"]}
    optional = PYPROJECT["project"]["optional-dependencies"]
    in_extras = {_dist(r) for extra in EXTRAS for r in optional[extra]}
    assert not core & in_extras, core & in_extras
    # what the demo uses stays in: report plots, wandb offline logging, envs/math
    assert {"matplotlib", "wandb", "sympy"} <= core
