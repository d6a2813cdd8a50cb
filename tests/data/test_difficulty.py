"""Difficulty-aware sampling: the per-prompt history, acceptance, and the iterator using it."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mimojax.data.difficulty import DifficultyTracker


def test_buckets_weights_and_metrics_by_hand():
    t = DifficultyTracker(floor=0.25, success_threshold=1.0)
    m = t.record([(0, 1.0, True), (0, 1.0, True), (1, 0.0, True), (1, 0.5, True),
                  (2, 1.0, True), (2, 0.0, True), (3, 1.0, False)])  # fmt: skip
    # before this batch nothing was seen; 3's only sample is an infra failure: no attempt
    assert m["data/difficulty/unseen"] == 1.0
    assert [t.bucket(i) for i in range(4)] == ["always_solved", "never_solved", "mixed", "unseen"]
    assert [t.weight(i) for i in range(4)] == [0.25, 0.25, 1.0, 1.0]
    assert m["data/difficulty/prompts_seen"] == 3.0
    assert m["data/difficulty/mean_success_rate"] == pytest.approx((1.0 + 0.0 + 0.5) / 3)
    m = t.record([(0, 1.0, True), (1, 0.0, True), (2, 1.0, True), (3, 1.0, True)])
    assert m["data/difficulty/always_solved"] == m["data/difficulty/never_solved"] == 0.25
    assert m["data/difficulty/mixed"] == m["data/difficulty/unseen"] == 0.25
    again = DifficultyTracker(floor=0.25)
    again.set_state(json.loads(json.dumps(t.get_state())))
    assert again.stats == t.stats


def test_floor_must_be_positive():
    with pytest.raises(ValueError, match="floor"):
        DifficultyTracker(floor=0.0)


def test_acceptance_rate_is_the_floor_and_deterministic():
    t = DifficultyTracker(floor=0.2)
    t.record([(7, 1.0, True)])
    draws = [t.accept(7, seed=3, position=p) for p in range(5000)]
    assert abs(np.mean(draws) - 0.2) < 0.02
    assert draws == [t.accept(7, seed=3, position=p) for p in range(5000)]
    assert all(t.accept(8, seed=3, position=p) for p in range(100))  # unseen: always
