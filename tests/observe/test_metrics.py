"""metrics.jsonl rows, resume truncation, console progress, timers and the wandb id."""

import os
import re
import time

import pytest

from mimojax.observe.metrics import (
    METRIC_NAMES,
    MetricsLogger,
    Timer,
    read_metrics,
    reduce_metrics,
    rows_by_step,
)


def logger(tmp_path, **kw):
    kw.setdefault("wandb_mode", "disabled")
    kw.setdefault("progress", False)
    return MetricsLogger(str(tmp_path), total_steps=kw.pop("total_steps", 4), **kw)


def test_rows_are_sorted_json_with_non_finite_as_null(tmp_path):
    with logger(tmp_path) as log:
        log.log(1, {"b": 2, "a": float("nan"), "c": float("inf"), "name": "x", "n": 3})
    (row,) = read_metrics(str(tmp_path))
    assert row == {"step": 1, "a": None, "b": 2.0, "c": None, "n": 3.0, "name": "x"}
    assert list(row) == ["step", "a", "b", "c", "n", "name"]


def test_resume_drops_steps_after_the_checkpoint(tmp_path):
    with logger(tmp_path) as log:
        for step in range(1, 5):
            log.log(step, {"x": step})
    with logger(tmp_path, start_step=2) as log:  # resumed from the step-2 checkpoint
        log.log(3, {"x": 30})
    assert [(r["step"], r["x"]) for r in read_metrics(str(tmp_path))] == [
        (1, 1.0),
        (2, 2.0),
        (3, 30.0),
    ]
    with logger(tmp_path, start_step=0) as log:  # a fresh run starts a fresh file
        pass
    assert read_metrics(str(tmp_path)) == []


def test_a_line_cut_by_a_kill_is_ignored(tmp_path):
    with logger(tmp_path) as log:
        log.log(1, {"x": 1})
    with open(tmp_path / "metrics.jsonl", "a") as f:
        f.write('{"step": 2, "x"')  # killed mid-write
    assert [r["step"] for r in read_metrics(str(tmp_path / "metrics.jsonl"))] == [1]
    with logger(tmp_path, start_step=1) as log:
        log.log(2, {"x": 2})
    assert [r["step"] for r in read_metrics(str(tmp_path))] == [1, 2]


def test_progress_line(tmp_path, capsys):
    with logger(tmp_path, progress=True, total_steps=10) as log:
        log.log(
            2,
            {
                "critic/score/mean": 0.25,
                "response_length/mean": 12.5,
                "val-core/math/acc/greedy": 0.5,
                "perf/time_per_step": 3.0,
                "perf/wall_s": 90.0,
            },
        )
    line = capsys.readouterr().err.strip()
    parts = line.split(" | ")
    assert parts[:5] == [
        "step 2/10",
        "reward 0.250",
        "len 12.5",
        "math/acc/greedy 0.500",
        "3.0s/step",
    ]
    assert parts[5].startswith("ETA ") and parts[6] == "train 1.5m"
    # with a wall-time budget the ETA is at most the budget left
    with logger(tmp_path, progress=True, total_steps=1000, time_limit_s=150.0) as log:
        log.log(1, {"perf/wall_s": 90.0})
    eta = capsys.readouterr().err.split("ETA ")[1].split("m")[0]
    assert float(eta) <= 1.0


def test_timer_accumulates_and_resets():
    timer = Timer()
    with timer("gen"):
        time.sleep(0.02)
    with timer("gen"):
        time.sleep(0.02)
    with timer("reward"):
        pass
    out = timer.pop()
    assert set(out) == {"timing_s/gen", "timing_s/reward"} and out["timing_s/gen"] >= 0.04
    assert timer.pop() == {}


def test_reduce_metrics_means_over_rows_that_have_the_key():
    out = reduce_metrics([{"a": 1, "b": 4}, {"a": 3}, {"a": 5, "b": 6}])
    assert out == {"a": 3.0, "b": 5.0}


def test_wandb_offline_keeps_one_run_id_across_resumes(tmp_path):
    with logger(tmp_path, wandb_mode="offline", config={"lr": 1e-5}) as log:
        log.log(1, {"x": 1.0, "y": float("nan")})
    first = (tmp_path / "wandb_id.txt").read_text()
    with logger(tmp_path, wandb_mode="offline", start_step=1) as log:
        log.log(2, {"x": 2.0})
    assert (tmp_path / "wandb_id.txt").read_text() == first
    runs = [d for d in os.listdir(tmp_path / "wandb") if d.startswith("offline-run-")]
    # wandb suffixes "-1" to a second run directory started within the same second.
    assert runs and all(re.sub(r"-\d+$", "", d).endswith(first) for d in runs)


def test_metric_names_are_documented():
    assert all(isinstance(v, str) and v for v in METRIC_NAMES.values())
    assert "actor/pg_loss" in METRIC_NAMES and "val-core/<env>/acc/greedy" in METRIC_NAMES


def test_lines_repeating_a_step_merge_in_step_order(tmp_path):
    with logger(tmp_path) as log:
        log.log(0, {"val": 0.25})
        log.log(1, {"x": 1, "val": None})
        log.log(1, {"val": 0.5})
    rows = read_metrics(str(tmp_path))
    assert [r["step"] for r in rows] == [0, 1, 1]  # as logged
    assert rows_by_step(list(reversed(rows))) == [
        {"step": 0, "val": 0.25},
        {"step": 1, "x": 1.0, "val": None},  # later lines win; reversed, the first line is later
    ]
    assert rows_by_step(rows)[1] == {"step": 1, "x": 1.0, "val": 0.5}


@pytest.mark.parametrize(
    "text, match",
    [
        ('{"step": 1}\n{"step": 2, oops}\n{"step": 3}\n', r"metrics.jsonl:2: not valid JSON"),
        ('{"step": 1}\n[1, 2]\n', r"metrics.jsonl:2: expected a JSON object"),
        ('{"loss": 1.0}\n', r"metrics.jsonl:1: 'step' must be an integer"),
    ],
)
def test_only_the_last_line_may_be_malformed(tmp_path, text, match):
    (tmp_path / "metrics.jsonl").write_text(text)
    with pytest.raises(ValueError, match=match):
        read_metrics(str(tmp_path))
