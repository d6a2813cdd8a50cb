"""Stream flow (mimojax/rollout/stream.py) on the tiny config with a scripted long tail: sample 0
of every prompt writes 16 tokens, the others 2. GAE (+ critic) trains on trajectories as they
finish: nothing waits for its group (`queue/group_wait_s` == 0). GRPO trains whole groups: each
waits for its long member (> 0). A kill mid-run resumes without counting a sample twice."""

from __future__ import annotations

import dataclasses

import pytest

import mimojax.train.trainer as trainer_module
from mimojax.config.loader import load_config
from mimojax.observe.metrics import read_metrics
from mimojax.rollout.stream import stream_rollouts
from mimojax.train.trainer import Trainer

GAE = ("algorithm.adv_estimator=gae", "model.value_head=True", "critic.lr=1e-4")


def long_tail(sampling):
    """Per-sample sampling: sample 0 of each prompt is long (16 tokens), the rest short (2)."""

    def sampling_for(example, sample):
        return dataclasses.replace(sampling, max_new_tokens=16 if sample == 0 else 2,
                                   ignore_eos=True)  # fmt: skip

    return sampling_for


def _run(workdir, rows, monkeypatch, *more, kill_at=None, seen=None):
    """A stream-flow trainer with the scripted tail; `seen` collects each step's trained
    (batch, group, sample) sources; `kill_at`: a hard stop at that step's metrics line."""
    cfg = load_config("configs/grpo_tiny.py", [
        f"data.train_files=('{rows}',)", "reward.num_workers=0", "checkpoint.every_steps=0",
        "eval.at_start=False", "eval.at_end=False", "trainer.mode='async'",
        "trainer.flow='stream'", "trainer.max_off_policy_steps=2", "trainer.total_steps=3",
        *more,
    ])  # fmt: skip
    trainer = Trainer(cfg, str(workdir), progress=False)
    scripted = long_tail(trainer.roles.rollout.sampling)

    def start(*args):
        rollouts = stream_rollouts(*args, sampling_for=scripted)
        if seen is not None:
            get = rollouts.get

            def recording_get(*a, **k):
                produced, queue = get(*a, **k)
                seen.append([t.stats["source"] for t in produced.sampled.trajs])
                return produced, queue

            rollouts.get = recording_get
        return rollouts

    monkeypatch.setattr(trainer_module, "stream_rollouts", start)
    if kill_at is not None:
        log = trainer.logger.log

        def log_then_die(step, metrics):
            if step == kill_at:  # after the update, before the line and the checkpoint
                raise KeyboardInterrupt
            log(step, metrics)

        trainer.logger.log = log_then_die
    return trainer


def _rows(workdir):
    return [r for r in read_metrics(str(workdir)) if "critic/score/mean" in r]


def test_trajectories_flow_for_gae_and_groups_wait_for_grpo(tmp_path, length_mod_rows,
                                                           monkeypatch):  # fmt: skip
    _run(tmp_path / "gae", length_mod_rows, monkeypatch, *GAE).train()
    _run(tmp_path / "grpo", length_mod_rows, monkeypatch).train()
    gae, grpo = _rows(tmp_path / "gae"), _rows(tmp_path / "grpo")
    assert [r["step"] for r in gae] == [r["step"] for r in grpo] == [1, 2, 3]
    assert all(r["queue/group_wait_s"] == 0.0 for r in gae)
    assert all(r["queue/group_wait_s"] > 0.0 for r in grpo)
    # GRPO: whole groups of 4 (one long, three short); GAE: the first 8 to finish, so mostly
    # short ones, from more prompts than a step's 2
    assert all(r["async/stream/groups_per_step"] == 2 for r in grpo)
    assert all(r["response_length/mean"] == pytest.approx((16 + 3 * 2) / 4) for r in grpo)
    assert gae[0]["async/stream/groups_per_step"] > 2
    assert gae[0]["response_length/mean"] < grpo[0]["response_length/mean"]
    for r in gae + grpo:
        assert r["async/staleness/max"] <= 2


@pytest.mark.slow
def test_kill_mid_stream_and_resume_counts_every_sample_once(tmp_path, length_mod_rows,
                                                            monkeypatch):  # fmt: skip
    """Slow: a killed run and its resume (~30 s idle)."""
    more = (*GAE, "checkpoint.every_steps=1", "trainer.total_steps=4")
    before, after = [], []
    trainer = _run(tmp_path, length_mod_rows, monkeypatch, *more, kill_at=3, seen=before)
    with pytest.raises(KeyboardInterrupt):
        trainer.train()
    meta = trainer.checkpointer.latest_meta()[1]
    first_open = meta["async_batches"]
    assert meta["data"]["offset"] == first_open * 2  # the position before the first open batch
    done = {(int(i), *x) for i, v in meta.get("async_done", {}).items() for x in v}
    trained = {tuple(s) for step in before[:2] for s in step}  # steps 1, 2: checkpointed
    assert len(trained) == 2 * 8
    assert {s for s in trained if s[0] >= first_open} <= done
    resumed = _run(tmp_path, length_mod_rows, monkeypatch, *more, seen=after)
    assert resumed.step == 2 and resumed._consumed[0] == first_open
    resumed.train()
    assert [r["step"] for r in _rows(tmp_path)] == [1, 2, 3, 4]  # each step's row once
    again = [tuple(s) for step in after for s in step]
    assert len(again) == len(set(again)) == 2 * 8
    assert not trained & set(again)  # no sample trained before the kill is trained again
    assert all(s[0] >= first_open for s in again)
