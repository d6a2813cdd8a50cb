"""Execute notebooks/engine_walkthrough.ipynb headless (real SmolLM2 weights)."""

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.smollm2
def test_engine_walkthrough_executes():
    nb = nbformat.read(ROOT / "notebooks" / "engine_walkthrough.ipynb", as_version=4)
    NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}
    ).execute()
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "Paris" in text
    gap = float(text.split("max |engine - trainer| =")[1].split()[0])
    assert gap < 1e-3
    assert "recompiled: False" in text
    images = sum("image/png" in o.get("data", {}) for c in nb.cells for o in c.get("outputs", []))
    assert images == 2
