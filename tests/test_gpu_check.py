"""scripts/gpu_check.py, the one script a lent GPU runs, works before a GPU minute is spent on it.

Smoke mode on CPU: the kernel checks (interpret mode here, compiled on a GPU) agree with the
reference, and the engine and transformers, loaded from the same random safetensors, emit the
same greedy tokens. ~20-30 s: two tiny models, one engine compile.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_gpu_check_smoke_kernels_and_agreement(tmp_path):
    skip = "ceilings,engine_small,train,attention,engine_big"
    cmd = [sys.executable, "scripts/gpu_check.py", "--smoke", "--skip", skip, "--out", tmp_path]
    run = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    out = json.loads((tmp_path / "gpu_check.json").read_text())
    kernels = out["kernels"]
    assert kernels["all_ok"] is True
    assert {(r[0], r[1], r[3]) for r in kernels["rows"]} >= {
        ("flash", "fwd", "float32"),
        ("flash", "dq/dk/dv", "bfloat16"),
        ("decode", "fwd", "float32"),
    }
    assert all(float(r[4]) < 5e-3 for r in kernels["rows"])
    agree = out["agree"]
    assert agree["rows_identical"] == agree["rows"] == 4, agree
    assert out["train"] == {"skipped": "--skip"}
