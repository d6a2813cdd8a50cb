"""Checkpoint faults seen from `mimojax train`: a corrupt newest checkpoint falls back to the
previous one; a save that fails (file-size limit) stops the run with one clear error and the next
run resumes from the previous checkpoint; every checkpoint corrupt: one clear error, exit 1.

One workdir through five CLI runs of the tiny config, each needs the files the last left; a
checkpoint every step keeps them to 6 steps in all (~1-2 min on 2 shared cores: five JAX starts,
the compiled programs shared through the session's compilation cache, tests/conftest.py).
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys

from mimojax.observe.metrics import read_metrics

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _train(workdir, steps, file_size_limit_kb=0):
    cmd = [sys.executable, "-m", "mimojax.cli.main", "train", "--config", "configs/grpo_tiny.py"]
    cmd += ["--workdir", str(workdir), f"--config.trainer.total_steps={steps}"]
    cmd += ["--config.eval.at_start=False", "--config.eval.at_end=False"]
    cmd += ["--config.checkpoint.every_steps=1"]  # keep=2: the newest two steps on disk

    if file_size_limit_kb:  # writes past this size fail with EFBIG, like a full disk
        cmd = ["bash", "-c", f'ulimit -f {file_size_limit_kb} && exec "$@"', "limited", *cmd]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert "Traceback" not in out.stderr, out.stderr[-3000:]
    return out.returncode, out.stderr


def _truncate_arrays(workdir, step):
    files = glob.glob(
        str(workdir / "checkpoints" / str(step) / "state" / "ocdbt.process_0" / "d" / "*")
    )
    assert files
    for f in files:
        os.truncate(f, 10)


def test_checkpoint_faults_through_the_cli(tmp_path):
    workdir = tmp_path / "run"
    assert _train(workdir, 2)[0] == 0  # checkpoints 1 and 2 (keep=2)
    _truncate_arrays(workdir, 2)

    code, err = _train(workdir, 3)
    assert code == 0
    assert "checkpoint step 2" in err and "unreadable, trying step 1" in err
    assert [r["step"] for r in read_metrics(str(workdir))] == [1, 2, 3]
    assert os.path.isdir(workdir / "checkpoints" / "2.unreadable")  # kept for inspection

    code, err = _train(workdir, 4, file_size_limit_kb=1024)  # the step-4 save cannot be written
    assert code == 1
    assert "could not save checkpoint step 4" in err and "step 3 is the newest checkpoint" in err

    code, err = _train(workdir, 4)  # resumes from step 3: step 4 runs again, once
    assert code == 0
    rows = read_metrics(str(workdir))
    assert [r["step"] for r in rows] == list(range(1, 5))
    # step 2 ran again after the first resume, step 4 after the second
    assert rows[-1]["restarts/count"] == 2 and rows[-1]["restarts/steps_redone"] == 2

    for step in (3, 4):
        _truncate_arrays(workdir, step)
    code, err = _train(workdir, 5)
    assert code == 1
    assert f"no readable checkpoint in {workdir / 'checkpoints'}" in err and "--no-resume" in err
