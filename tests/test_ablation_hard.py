"""scripts/ablation_hard.py: minutes to +10/+25, below-base, rollouts per signal group and the
RFT time offset, from hand-written metrics.jsonl files (numbers computed by hand below)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("ablation_hard", ROOT / "scripts/ablation_hard.py")
ah = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ah)
KEY = ah.KEY


def _write(workdir: Path, rows: list[dict], batch: str = "32 prompts x 8 samples") -> None:
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (workdir / "run_info.json").write_text(json.dumps({"batch": batch}))


def test_dynamic_run_minutes_to_lift_and_rollouts(tmp_path):
    _write(
        tmp_path,
        [
            {"step": 0, "perf/wall_s": 0.0, KEY: 0.10},
            {"step": 1, "timing_s/step": 9.0, "actor/entropy": 0.8, "train/groups_drawn": 96.0,
             "train/groups_informative": 20.0, "batch/groups": 32.0},
            {"step": 1, "perf/wall_s": 300.0, KEY: 0.08},  # below the base rate
            {"step": 2, "timing_s/step": 9.0, "actor/entropy": 0.5, "train/groups_drawn": 64.0,
             "train/groups_informative": 40.0, "batch/groups": 32.0},
            {"step": 2, "perf/wall_s": 600.0, KEY: 0.21},  # +11 points at 10 min
        ],
    )  # fmt: skip
    r = ah.summarize(str(tmp_path))
    assert (r["base"], r["end"], r["best"]) == (0.10, 0.21, 0.21)
    assert r["min_to_10"] == 10.0 and r["min_to_25"] is None
    assert r["below_base"] is True and r["steps"] == 2
    # (96 + 64) groups x 8 rollouts over (20 + 32) groups with signal (40 capped at the batch)
    assert abs(r["rollouts_per_signal_group"] - 160 * 8 / 52) < 1e-12
    assert r["entropy_first_last"] == (0.8, 0.5)


def test_masked_and_plain_runs(tmp_path):
    rows = [
        {"step": 0, "perf/wall_s": 0.0, KEY: 0.10},
        {"step": 1, "timing_s/step": 9.0, "actor/entropy": 0.7, "batch/groups": 32.0,
         "batch/groups_kept": 4.0},
        {"step": 2, "timing_s/step": 9.0, "batch/groups": 32.0, "batch/groups_kept": 0.0},
        {"step": 2, "perf/wall_s": 60.0, KEY: 0.35},
    ]  # fmt: skip
    _write(tmp_path / "mask", rows, batch="32 prompts x 4 samples")
    r = ah.summarize(str(tmp_path / "mask"))
    # step 2 masked every group: no update, but its rollouts count (4 samples per group)
    assert r["rollouts_per_signal_group"] == 2 * 32 * 4 / 4 and r["steps"] == 2
    assert r["min_to_10"] == r["min_to_25"] == 1.0 and r["below_base"] is False
    _write(tmp_path / "plain", [rows[0], {"step": 1, "timing_s/step": 9.0}, rows[3]])
    assert ah.summarize(str(tmp_path / "plain"))["rollouts_per_signal_group"] is None
    # a plain run that logs its groups with signal: 32 prompts per step from run_info.json
    signal = [{"step": 1, "timing_s/step": 9.0, "train/groups_informative": 8.0}]
    _write(tmp_path / "plain2", [rows[0], *signal, rows[3]], batch="32 prompts x 4 samples")
    assert ah.summarize(str(tmp_path / "plain2"))["rollouts_per_signal_group"] == 32 * 4 / 8


def test_rft_run_counts_the_warm_up_and_takes_the_base_rate(tmp_path):
    (tmp_path / "rft_stats.json").write_text(json.dumps({"warmup_s": 600.0}))
    _write(
        tmp_path / "rl",
        [
            {"step": 0, "perf/wall_s": 0.0, KEY: 0.19},
            {"step": 1, "timing_s/step": 9.0, "actor/entropy": 0.4},
            {"step": 1, "perf/wall_s": 300.0, KEY: 0.36},
        ],
    )
    r = ah.summarize(str(tmp_path), base=0.09)
    assert r["base"] == 0.09 and r["evals"] == [(10.0, 0.19), (15.0, 0.36)]
    assert r["min_to_10"] == 10.0 and r["min_to_25"] == 15.0


def test_commands_name_the_variant_configs():
    cmd = ah.command("plain", 1, 15.0, "W")
    assert "configs/grpo_arith_hard_smollm2.py:seed=1,minutes=15.0" in cmd
    assert cmd[-1] == "--config.algorithm.filter_groups=False"
    assert cmd[cmd.index("--workdir") + 1] == "W"
    assert ah.command("rft", 0, 5.0, "W")[3:6] == ["sft", "--from-rollouts", "--then-train"]


@pytest.mark.parametrize("variant", sorted(ah.VARIANTS))
def test_every_variant_command_is_a_valid_config(variant):
    from mimojax.cli.main import split_config_overrides
    from mimojax.config.loader import load_config
    from mimojax.config.validate import validate

    cmd = ah.command(variant, 2, 15.0, "W")
    spec = cmd[cmd.index("--config") + 1]
    _, overrides = split_config_overrides(cmd)  # as `mimojax train` reads them
    cfg = validate(load_config(spec, overrides), num_devices=1)
    assert cfg.trainer.seed == 2 and cfg.trainer.time_limit_minutes == 15.0
    if variant == "overlong":  # the penalty starts 16 tokens before the 48-token cap
        ob = cfg.reward.overlong_buffer
        assert ob.enable and cfg.rollout.max_new_tokens - ob.len == 32
    if variant.startswith("trunc_"):
        assert cfg.algorithm.truncated_responses == variant.split("_")[1]
    if variant.startswith("trunc_zero_b8"):  # one update of 8 groups a step
        assert cfg.data.batch_size == cfg.trainer.mini_batch_size == 8
    assert cfg.rollout.temperature == (0.5 if variant.endswith("_t05") else 0.7)
    assert cfg.rollout.n == (16 if variant.endswith("_n16") else 8)
    assert cfg.algorithm.entropy_control.target == (0.3 if variant.endswith("_ent") else 0.0)


def test_a_run_without_its_group_size_is_an_error(tmp_path):
    _write(tmp_path, [{"step": 0, "perf/wall_s": 0.0, KEY: 0.1}, {"step": 1, "timing_s/step": 1.0}])
    (tmp_path / "run_info.json").write_text(json.dumps({"batch": "?"}))
    with pytest.raises(SystemExit, match="run_info.json"):
        ah.summarize(str(tmp_path))


def test_train_rows_writes_the_first_rows_and_every_variant_trains_on_them(tmp_path):
    path = ah.write_first_rows(48, str(tmp_path))
    lines = open(path).read().splitlines()
    assert len(lines) == 48 and json.loads(lines[0])["ground_truth"] == "8"
    assert (
        ah.command("difficulty", 0, 15.0, "W", path)[-1] == f"--config.data.train_files=('{path}',)"
    )
    with pytest.raises(SystemExit, match="--train-rows"):
        ah.write_first_rows(0, str(tmp_path))
