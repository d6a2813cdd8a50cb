"""scripts/launch/: every script parses (`bash -n`), and `--dry-run` of each prints the resolved
config, the mesh and the plan without training (no GPU, no weights: the plan needs neither)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAUNCH = ROOT / "scripts" / "launch"
SCRIPTS = sorted(LAUNCH.glob("*.sh"))


def _cli_wrapper(tmp_path) -> str:
    """A `mimojax` for $MIMOJAX that runs this interpreter's package (installed or not)."""
    wrapper = tmp_path / "mimojax"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m mimojax.cli.main "$@"\n')
    wrapper.chmod(0o755)
    return str(wrapper)


def test_there_are_the_three_launch_scripts():
    names = {p.name for p in SCRIPTS}
    assert {"one_gpu.sh", "one_node.sh", "multi_node.sh", "common.sh"} <= names


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_bash_n(script):
    proc = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize(
    "script, env, devices, mesh, model",
    [
        ("one_gpu.sh", {}, 1, "data=1 fsdp=1 tensor=1", "qwen2.5-0.5b"),
        ("one_node.sh", {}, 8, "data=1 fsdp=1 tensor=8", "qwen2.5-72b"),
        (
            "multi_node.sh",
            {"NODES": "4", "NODE_RANK": "2", "COORDINATOR": "node0:1234"},
            32,
            "data=4 fsdp=1 tensor=8",
            "qwen2.5-72b",
        ),
    ],
)
def test_dry_run_prints_config_mesh_and_plan(tmp_path, script, env, devices, mesh, model):
    run_env = {**os.environ, **env, "MIMOJAX": _cli_wrapper(tmp_path), "ROLLOUT_N": "4"}
    for var in ("JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID"):
        run_env.pop(var, None)
    proc = subprocess.run(
        ["bash", str(LAUNCH / script), "--dry-run", "--config.trainer.total_steps=7"],
        capture_output=True, text=True, env=run_env, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert f"train --config configs/grpo_qwen.py:model={model}" in out
    cmd = out.splitlines()[0]
    assert cmd.index("--config.rollout.n=4") < cmd.index("--config.trainer.total_steps=7")
    assert "resolved config" in out and "total_steps: 7" in out and "  n: 4" in out
    assert f"devices: {devices}, mesh {mesh}" in out
    assert "H100 SXM (80 GB)" in out and "min 80GB" in out
    if script == "multi_node.sh":  # the variables jax.distributed.initialize reads
        assert "JAX_COORDINATOR_ADDRESS=node0:1234 JAX_NUM_PROCESSES=4 JAX_PROCESS_ID=2" in out
