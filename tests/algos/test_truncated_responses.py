"""`algorithm.truncated_responses`: responses cut off by the token budget, against hand-computed
GRPO advantages (group of 4, scores 0/1: mean m, unbiased std s, adv = (r - m) / (s + 1e-6))."""

from __future__ import annotations

import numpy as np
import pytest

from mimojax.algos import AdvantageInputs, AdvantageSettings, advantage_stage
from mimojax.config.errors import ConfigError
from mimojax.config.loader import load_config
from mimojax.config.validate import validate
from mimojax.observe.metrics import rollout_batch_metrics
from mimojax.rollout.batch import build_batch
from mimojax.rollout.trajectory import Trajectory

T = 6
TOL = dict(rtol=1e-5, atol=1e-5)


def _inputs(scores, truncated, groups=None):
    """One response token per row, at column 2 (columns 3.. are padding)."""
    B = len(scores)
    rewards, mask = np.zeros((B, T), np.float32), np.zeros((B, T), np.float32)
    mask[:, :3] = 1.0
    rewards[:, 2] = scores
    return AdvantageInputs(
        token_rewards_BxT=rewards,
        response_mask_BxT=mask,
        scores_B=np.float32(scores),
        group_ids_B=np.int32(groups if groups is not None else [0] * B),
        truncated_B=np.asarray(truncated, bool),
    )


def _run(mode, inputs, **kw):
    out = advantage_stage(AdvantageSettings("grpo", truncated=mode, **kw), inputs)
    return np.asarray(out.adv_BxT[:, 0]), np.asarray(out.loss_mask_BxT[:, 0]), out.metrics


def test_keep_grades_a_lucky_truncated_answer_as_correct():
    # scores 1, 1, 0, 0: mean 0.5, std sqrt(1/3) -> +-0.866
    adv, keep, _ = _run("keep", _inputs([1, 1, 0, 0], [False, True, False, False]))
    s = np.sqrt(1 / 3)
    np.testing.assert_allclose(adv, [0.5 / s, 0.5 / s, -0.5 / s, -0.5 / s], **TOL)
    np.testing.assert_array_equal(keep, [1, 1, 1, 1])


def test_zero_scores_a_truncated_answer_as_wrong():
    # row 1 is cut off: scores become 1, 0, 0, 0: mean 0.25, std 0.5 -> 1.5, -0.5, -0.5, -0.5
    adv, keep, _ = _run("zero", _inputs([1, 1, 0, 0], [False, True, False, False]))
    np.testing.assert_allclose(adv, [1.5, -0.5, -0.5, -0.5], **TOL)
    np.testing.assert_array_equal(keep, [1, 1, 1, 1])  # it is trained on, as a wrong answer


def test_zero_before_group_filtering():
    """A group whose only right answers were cut off carries no signal and is filtered out."""
    inputs = _inputs([0, 1, 0, 0, 1, 0, 0, 0], [False, True] + [False] * 6, [0] * 4 + [1] * 4)
    adv, keep, metrics = _run("zero", inputs, filter_groups=True, num_groups=2)
    np.testing.assert_array_equal(keep, [0, 0, 0, 0, 1, 1, 1, 1])
    np.testing.assert_allclose(adv, [0, 0, 0, 0, 1.5, -0.5, -0.5, -0.5], **TOL)
    assert float(metrics["batch/groups_kept"]) == 1
    _, keep_as_graded, _ = _run("keep", inputs, filter_groups=True, num_groups=2)
    np.testing.assert_array_equal(keep_as_graded, [1] * 8)


def test_mask_keeps_a_truncated_answer_in_the_baseline_but_out_of_the_loss():
    # scores 1, 0, 0, 0 (row 3 cut off): the baseline still counts it -> 1.5, -0.5, -0.5, then 0
    adv, keep, _ = _run("mask", _inputs([1, 0, 0, 0], [False, False, False, True]))
    np.testing.assert_allclose(adv, [1.5, -0.5, -0.5, 0.0], **TOL)
    np.testing.assert_array_equal(keep, [1, 1, 1, 0])


@pytest.mark.parametrize("mode", ["mask", "zero"])
def test_modes_other_than_keep_need_truncated_B(mode):
    inputs = _inputs([1, 0], [False, False])._replace(truncated_B=None)
    with pytest.raises(ValueError, match=rf"truncated_B \(truncated='{mode}'\)"):
        advantage_stage(AdvantageSettings("grpo", truncated=mode), inputs)


def test_unknown_mode_is_refused():
    with pytest.raises(ValueError, match="truncated must be one of"):
        AdvantageSettings("grpo", truncated="drop")
    cfg = load_config("configs/base.py")
    cfg.algorithm.truncated_responses = "drop"
    with pytest.raises(ConfigError, match="algorithm.truncated_responses: 'drop'"):
        validate(cfg, num_devices=1)


def test_build_batch_marks_responses_cut_off_by_a_budget():
    reasons = ["stop", "length", "abort", "max_tokens", "max_context", "max_turns"]
    trajs = [
        Trajectory([1, 2], [3, 4], [0.0, 0.0], [1, 1], 0, r, group=0, sample=i, example={})
        for i, r in enumerate(reasons)
    ]
    rb = build_batch(trajs, [0.0] * 6, [True] * 6, pad_id=0)
    np.testing.assert_array_equal(rb.truncated_B, [False, True, False, True, True, False])
    zeros = np.zeros(rb.input_ids_BxT.shape, np.float32)
    metrics = rollout_batch_metrics(rb, trajs, zeros, zeros, zeros, None, 1)
    assert metrics["response_length/clip_ratio"] == pytest.approx(3 / 6)  # the same rows
