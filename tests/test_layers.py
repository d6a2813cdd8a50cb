"""The import layers of DESIGN.md hold: `lint-imports` (contracts in pyproject.toml) passes."""

import ast
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def test_import_linter_contracts_are_kept():
    lint_imports = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run(
        [str(lint_imports), "--no-cache"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert "broken" in result.stdout and " 0 broken" in result.stdout


def test_kernels_import_nothing_of_mimojax_but_themselves():
    # kernels/ installs as mimojax.kernels from outside mimojax/, where lint-imports does not
    # look; it sits at the bottom layer (models import it, not the reverse). Its one neighbour
    # there: mimojax.shadowing (stdlib only), which hands a top-level `kernels` import over.
    for path in sorted((REPO_ROOT / "kernels").glob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""] if node.level == 0 else []
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            for name in names:
                if name == "mimojax" or name.startswith("mimojax."):
                    ok = name.startswith("mimojax.kernels") or name == "mimojax.shadowing"
                    assert ok, f"{path.name} imports {name}"


def test_kernel_references_share_no_code_with_the_kernels():
    # A reference checks a kernel; imported code would hide a bug in both.
    tree = ast.parse((REPO_ROOT / "kernels" / "reference.py").read_text())
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    } | {
        (node.module or "").split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
    }
    assert imported <= {"__future__", "jax", "numpy"}, imported


def test_shadowing_imports_nothing_of_mimojax():
    tree = ast.parse((REPO_ROOT / "mimojax" / "shadowing.py").read_text())
    imported = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    imported += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert not [m for m in imported if m.split(".")[0] == "mimojax"], imported
