"""Async diagnostics without a model: the short-task bias by hand, weight sync every k updates
with exact staleness (a fake producer on the real buffer), measured group waits. Seconds."""

from __future__ import annotations

import time
from types import SimpleNamespace

import numpy as np
import pytest

from mimojax.rollout.async_buffer import AsyncRollouts, group_wait_s
from mimojax.rollout.async_metrics import async_step_metrics, long_share_metrics, trained_lengths


def _traj(length, group=0, version=0, wall_s=None):
    stats = {} if wall_s is None else {"wall_s": wall_s}
    return SimpleNamespace(response_ids=[1] * length, group=group, policy_version=version,
                           stats=stats)  # fmt: skip


def test_long_share_by_hand():
    # sampled (dropped batch + drawn): 2 4 6 8 10 12 -> median 7; long = 8 10 12: 3 / 6
    # trained: 2 4 8 (the 12 had no loss token) -> long = 8: 1 / 3
    trajs = [_traj(n) for n in (2, 4, 8, 12)]
    mask_BxT = np.zeros((4, 16))
    mask_BxT[[0, 1, 2], 3] = 1
    assert trained_lengths(trajs, mask_BxT) == [2, 4, 8]
    produced = SimpleNamespace(dropped_lengths=[6, 10],
                               sampled=SimpleNamespace(drawn_lengths=[2, 4, 8, 12]))  # fmt: skip
    m = async_step_metrics(produced, trajs, [1.0, 0.0, 1.0, 0.0], mask_BxT, 3, 1)
    assert m["async/long_share/threshold"] == 7.0
    assert m["async/long_share/sampled"] == 0.5
    assert m["async/long_share/trained"] == pytest.approx(1 / 3)
    assert m["async/long_share/bias"] == pytest.approx(1 / 3 - 1 / 2)
    # a fixed threshold: long = above 9 tokens: sampled 10 12 of 6, trained none of 3
    m = long_share_metrics([2, 4, 6, 8, 10, 12], [2, 4, 8], threshold=9)
    assert m["async/long_share/sampled"] == pytest.approx(2 / 6)
    assert m["async/long_share/trained"] == 0.0
    assert long_share_metrics([], [1]) == {}


def test_group_wait_is_measured_when_trajectories_carry_finish_times():
    # group 0 finishes at 1.0 and 3.5 s, group 1 at 2.0 and 2.0: mean wait (2.5 + 0) / 2
    trajs = [_traj(5, 0, wall_s=1.0), _traj(5, 0, wall_s=3.5), _traj(9, 1, wall_s=2.0),
             _traj(3, 1, wall_s=2.0)]  # fmt: skip
    assert group_wait_s(trajs, gen_s=100.0) == pytest.approx(1.25)
    # without finish times: estimated from lengths (longest = all of gen_s)
    assert group_wait_s([_traj(5, 0), _traj(10, 0)], gen_s=4.0) == pytest.approx(2.0)


def _fake_producer(lengths=(3, 5)):
    def produce(index):
        sampled = SimpleNamespace(trajs=[_traj(n, group=g) for g, n in enumerate(lengths)],
                                  drawn_lengths=list(lengths))  # fmt: skip
        return sampled, {"offset": index + 1}, {"timing_s/gen": 0.0}

    return produce


@pytest.mark.parametrize("k, bound, policy", [(2, 1, "wait"), (3, 2, "wait"), (2, 1, "drop")])
def test_weights_sync_every_k_updates_with_exact_staleness(k, bound, policy):
    loaded = []  # versions the engine loaded, in order
    rollouts = AsyncRollouts(
        _fake_producer(), lambda params, v: loaded.append((params, v)), "w0", start_index=0,
        version=0, max_off_policy_steps=bound, policy=policy, sync_every=k,
    )  # fmt: skip
    lags, published = [], []
    try:
        for _ in range(4 * k):
            item, queue = rollouts.get()
            lags.append(rollouts.trainer_version - item.version)  # what the trainer measures
            assert item.version % k == 0  # generated only by published weights
            time.sleep(0.01)  # the "update": the producer runs ahead meanwhile
            v = rollouts.trainer_version + 1
            if rollouts.updated(v, lambda v=v: f"w{v}"):
                published.append(v)
            assert queue["async/weights_version"] % k == 0
    finally:
        rollouts.close()
    assert published == [v for v in range(1, 4 * k + 1) if v % k == 0]
    assert all(params == f"w{v}" and v % k == 0 for params, v in loaded)
    assert rollouts.trainer_version == 4 * k
    assert max(lags) <= bound  # the bound holds exactly...
    assert max(lags) == bound  # ...and is reached: the producer runs ahead on old weights


def test_sync_every_needs_a_bound_that_covers_it():
    with pytest.raises(ValueError, match="max_off_policy_steps >= sync_every - 1"):
        AsyncRollouts(_fake_producer(), lambda p, v: None, "w0", start_index=0, version=0,
                      max_off_policy_steps=1, sync_every=3)  # fmt: skip
