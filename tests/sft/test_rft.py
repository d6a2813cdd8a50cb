"""RFT warm-up (`mimojax sft --from-rollouts`): only graded-correct answers become chat rows, the
fine-tuning mask covers only their assistant tokens, the chained recipe runs both phases, and the
hard-arithmetic recipes load. Tiny random model; a scripted grader stands in for the math one
(the random model never answers arithmetic right)."""

from __future__ import annotations

import json

import pytest
from ml_collections import ConfigDict

from mimojax.cli.main import main
from mimojax.cli.sft import rft_settings, run_rft
from mimojax.config.loader import load_config
from mimojax.config.validate import validate
from mimojax.data.prompts import DataError
from mimojax.models.loader import load_model
from mimojax.observe.metrics import read_metrics
from mimojax.rewards.pool import REWARD_FUNCTIONS, RewardResult, register_reward
from mimojax.rollout.trajectory import Trajectory
from mimojax.sft.chat_sft import tokenize_chat
from mimojax.sft.rft import keep_correct
from mimojax.sft.rft_checks import worked_answer

ENV = "rft_scripted_test"


def _even(text: str) -> bool:
    return bool(text.strip()) and len(text.strip()) % 2 == 0


if ENV not in REWARD_FUNCTIONS:

    @register_reward(ENV)
    def _scripted(response, ground_truth, extra):
        """1.0 for a non-empty answer of even length: about half the random model's answers."""
        return 1.0 if _even(response) else 0.0


def _traj(group, sample, text, prompt="p?"):
    ex = {"prompt": prompt, "ground_truth": "x", "env": ENV}
    return Trajectory([1], [2], [0.0], [1], 0, "stop", group, sample, ex, response_text=text)


def test_keep_correct_filters_dedupes_and_caps():
    texts = ["a", "b", "b", "c", "d", "e", "f"]
    results = [RewardResult(1.0, True), RewardResult(0.0, True)]  # "a" right, "b" wrong
    results += [RewardResult(1.0, True), RewardResult(1.0, False)]  # dup "b" right; infra fail
    results += [RewardResult(1.0, True)] * 3
    trajs = [_traj(0, i, t) for i, t in enumerate(texts)]
    trajs += [_traj(1, 0, "z", prompt="q?"), _traj(1, 1, " z ", prompt="q?")]
    results += [RewardResult(1.0, True), RewardResult(1.0, True)]
    rows, stats = keep_correct(trajs, results, max_per_prompt=3, system_prompt="sys")
    answers = [r["messages"][-1]["content"] for r in rows]
    assert answers == ["a", "b", "d", "z"]  # "c": infra failure; "e", "f": over the cap
    assert rows[0]["messages"][0] == {"role": "system", "content": "sys"}
    assert rows[-1]["messages"][1] == {"role": "user", "content": "q?"}
    assert stats == {
        "samples": 9, "correct": 7, "unworked": 0, "duplicates": 1, "prompts_solved": 2
    }  # fmt: skip


def test_keep_worked_drops_lucky_hits_and_prefers_shortest():
    """keep="worked" keeps answers whose shown equations hold and end on the truth;
    prefer_shortest takes a prompt's shortest distinct answers first."""
    texts = [
        "Jo has 7 + 3 = 10 shells. Shells = 7 + 1",  # graded right by the last number: lucky
        "She has 10 - 9 = 1 shell.",  # worked
        "1",  # right, but shows no arithmetic
        "Jo has 10 shells, gives 9: 10 - 9 = 1. So Jo has 1 shell now.",  # worked, longer
        "2 + 3 = 6, so 10 - 9 = 1",  # ends right, one false equation
    ]
    trajs = [_traj(0, i, t) for i, t in enumerate(texts)]
    for t in trajs:
        t.example["ground_truth"] = "1"
    results = [RewardResult(1.0, True)] * len(texts)
    rows, stats = keep_correct(
        trajs, results, max_per_prompt=1, keep="worked", prefer_shortest=True
    )
    assert [r["messages"][-1]["content"] for r in rows] == ["She has 10 - 9 = 1 shell."]
    assert stats["correct"] == 5 and stats["unworked"] == 3 and stats["prompts_solved"] == 1
    rows, _ = keep_correct(trajs, results, max_per_prompt=1, prefer_shortest=True)
    assert [r["messages"][-1]["content"] for r in rows] == ["1"]


@pytest.mark.parametrize(
    ("text", "truth", "want"),
    [
        ("38 + 27 = 65", "65", True),
        ("2 * 9 = 18 and 18 / 3 = 6", "6", True),
        ("3 x 8 = 24", "24", True),
        ("1,200 + 34 = 1,234", "1234", True),
        ("7 + 3 = 11", "11", False),  # the equation is false
        ("7 + 3 = 10", "3", False),  # true, but not the truth
        ("The answer is 10.", "10", False),  # no arithmetic shown
        ("8 / 0 = 0", "0", False),
    ],
)
def test_worked_answer_cases(text, truth, want):
    assert worked_answer(text, truth) is want


def test_rft_settings_rejects_unknown_keep_rule():
    cfg = ConfigDict({"sft": {"rft": {"keep": "lucky"}}})
    with pytest.raises(DataError, match=r"sft\.rft\.keep"):
        rft_settings(cfg)


def _train_file(tmp_path, n=4):
    f = tmp_path / "train.jsonl"
    rows = [{"prompt": f"Say something {i}.", "ground_truth": "x", "env": ENV} for i in range(n)]
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return f


def _tiny_rft_config(tmp_path):
    return load_config(
        "configs/rft_grpo_arith_hard_smollm2.py:runlocal,model=tiny-random-llama",
        [
            f"data.train_files=('{_train_file(tmp_path)}',)",
            "reward.num_workers=0",  # the scripted grader lives in this process
            "roles.actor.devices=(0,)",
            "sft.rft.n=6",
        ],
    )


def test_rft_keeps_only_graded_correct_and_trains_on_assistant_tokens(tmp_path):
    cfg = _tiny_rft_config(tmp_path)
    metrics = run_rft(cfg, str(tmp_path / "run"), progress=False, log=lambda m: None)
    rows = [json.loads(line) for line in open(tmp_path / "run" / "rft_data.jsonl")]
    assert rows and metrics["rft/rows"] == len(rows) <= 4 * 4
    assert metrics["rft/samples"] == 4 * 6 and metrics["rft/correct"] >= len(rows)
    stats = json.loads((tmp_path / "run" / "rft_stats.json").read_text())
    assert 0 < stats["sample_s"] and 0 < stats["sft_s"] <= stats["warmup_s"]  # phase wall times
    assert metrics["rft/warmup_s"] == stats["warmup_s"]
    _, tok = load_model("tiny-random-llama")
    for row in rows:
        answer = row["messages"][-1]
        assert answer["role"] == "assistant" and _even(answer["content"])
        assert row["messages"][0]["content"].startswith("Say something")
        ids, mask = tokenize_chat(tok, row["messages"])
        trained = tok.decode([i for i, m in zip(ids, mask) if m])
        assert answer["content"].strip() in trained and "Say something" not in trained
    assert len([r for r in read_metrics(str(tmp_path / "run")) if "sft/loss" in r]) == 2
    assert (tmp_path / "run" / "hf" / "config.json").exists()


def test_rft_with_no_correct_answer_says_which_keys_to_raise(tmp_path):
    cfg = _tiny_rft_config(tmp_path)
    f = tmp_path / "math.jsonl"
    f.write_text(json.dumps({"prompt": "1+1?", "ground_truth": "2", "env": "math"}) + "\n")
    cfg.data.train_files = (str(f),)
    with pytest.raises(DataError, match=r"no graded-correct .* sft\.rft\.n"):
        run_rft(cfg, str(tmp_path / "run"), progress=False, log=lambda m: None)


def test_bad_rft_knob_names_the_key():
    cfg = load_config("configs/rft_grpo_arith_hard_smollm2.py:runlocal", ["sft.rft.n=0"])
    with pytest.raises(DataError, match=r"sft\.rft\.n must be >= 1"):
        rft_settings(cfg)
    assert rft_settings(load_config("configs/grpo_tiny.py")).n == 16  # no sft group: defaults


def test_chained_recipe_runs_both_phases(tmp_path, capsys):
    work = tmp_path / "run"
    argv = [
        "sft", "--from-rollouts", "--then-train",
        "--config", "configs/rft_grpo_arith_hard_smollm2.py:runlocal,model=tiny-random-llama",
        "--workdir", str(work),
        f"--config.data.train_files=('{_train_file(tmp_path)}',)",
        "--config.reward.num_workers=0", "--config.roles.actor.devices=(0,)",
    ]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "rft: wrote" in out and f"RL from {work / 'hf'}" in out
    rl = [r for r in read_metrics(str(work / "rl")) if "critic/score/mean" in r]
    assert [r["step"] for r in rl] == [1, 2]
    info = json.loads((work / "rl" / "run_info.json").read_text())
    assert str(work / "hf") in json.dumps(info)


@pytest.mark.parametrize(
    "spec",
    [
        "configs/grpo_arith_hard_smollm2.py",
        "configs/grpo_arith_hard_smollm2.py:passk,seed=3,minutes=2",
        "configs/grpo_passk_arith_hard_smollm2.py",
        "configs/rft_grpo_arith_hard_smollm2.py",
    ],
)
def test_hard_recipes_load_and_validate(spec):
    for devices in (1, 8):
        cfg = validate(load_config(spec), num_devices=devices)
        assert cfg.data.train_files[0].endswith("hard_arith_train.jsonl")
        assert cfg.data.eval_files[0].endswith("hard_arith_test.jsonl")
    passk = "passk" in spec
    assert cfg.algorithm.adv_estimator == ("grpo_passk" if passk else "grpo")
    assert cfg.algorithm.clip_ratio_high > cfg.algorithm.clip_ratio_low  # clip-higher


def test_hard_split_is_fixed_and_disjoint(tmp_path):
    from mimojax.envs.math.tasks import DATA_DIR, write_splits

    write_splits(tmp_path, "hard_arith")
    for name in ("hard_arith_train.jsonl", "hard_arith_test.jsonl"):
        assert (tmp_path / name).read_text() == (DATA_DIR / name).read_text()
    train = {json.loads(x)["prompt"] for x in open(DATA_DIR / "hard_arith_train.jsonl")}
    test = {json.loads(x)["prompt"] for x in open(DATA_DIR / "hard_arith_test.jsonl")}
    assert not train & test and len(test) == 200
