"""The run report: headline numbers against hand-computed values, HTML/PNG output, bad input."""

import base64
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mimojax.observe import report
from mimojax.observe import summary as report_summary
from mimojax.observe.metrics import read_metrics, rows_by_step

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
STEPS = 20


def step_s(s):
    return 4.0 + 0.1 * s


def wall_s(s):
    """Hand sum of step_s(1..s): 4 s + 0.1 * s (s + 1) / 2."""
    return 4.0 * s + 0.05 * s * (s + 1)


def train_row(s, kl=True, wall=True):
    row = {
        "step": s,
        "critic/score/mean": 0.1 * s,
        "critic/score/min": 0.0,
        "critic/score/max": 1.0,
        "response_length/mean": 100.0 + s,
        "response_length/clip_ratio": 0.01,
        "actor/pg_loss": -0.1,
        "actor/entropy": 1.0 - 0.01 * s,
        "actor/ppo_kl": 0.001,
        "actor/grad_norm": 0.5,
        "timing_s/gen": 2.0,
        "timing_s/reward": 0.5,
        "timing_s/update_actor": 1.0,
        "timing_s/sync": 0.25,
        "timing_s/step": step_s(s),
        "perf/throughput": 1000.0 + 10 * s,
        # Cumulative, as the trainer logs it: step s itself processes 1000 * s tokens.
        "perf/total_num_tokens": 1000.0 * s * (s + 1) / 2,
        "rollout/policy_version_lag": 0.0,
        "train/skipped_updates": 1.0 if s == 7 else 0.0,
    }
    if kl:
        row["actor/kl_loss"] = 0.01 * s
    if wall:
        row["perf/wall_s"] = wall_s(s)
    return row


ACCS = {0: 0.30, 10: 0.48, 20: 0.65}


def write_run(path, accs=ACCS, wall=True, tail=""):
    """20 training steps; step 0 eval-only, step 10's eval on its own line, step 20's inline."""
    lines = [{"step": 0, "val-core/math/acc/greedy": accs[0], "val-core/math/pass@8": 0.5}]
    for s in range(1, STEPS + 1):
        row = train_row(s, wall=wall)
        if s == 20:
            row.update({"val-core/math/acc/greedy": accs[20], "val-core/math/pass@8": 0.8})
        lines.append(row)
        if s == 10:
            lines.append({"step": 10, "val-core/math/acc/greedy": accs[10]})
    path.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(r) + "\n" for r in lines) + tail
    (path / "metrics.jsonl").write_text(text)
    return path


def images(page):
    return re.findall(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", page)


@pytest.fixture(scope="module")
def full_run(tmp_path_factory):
    workdir = write_run(tmp_path_factory.mktemp("run") / "w")
    info = {
        "config": {"actor.lr": 1e-6, "rollout.n": 8, "algo.adv_estimator": "grpo"},
        "model": "qwen3_0p6b",
        "devices": "1x H100",
        "started": "2025-01-01T00:00:00",
        "seed": 3,
    }
    (workdir / "run_info.json").write_text(json.dumps(info))
    path = report.write_report(str(workdir))
    return workdir, path


def test_headline_numbers_match_hand_computation(tmp_path):
    rows = report.read_run_rows(str(write_run(tmp_path)))
    s = report.summarize_run(rows)
    assert s["steps"] == 20 and s["last_step"] == 20
    assert s["base_acc"] == 0.30 and s["base_step"] == 0
    assert s["final_acc"] == s["best_acc"] == 0.65
    assert s["lift_points"] == pytest.approx(35.0)
    assert s["train_wall_s"] == pytest.approx(101.0)  # 4 * 20 + 0.05 * 20 * 21
    assert s["train_minutes"] == pytest.approx(101.0 / 60)
    assert s["total_tokens"] == pytest.approx(1000.0 * 210)  # 1000 * (1 + ... + 20)
    assert s["eval_minutes"] == pytest.approx(101.0 / 60)
    assert s["points_per_minute"] == pytest.approx(35.0 / (101.0 / 60))
    assert s["points_per_million_tokens"] == pytest.approx(35.0 / 0.21)
    assert s["mean_tokens_per_s"] == pytest.approx(1000.0 + 10 * 10.5)
    # +18 points at step 10 (45.5 s) clears +10 only; +20 and +30 come at step 20 (101 s).
    ttp = s["time_to_points"]
    assert ttp[10] == {"step": 10, "minutes": pytest.approx(45.5 / 60), "tokens": 55000.0}
    assert ttp[20] == {"step": 20, "minutes": pytest.approx(101.0 / 60), "tokens": 210000.0}
    assert ttp[30]["step"] == 20
    assert s["pass_at_k"] == {8: {"base": 0.5, "final": 0.8}}
    # Phases: fixed seconds per step against sum(step_s) = 101 s; the remainder is "other".
    assert s["step_s"] == pytest.approx(101.0 / 20)
    assert s["phase_s"]["gen"] == pytest.approx(2.0)
    assert s["phase_share"]["gen"] == pytest.approx(40.0 / 101)
    assert s["phase_share"]["sync"] == pytest.approx(5.0 / 101)
    assert s["phase_share"]["other"] == pytest.approx(1 - 75.0 / 101)
    assert list(s["phase_s"])[:4] == ["gen", "reward", "update_actor", "sync"]
    assert s["skipped_updates"] == 1.0 and s["policy_version_lag_max"] == 0.0


def test_wall_time_falls_back_to_summed_step_times(tmp_path):
    rows = report.read_run_rows(str(write_run(tmp_path, wall=False)))
    s = report.summarize_run(rows)
    assert s["train_wall_s"] == pytest.approx(101.0)
    assert s["time_to_points"][10]["minutes"] == pytest.approx(45.5 / 60)


def test_threshold_reached_exactly_counts_and_unreached_is_none(tmp_path):
    # 0.50 - 0.30 is 0.19999999999999998 in floats; it is +20 points all the same.
    accs = {0: 0.30, 10: 0.50, 20: 0.45}
    rows = report.read_run_rows(str(write_run(tmp_path, accs=accs)))
    s = report.summarize_run(rows)
    assert s["time_to_points"][20]["step"] == 10
    assert s["time_to_points"][30] is None
    assert s["best_acc"] == 0.50 and s["best_step"] == 10
    assert s["lift_points"] == pytest.approx(15.0)
    assert s["best_lift_points"] == pytest.approx(20.0)


def test_html_has_headline_first_then_images_then_config(full_run):
    workdir, path = full_run
    assert path == str(workdir / "report.html")
    page = open(path, encoding="utf-8").read()
    imgs = images(page)
    # Six panels have data; the lag panel stays out because the run is synchronous (lag 0).
    assert len(imgs) == 6
    for img in imgs:
        assert base64.b64decode(img).startswith(PNG_MAGIC)
    assert (workdir / "report.png").read_bytes().startswith(PNG_MAGIC)
    assert "policy version lag" not in page.split("<h2>Plots")[1].split("<h2>Run")[0]
    head = page.index("What did this compute buy?")
    assert head < page.index("data:image/png") < page.index("<h2>Run</h2>")
    headline = page[head : page.index("<h2>Plots")]
    assert "<td>points gained (held-out greedy)</td><td>+35.0</td>" in headline
    assert "30.0% (step 0) → 65.0% (step 20)" in headline
    assert "step 20, 1.7 min, 210.00 K tokens" in headline  # time to +20
    assert f"{35 / (101 / 60):.3f}" in headline  # points per minute
    config = page[page.index("<h2>Run</h2>") :]
    assert "qwen3_0p6b" in config and "1x H100" in config
    assert "<td>algo.adv_estimator</td><td>grpo</td>" in config


def test_out_dir_receives_both_files(tmp_path):
    workdir = write_run(tmp_path / "w")
    path = report.write_report(str(workdir), out_dir=str(tmp_path / "out"))
    assert path == str(tmp_path / "out" / "report.html")
    assert (tmp_path / "out" / "report.png").is_file()
    assert not (workdir / "report.html").exists()


def test_run_without_evals_or_kl_still_reports(tmp_path):
    workdir = tmp_path / "w"
    workdir.mkdir()
    rows = []
    for s in range(1, 6):
        r = train_row(s, kl=False)
        del r["actor/ppo_kl"]
        r.update({"critic/vf_loss": 0.25, "critic/values/mean": 0.5})
        r["rollout/policy_version_lag"] = 1.0  # an async run: the lag panel appears
        rows.append(r)
    (workdir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    s = report.summarize_run(report.read_run_rows(str(workdir)))
    for key in ("base_acc", "lift_points", "time_to_points", "points_per_minute", "pass_at_k"):
        assert key not in s
    assert s["steps"] == 5
    page = open(report.write_report(str(workdir)), encoding="utf-8").read()
    assert "points gained" not in page
    assert "held-out accuracy" not in page
    # reward, length, entropy (no KL), timing, throughput, lag
    assert len(images(page)) == 6
    assert "alt='held-out accuracy (%)'" not in page
    assert "alt='policy version lag'" in page
    assert "<td>critic/vf_loss</td><td>0.2500</td>" in page  # PPO metrics in the last-step table
    assert "<h2>Run</h2>" not in page  # no run_info.json


def test_trailing_partial_line_is_ignored(tmp_path):
    workdir = write_run(tmp_path, tail='{"step": 21, "critic/score/mean": 0.')
    rows = report.read_run_rows(str(workdir))
    assert [r["step"] for r in rows] == list(range(0, 21))
    # Step 10's separate eval line merged into its training row.
    assert rows[10]["val-core/math/acc/greedy"] == 0.48 and "timing_s/step" in rows[10]
    assert report.summarize_run(rows)["steps"] == 20


def test_rows_are_sorted_by_step(tmp_path):
    lines = [{"step": 2, "perf/wall_s": 2.0}, {"step": 1, "perf/wall_s": 1.0}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    rows = report.read_run_rows(str(tmp_path))
    assert [r["step"] for r in rows] == [1, 2]


def test_missing_metrics_file_names_the_path(tmp_path):
    missing = tmp_path / "nowhere"
    with pytest.raises(FileNotFoundError, match=re.escape(str(missing / "metrics.jsonl"))):
        report.write_report(str(missing))


@pytest.mark.parametrize(
    "text, match",
    [
        ('{"step": 1}\n{"step": 2, oops}\n{"step": 3}\n', r"metrics.jsonl:2: not valid JSON"),
        ('{"step": 1}\n[1, 2]\n', r"metrics.jsonl:2: expected a JSON object"),
        ('{"loss": 1.0}\n', r"metrics.jsonl:1: 'step' must be an integer"),
        ('{"step": 1.5}\n', r"metrics.jsonl:1: 'step' must be an integer"),
        ('{"step": 1, "a"', r"metrics.jsonl: no complete metrics rows"),
    ],
)
def test_bad_metrics_name_file_and_line(tmp_path, text, match):
    (tmp_path / "metrics.jsonl").write_text(text)
    with pytest.raises(ValueError, match=match):
        report.read_run_rows(str(tmp_path))


def test_bad_run_info_names_the_file(tmp_path):
    workdir = write_run(tmp_path)
    (workdir / "run_info.json").write_text("{not json")
    with pytest.raises(ValueError, match=re.escape(str(workdir / "run_info.json"))):
        report.write_report(str(workdir))


def test_summary_imports_without_matplotlib():
    code = (
        "import sys\n"
        "sys.modules['matplotlib'] = None\n"
        "import mimojax.observe.summary as rs\n"
        "assert 'matplotlib' not in {m.split('.')[0] for m in sys.modules if sys.modules[m]}\n"
        "print(rs.summarize_run([{'step': 1, 'timing_s/step': 2.0}])['step_s'])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip() == "2.0"


def test_phase_order_names_the_trainers_timers():
    # The timing panel stacks phases in PHASE_ORDER; a renamed trainer phase must show up here.
    import mimojax.train.trainer as trainer_module

    train_pkg = Path(trainer_module.__file__).parent
    trainer = "".join(p.read_text() for p in sorted(train_pkg.glob("*.py")))
    phases = set(re.findall(r'timer\("(\w+)"\)', trainer))
    phases |= set(re.findall(r'"timing_s/(\w+)"', trainer)) - {"step"}
    assert phases and phases <= set(report_summary.PHASE_ORDER)


def test_report_reads_what_the_metrics_logger_writes(tmp_path):
    from mimojax.observe.metrics import MetricsLogger

    with MetricsLogger(str(tmp_path), total_steps=2, wandb_mode="disabled", progress=False) as log:
        log.log(0, {"val-core/math/acc/greedy": 0.25, "perf/wall_s": 0.0})
        log.log(1, {"timing_s/step": 1.0, "perf/wall_s": 1.0, "perf/total_num_tokens": 10})
        log.log(2, {"timing_s/step": 1.0, "perf/wall_s": 2.0, "perf/total_num_tokens": 30})
        log.log(2, {"val-core/math/acc/greedy": 0.5})
    assert report.read_run_rows(str(tmp_path)) == rows_by_step(read_metrics(str(tmp_path)))
    s = report.summarize_run(report.read_run_rows(str(tmp_path)))
    assert s["steps"] == 2 and s["total_tokens"] == 30.0
    assert s["lift_points"] == pytest.approx(25.0) and s["eval_tokens"] == 30.0
