"""Execute notebooks/advantage_estimators.ipynb headless, in the venv's own kernel."""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from jupyter_client.kernelspec import KernelSpecManager
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "advantage_estimators.ipynb"


def test_python3_kernel_is_this_interpreter():
    spec = KernelSpecManager().get_kernel_spec("python3")
    # jupyter_client swaps a bare "python" argv[0] for sys.executable; an absolute path must
    # already be this interpreter, or the notebook would test some other environment.
    assert spec.argv[0] in ("python", "python3", sys.executable), spec.argv


def test_advantage_notebook_executes():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell("import sys; print(sys.prefix)"))
    client = NotebookClient(
        nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}
    )
    client.execute()
    kernel_prefix = "".join(o.get("text", "") for o in nb.cells[-1].outputs).strip()
    assert kernel_prefix == sys.prefix  # the kernel ran in this (virtual) environment
    images = sum(
        "image/png" in o.get("data", {})
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.outputs
    )
    assert images >= 3
