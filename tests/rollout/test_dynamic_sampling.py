"""DAPO dynamic sampling: which groups a step keeps, in what order, and the trainer using it."""

from __future__ import annotations

import json
import sys
from types import SimpleNamespace

import jax
import numpy as np
import pytest

from mimojax.config.loader import ConfigError, load_config, validate
from mimojax.observe.metrics import Timer, read_metrics
from mimojax.rollout.dynamic_sampling import informative, sample_groups, sample_step
from mimojax.rollout.trajectory import Trajectory
from mimojax.train.trainer import Trainer
from tests.train.conftest import ROOT


def _result(score, valid=True):
    return SimpleNamespace(score=score, valid=valid)


def _traj(group, sample, example, finish="stop"):
    return Trajectory(
        prompt_ids=[1], response_ids=[2], rollout_logprobs=[0.0], response_mask=[1],
        policy_version=0, finish_reason=finish, group=group, sample=sample, example=example,
    )  # fmt: skip


class ScriptedSource:
    """Data, generation and grading of prompts named by their group's scores: prompt k of the
    data is `SCORES[k]`, its n samples score those values."""

    def __init__(self, scores_per_prompt, batch_size, cut_off=()):
        self.scores, self.batch_size, self.pos, self.gen_calls = (
            scores_per_prompt,
            batch_size,
            0,
            [],
        )
        self.cut_off = set(cut_off)  # (prompt k, sample): finished by the token budget

    def draw(self):
        batch = [{"k": k} for k in range(self.pos, self.pos + self.batch_size)]
        self.pos += self.batch_size
        return batch

    def generate(self, examples, g):
        self.gen_calls.append(g)
        n = len(self.scores[0])
        return [
            _traj(i, j, ex, "length" if (ex["k"], j) in self.cut_off else "stop")
            for i, ex in enumerate(examples)
            for j in range(n)
        ]

    def score(self, trajs):
        return [_result(*self.scores[t.example["k"]][t.sample]) for t in trajs]


V = [(0.0,), (1.0,)]  # a group whose two samples differ
S = [(1.0,), (1.0,)]  # one whose samples agree (no signal)
F = [(0.0, False), (0.0, False)]  # every sample an infra failure


def _run(scores, batch_size=2, max_batches=4):
    src = ScriptedSource(scores, batch_size)
    out = sample_step(src.draw, src.generate, src.score, batch_size=batch_size,
                      max_num_gen_batches=max_batches)  # fmt: skip
    return src, out


def test_informative_rule_matches_the_group_filter():
    assert informative([_result(0.0), _result(1.0)])
    assert not informative([_result(1.0), _result(1.0)])
    assert informative([_result(1.0), _result(0.0, valid=False)])  # one valid sample: kept
    assert not informative([_result(0.0, valid=False), _result(1.0, valid=False)])
    assert not informative([_result(0.5), _result(0.5), _result(1.0, valid=False)])


def test_a_success_cut_off_by_the_budget_scores_zero_when_truncated_responses_is_zero():
    right_wrong = [_result(1.0), _result(0.0)]
    assert informative(right_wrong)  # as graded
    assert not informative(right_wrong, [True, False])  # the only success was cut off
    assert informative(right_wrong, [False, True])  # a cut-off failure scores 0 either way
    # In a step: prompt 0's success (sample 1) ran out of tokens, prompt 1's did not.
    for zero, kept in ((False, [0, 1]), (True, [1, 2])):
        src = ScriptedSource([V, V, V, V], 2, cut_off={(0, 1)})
        out = sample_step(src.draw, src.generate, src.score, batch_size=2,
                          max_num_gen_batches=2, zero_truncated=zero)  # fmt: skip
        assert [ex["k"] for ex in out.examples] == kept
        assert src.gen_calls == ([0] if not zero else [0, 1])


def test_draws_until_enough_informative_groups_and_keeps_draw_order():
    src, out = _run([S, V, S, S, V, V, S, V])
    assert src.gen_calls == [0, 1, 2]  # batches (S,V) (S,S) (V,V): 3 informative after 3
    assert [ex["k"] for ex in out.examples] == [1, 4]
    # renumbered 0..1, samples in order, results aligned with trajectories
    assert [(t.group, t.sample, t.example["k"]) for t in out.trajs] == [
        (0, 0, 1), (0, 1, 1), (1, 0, 4), (1, 1, 4)]  # fmt: skip
    assert [r.score for r in out.results] == [0.0, 1.0, 0.0, 1.0]
    m = out.metrics
    assert m["train/num_gen_batches"] == 3 and m["train/groups_drawn"] == 6
    assert m["train/groups_informative"] == 3 and m["train/groups_short"] == 0
    assert m["train/kept_drawn_ratio"] == pytest.approx(2 / 6)
    assert m["train/rollouts_per_kept_group"] == pytest.approx(6 * 2 / 2)


def test_one_batch_comes_back_as_drawn():
    src, out = _run([S, V, F, S], batch_size=4, max_batches=1)
    assert [ex["k"] for ex in out.examples] == [0, 1, 2, 3]
    assert [t.group for t in out.trajs] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert out.metrics["train/groups_short"] == 3


def test_a_short_step_is_filled_with_the_first_uninformative_groups():
    src, out = _run([S, F, V, S, S, S, S, S], batch_size=2, max_batches=2)
    assert src.gen_calls == [0, 1]  # the bound holds
    assert [ex["k"] for ex in out.examples] == [0, 2]  # V, then the first spare (S), draw order
    assert out.metrics["train/groups_short"] == 1


def test_bad_bound_is_an_error():
    with pytest.raises(ValueError, match="max_num_gen_batches"):
        _run([V, V], max_batches=0)


# ------------------------------------------------------------------ in the trainer


@pytest.fixture
def half_constant_rows(tmp_path, monkeypatch):
    """16 prompts; the odd ones score 1.0 for every sample (groups without signal)."""
    monkeypatch.setattr(sys, "path", [*sys.path, ROOT])
    path = tmp_path / "rows.jsonl"
    with open(path, "w") as f:
        for n in range(16):
            row = {
                "prompt": f"Count to {n}.",
                "ground_truth": "",
                "env": "tests.reward_fixtures:const_or_length_mod",
                "extra": {"const": n % 2},
            }
            f.write(json.dumps(row) + "\n")  # fmt: skip
    return path


TINY = "configs/grpo_tiny.py"


def _tiny(rows, workdir, *overrides):
    opts = [f"data.train_files=('{rows}',)", "eval.at_start=False", "eval.at_end=False",
            "algorithm.dynamic_sampling.enable=True", "data.difficulty.enable=True"]  # fmt: skip
    opts += overrides
    return Trainer(load_config(TINY, opts), str(workdir), progress=False)


def test_trainer_trains_only_informative_groups_and_resumes_bitwise(half_constant_rows, tmp_path):
    full = _tiny(half_constant_rows, tmp_path / "full", "trainer.total_steps=3")
    full.train()
    rows = [r for r in read_metrics(str(tmp_path / "full")) if "critic/score/mean" in r]
    for r in rows:
        assert r["train/groups_short"] == 0.0
        assert r["batch/groups_filtered_frac"] == 0.0  # every trained group carries signal
        assert r["train/num_gen_batches"] >= 1.0
    assert sum(r["train/groups_drawn"] for r in rows) > 3 * 2  # the constant ones were skipped
    assert rows[0]["data/difficulty/unseen"] == 1.0  # difficulty-aware sampling reports too
    assert rows[-1]["data/difficulty/prompts_seen"] > 2.0
    # Stop after step 1 (checkpointed), resume to 3: same data position, same groups and weights.
    cut = tmp_path / "cut"
    _tiny(half_constant_rows, cut, "trainer.total_steps=1", "checkpoint.every_steps=1").train()
    resumed = _tiny(half_constant_rows, cut, "trainer.total_steps=3")
    resumed.train()
    params = [jax.tree.leaves(jax.device_get(t.actor.state.params)) for t in (full, resumed)]
    for a, b in zip(*params, strict=True):
        np.testing.assert_array_equal(a, b)
    cut_rows = [r for r in read_metrics(str(cut)) if "critic/score/mean" in r]
    for key in ("critic/score/mean", "train/groups_drawn", "actor/pg_loss",
                "data/difficulty/mean_success_rate"):  # fmt: skip
        assert [r[key] for r in cut_rows] == [r[key] for r in rows], key


def test_config_errors_name_the_key():
    bad_bound = load_config(TINY, ["algorithm.dynamic_sampling.max_num_gen_batches=0"])
    with pytest.raises(ConfigError, match="algorithm.dynamic_sampling.max_num_gen_batches"):
        validate(bad_bound)
    no_groups = ["algorithm.dynamic_sampling.enable=True", "rollout.n=1"]
    no_groups.append("algorithm.adv_estimator=reinforce_plus_plus")
    with pytest.raises(ConfigError, match="algorithm.dynamic_sampling.enable"):
        validate(load_config(TINY, no_groups))


def test_one_batch_step_reports_how_many_groups_carry_signal():
    """Without dynamic sampling the step is one batch; it still logs its informative groups."""
    src, last = ScriptedSource([S, V, F, V], 4), {}

    def rollout_fn(examples, n, sampling, request_id_base):
        last["trajs"] = src.generate(examples, 0)
        return last["trajs"]

    pool = SimpleNamespace(score=lambda items: src.score(last["trajs"]))
    spec = SimpleNamespace(dynamic_sampling=False, max_num_gen_batches=3, batch_size=4, n=2,
                           advantage=SimpleNamespace(truncated="keep"))  # fmt: skip

    class Data:
        def __next__(self):  # grader_item() reads env and ground_truth
            return [{**ex, "env": "scripted", "ground_truth": ""} for ex in src.draw()]

        def record(self, trajs, results):
            return {}  # difficulty-aware sampling off

    out = sample_groups(rollout_fn, None, pool, Data(), spec, 0, Timer(), lambda: None)
    assert out.metrics == {"train/groups_informative": 2.0}  # V twice; S and F carry none
    assert [ex["k"] for ex in out.examples] == [0, 1, 2, 3]
