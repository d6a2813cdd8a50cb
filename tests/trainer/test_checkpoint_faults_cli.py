"""Checkpoint faults seen from `mimojax train`: a corrupt newest checkpoint falls back to the
previous one; a save that fails (file-size limit) stops the run with one clear error and the next
run resumes from the previous checkpoint; every checkpoint corrupt: one clear error, exit 1.

One workdir through five CLI runs of the tiny config (~90 s): each needs the files the last left.
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys

from mimojax.metrics import read_metrics

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _train(workdir, steps, file_size_limit_kb=0):
    cmd = [sys.executable, "-m", "mimojax.cli", "train", "--config", "configs/grpo_tiny.py"]
    cmd += ["--workdir", str(workdir), f"--config.trainer.total_steps={steps}"]
    cmd += ["--config.eval.at_start=False", "--config.eval.at_end=False"]

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
    assert _train(workdir, 4)[0] == 0  # checkpoints 2 and 4 (keep=2)
    _truncate_arrays(workdir, 4)

    code, err = _train(workdir, 6)
    assert code == 0
    assert "checkpoint step 4" in err and "unreadable, trying step 2" in err
    assert [r["step"] for r in read_metrics(str(workdir))] == [1, 2, 3, 4, 5, 6]
    assert os.path.isdir(workdir / "checkpoints" / "4.unreadable")  # kept for inspection

    code, err = _train(workdir, 8, file_size_limit_kb=1024)  # the step-8 save cannot be written
    assert code == 1
    assert "could not save checkpoint step 8" in err and "step 6 is the newest checkpoint" in err

    code, err = _train(workdir, 8)  # resumes from step 6: steps 7 and 8 run again, once each
    assert code == 0
    rows = read_metrics(str(workdir))
    assert [r["step"] for r in rows] == list(range(1, 9))
    # steps 3-4 ran again after the first resume, 7-8 after the second
    assert rows[-1]["restarts/count"] == 2 and rows[-1]["restarts/steps_redone"] == 4

    for step in (6, 8):
        _truncate_arrays(workdir, step)
    code, err = _train(workdir, 10)
    assert code == 1
    assert f"no readable checkpoint in {workdir / 'checkpoints'}" in err and "--no-resume" in err
