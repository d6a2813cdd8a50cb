"""Async modes (mimojax/rollout/async_buffer.py) on the tiny GRPO config: K = 0 equals sync, the
staleness bound holds over slow rollouts under `wait` and `drop`, one_step_off lags exactly one
step, and a kill mid-run resumes from the consumed data position (buffered batches redone).

Each run is 3-4 tiny steps (~10-25 s on 2 shared CPU cores); the two-run tests are `slow`."""

from __future__ import annotations

import time

import jax
import numpy as np
import pytest

from mimojax.config.loader import ConfigError, load_config
from mimojax.observe.metrics import read_metrics
from mimojax.train.trainer import Trainer


@pytest.fixture
def overrides(length_mod_rows):
    return [
        f"data.train_files=('{length_mod_rows}',)",
        "reward.num_workers=0",
        "checkpoint.every_steps=0",
        "eval.at_start=False",
        "eval.at_end=False",
    ]


def _trainer(workdir, overrides, *more, slow_s=0.0):
    trainer = Trainer(
        load_config("configs/grpo_tiny.py", [*overrides, *more]), str(workdir), progress=False
    )
    if slow_s:  # a deliberately slow rollout: the producer, not the update, is the bottleneck
        rollout = trainer._rollout

        def slow(*args, **kwargs):
            time.sleep(slow_s)
            return rollout(*args, **kwargs)

        trainer._rollout = slow
    return trainer


def _rows(workdir):
    return [r for r in read_metrics(str(workdir)) if "critic/score/mean" in r]


def _params(trainer):
    return jax.tree.leaves(jax.device_get(trainer.actor.state.params))


@pytest.mark.slow
def test_async_with_bound_zero_reproduces_sync(tmp_path, overrides):
    """Slow: two 3-step runs with their compiles (~35 s idle, ~70 s on a loaded 2-core box)."""
    sync = _trainer(tmp_path / "sync", overrides)
    sync.train()
    off = _trainer(tmp_path / "async", overrides, "trainer.mode='async'",
                   "trainer.max_off_policy_steps=0")  # fmt: skip
    assert not off.actor.on_policy  # old log-probs recomputed: the loss's off-policy path
    off.train()
    # The two paths differ at rounding level (ratio's denominator: the current log-prob with
    # its gradient stopped vs a recomputed pass), and Adam's first steps divide each gradient
    # by its own magnitude, so a near-zero coordinate can move by a visible fraction of lr:
    # with jax 0.10.2, 1 of 16384 weights differed by 3e-6 after 3 updates of at most
    # 3 x lr = 3e-4. 1e-5 still fails any real divergence (a different sample or update).
    for want, got in zip(_params(sync), _params(off), strict=True):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)
    rows = _rows(tmp_path / "async")
    assert [r["async/staleness/max"] for r in rows] == [0.0, 0.0, 0.0]
    for want, got in zip(_rows(tmp_path / "sync"), rows, strict=True):
        assert got["critic/score/mean"] == want["critic/score/mean"]  # the same samples


def test_one_step_off_lags_exactly_one_step(tmp_path, overrides):
    trainer = _trainer(tmp_path, overrides, "trainer.mode='one_step_off'",
                       "trainer.total_steps=4", slow_s=0.3)  # fmt: skip
    trainer.train()
    rows = _rows(tmp_path)
    assert [r["async/staleness/max"] for r in rows] == [0.0, 1.0, 1.0, 1.0]
    assert [r["async/staleness/min"] for r in rows] == [0.0, 1.0, 1.0, 1.0]
    assert rows[-1]["async/staleness/hist_1"] == 1.0
    assert all(r["async/dropped_stale"] == 0.0 for r in rows)
    assert {"queue/depth", "queue/wait_s", "queue/group_wait_s", "timing_s/gen",
            "async/long_share/trained", "async/long_share/sampled"} <= set(rows[-1])  # fmt: skip
    assert trainer.rollouts.version == 4  # one version per update


@pytest.mark.parametrize("policy, bound, k", [("wait", 2, 1), ("drop", 0, 1), ("wait", 1, 2)])
def test_staleness_bound_holds_with_a_slow_rollout(tmp_path, overrides, policy, bound, k):
    trainer = _trainer(tmp_path, overrides, "trainer.mode='async'", "trainer.total_steps=4",
                       f"trainer.max_off_policy_steps={bound}", f"trainer.sync_every_steps={k}",
                       f"trainer.staleness_policy='{policy}'", slow_s=0.2)  # fmt: skip
    loaded, sync = [], trainer.roles.rollout.sync

    def record(params, version=None):
        loaded.append(version)
        return sync(params, version=version)

    trainer.roles.rollout.sync = record
    trainer.train()
    rows = _rows(tmp_path)
    assert [r["step"] for r in rows] == [1, 2, 3, 4]
    assert max(r["async/staleness/max"] for r in rows) <= bound
    assert all(v % k == 0 for v in loaded)  # weights reach the engine every k updates only
    assert all(r["async/weights_version"] % k == 0 for r in rows)
    assert trainer.rollouts.trainer_version == 4  # while staleness counts every update
    dropped = rows[-1]["async/dropped_stale"]  # groups, cumulative
    if policy == "wait":
        assert dropped == 0.0
        assert max(r["async/staleness/max"] for r in rows) == bound  # it does run ahead
    else:  # the free producer generates during each update: that batch is one version late
        assert dropped > 0
    # every batch drawn was trained or dropped: 2 prompts per batch
    consumed_groups = trainer._consumed[0] * 2
    assert consumed_groups == 4 * 2 + dropped


@pytest.mark.slow
def test_kill_mid_async_and_resume_counts_every_batch_once(tmp_path, overrides):
    """Slow: a killed run and its resume, each compiling (~20 s idle, ~40 s loaded)."""
    more = ("trainer.mode='async'", "trainer.max_off_policy_steps=2", "trainer.total_steps=4",
            "checkpoint.every_steps=2")  # fmt: skip
    trainer = _trainer(tmp_path, overrides, *more)
    log, killed = trainer.logger.log, []

    def log_then_die(step, metrics):
        if step == 3:  # a hard kill after step 3's update: no save on the way out
            killed.append(trainer.rollouts.next_index)
            raise KeyboardInterrupt
        log(step, metrics)

    trainer.logger.log = log_then_die
    with pytest.raises(KeyboardInterrupt):
        trainer.train()
    assert killed and killed[0] >= 3  # the producer had drawn past the checkpoint at step 2
    resumed = _trainer(tmp_path, overrides, *more)
    assert resumed.step == 2 and resumed._consumed[0] == 2
    assert resumed.data_iter.get_state()["offset"] == 2 * 2  # consumed, not drawn
    resumed.train()
    rows = _rows(tmp_path)
    assert [r["step"] for r in rows] == [1, 2, 3, 4]  # each step's row once
    assert resumed._consumed[0] == 4
    state = resumed.checkpointer.latest_meta()[1]
    assert state["async_batches"] == 4 and state["data"]["offset"] == 4 * 2
    assert state["policy_version"] == 4


@pytest.mark.parametrize(
    "more, match",
    [
        (("trainer.mode='later'",), "trainer.mode"),
        (("trainer.mode='async'", "trainer.max_off_policy_steps=-1"), "max_off_policy_steps"),
        (("trainer.mode='async'", "trainer.staleness_policy='skip'"), "staleness_policy"),
        (("trainer.mode='one_step_off'", "trainer.max_off_policy_steps=3"), "exactly one"),
        (("trainer.sync_every_steps=2",), "needs trainer.mode = 'async'"),
        (("trainer.mode='async'", "trainer.sync_every_steps=0"), "sync_every_steps: must be"),
        (("trainer.mode='async'", "trainer.sync_every_steps=3"), "must be >= 2"),
        (("trainer.mode='async'", "trainer.long_response_tokens=-1"), "long_response_tokens"),
        (("trainer.mode='one_step_off'", "trainer.partial_rollouts=True"), "partial_rollouts"),
        (("trainer.flow='stream'",), "'stream' needs trainer.mode"),
        (("trainer.mode='async'", "trainer.flow='pipe'"), "trainer.flow"),
    ],
)
def test_async_config_errors_name_the_key(overrides, more, match):
    from mimojax.config.validate import validate

    with pytest.raises(ConfigError, match=match):
        validate(load_config("configs/grpo_tiny.py", [*overrides, *more]))
