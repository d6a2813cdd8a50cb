"""Rollout correction (TIS, rejection, bypass), DAPO shaping and group filtering, registries."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import numpy_refs as ref
import pytest
from algos_testdata import make_batch

from mimojax.algos import (
    KL_ESTIMATORS,
    Registry,
    UnknownNameError,
    add_outcome_reward,
    apply_overlong_shaping,
    bypass_mode_inputs,
    check_shapes,
    filter_groups,
    overlong_penalty,
    rollout_correction,
)


def _lp(seed=0):
    b = make_batch(seed)
    rollout = b.logp + np.random.default_rng(seed).normal(scale=0.4, size=b.mask.shape)
    return b, jnp.asarray(b.logp, jnp.float32), jnp.asarray(rollout, jnp.float32), rollout


def test_token_and_sequence_tis_match_reference():
    b, lp, rlp, rollout = _lp()
    w, mask, metrics = rollout_correction(lp, rlp, b.mask, is_level="token", is_threshold=2.0)
    np.testing.assert_allclose(w, ref.token_tis(b.logp, rollout, b.mask, 2.0), rtol=1e-5)
    np.testing.assert_allclose(mask, b.mask)
    high = np.exp(b.logp - rollout) > 2.0
    frac = (high * b.mask).sum() / b.mask.sum()
    assert float(metrics["rollout_corr/rollout_is_ratio_fraction_high"]) == pytest.approx(frac)
    w, _, _ = rollout_correction(lp, rlp, b.mask, is_level="sequence", is_threshold=3.0)
    np.testing.assert_allclose(w, ref.seq_tis(b.logp, rollout, b.mask, 3.0), rtol=1e-4)


def test_icepop_zeroes_outside_bounds_and_batch_normalize():
    b, lp, rlp, rollout = _lp(1)
    w, _, _ = rollout_correction(
        lp, rlp, b.mask, is_level="token", is_threshold=1.5, is_threshold_lower=0.5
    )
    raw = np.exp(b.logp - rollout)
    expected = np.where((raw >= 0.5) & (raw <= 1.5), raw, 0.0) * b.mask
    np.testing.assert_allclose(w, expected, rtol=1e-5)
    w, _, _ = rollout_correction(lp, rlp, b.mask, is_level="token", is_batch_normalize=True)
    assert float((w * b.mask).sum() / b.mask.sum()) == pytest.approx(1.0, rel=1e-5)


def test_mismatch_metrics():
    b, lp, rlp, rollout = _lp(2)
    _, _, metrics = rollout_correction(lp, rlp, b.mask)
    d = (b.logp - rollout) * b.mask
    m = b.mask.astype(bool)
    assert float(metrics["rollout_corr/logp_abs_diff_mean"]) == pytest.approx(
        np.abs(d)[m].mean(), rel=1e-5
    )
    assert float(metrics["rollout_corr/logp_abs_diff_max"]) == pytest.approx(
        np.abs(d)[m].max(), rel=1e-5
    )
    k3 = np.exp(b.logp - rollout) - (b.logp - rollout) - 1
    assert float(metrics["rollout_corr/k3_kl"]) == pytest.approx(k3[m].mean(), rel=1e-5)


@pytest.mark.parametrize(
    "option,threshold",
    [
        ("token_k1", 1.5),
        ("token_k2", 0.05),
        ("token_k3", 0.05),
        ("seq_sum_k1", (0.5, 1.5)),
        ("seq_mean_k2", 0.04),
        ("seq_mean_k3", 0.05),
        ("seq_max_k2", 0.2),
        ("seq_sum_k3", 0.3),
    ],
)
def test_rejection_masks(option, threshold):
    b, lp, rlp, rollout = _lp(3)
    _, mask, metrics = rollout_correction(lp, rlp, b.mask, rs=option, rs_threshold=threshold)
    lr = b.logp - rollout
    stats = {"k1": -lr, "k2": 0.5 * lr**2, "k3": np.exp(lr) - 1 - lr}
    level, kind = option.rsplit("_", 1)
    expected = np.zeros_like(b.mask)
    for i in range(b.mask.shape[0]):
        toks = [t for t in range(b.mask.shape[1]) if b.mask[i, t]]
        vals = [stats[kind][i, t] for t in toks]
        if level != "token":
            agg = {"seq_sum": sum, "seq_mean": np.mean, "seq_max": max}[level](vals)
            vals = [agg] * len(toks)
        for t, v in zip(toks, vals, strict=True):
            if kind == "k1":
                lo, hi = threshold if isinstance(threshold, tuple) else (1 / threshold, threshold)
                ok = np.log(lo) <= v <= np.log(hi)
            else:
                ok = v <= threshold
            expected[i, t] = float(ok)
    np.testing.assert_allclose(mask, expected)
    rejected = ((1 - expected) * b.mask).sum() / b.mask.sum()
    assert float(metrics["rollout_corr/rollout_rs_masked_fraction"]) == pytest.approx(rejected)
    assert 0 < rejected < 1


def test_combined_rejection_and_bad_options():
    b, lp, rlp, _ = _lp(4)
    _, m1, _ = rollout_correction(lp, rlp, b.mask, rs="token_k2", rs_threshold=0.05)
    _, m2, _ = rollout_correction(lp, rlp, b.mask, rs="seq_mean_k3", rs_threshold=0.05)
    _, both, _ = rollout_correction(
        lp, rlp, b.mask, rs="token_k2,seq_mean_k3", rs_threshold=[0.05, 0.05]
    )
    np.testing.assert_allclose(both, np.asarray(m1) * np.asarray(m2))
    with pytest.raises(ValueError, match="token_k1"):
        rollout_correction(lp, rlp, b.mask, rs="token_k4", rs_threshold=1.0)
    with pytest.raises(ValueError, match="rs_threshold"):
        rollout_correction(lp, rlp, b.mask, rs="token_k2")
    with pytest.raises(ValueError, match="token, sequence"):
        rollout_correction(lp, rlp, b.mask, is_level="tok")
    with pytest.raises(ValueError, match="rollout_logp_BxT"):
        rollout_correction(lp, rlp[:, :-1], b.mask)


def test_bypass_inputs_and_jit():
    b, lp, rlp, rollout = _lp(5)
    inputs, _ = bypass_mode_inputs(lp, rlp, b.mask, loss_type="reinforce", is_level="token")
    np.testing.assert_allclose(inputs["old_logp_BxT"], rlp)
    np.testing.assert_allclose(
        inputs["rollout_is_weights_BxT"], ref.token_tis(b.logp, rollout, b.mask, 2.0), rtol=1e-5
    )
    inputs, _ = bypass_mode_inputs(lp, rlp, b.mask, is_level="token")
    assert inputs["rollout_is_weights_BxT"] is None  # PPO's ratio already is the IS ratio
    f = jax.jit(
        lambda a, c: rollout_correction(
            a, c, b.mask, is_level="token", rs="token_k3", rs_threshold=0.1
        )
    )
    w, mask, metrics = f(lp, rlp)
    assert w.shape == mask.shape == b.mask.shape and all(v.shape == () for v in metrics.values())


def test_overlong_shaping():
    lengths = np.array([10, 80, 90, 95, 100])
    np.testing.assert_allclose(
        overlong_penalty(lengths, 100, 20, 1.0), ref.overlong(lengths, 100, 20, 1.0), rtol=1e-6
    )
    np.testing.assert_allclose(overlong_penalty(lengths, 100, 20, 1.0), [0, 0, -0.5, -0.75, -1])
    mask = jnp.array([[1, 1, 1, 0], [1, 1, 1, 1], [1, 0, 1, 0]], jnp.float32)
    rewards = jnp.zeros((3, 4))
    shaped, metrics = apply_overlong_shaping(rewards, mask, max_response_len=4, buffer_len=2)
    np.testing.assert_allclose(shaped, [[0, 0, -0.5, 0], [0, 0, 0, -1.0], [0, 0, 0, 0]])
    assert float(metrics["reward/overlong_frac"]) == pytest.approx(2 / 3)
    out = add_outcome_reward(rewards, mask, jnp.array([1.0, 2.0, 3.0]))
    np.testing.assert_allclose(out, [[0, 0, 1, 0], [0, 0, 0, 2], [0, 0, 3, 0]])


def test_filter_groups():
    values = np.array([1.0, 1.0, 1.0, 0.0, 1.0, 0.5, 2.0, 2.0, 3.0])
    ids = np.array([0, 0, 0, 1, 1, 2, 3, 3, 3])
    valid = np.array([True] * 8 + [False])  # group 3's odd one out is an infra failure
    keep, metrics = filter_groups(jnp.asarray(values), jnp.asarray(ids), jnp.asarray(valid))
    np.testing.assert_array_equal(keep, ref.filter_groups(values, ids, valid))
    np.testing.assert_array_equal(keep, [0, 0, 0, 1, 1, 1, 0, 0, 0])
    assert int(metrics["batch/groups_kept"]) == 2 and int(metrics["batch/groups"]) == 4
    jitted, _ = jax.jit(filter_groups)(jnp.asarray(values), jnp.asarray(ids), jnp.asarray(valid))
    np.testing.assert_array_equal(jitted, keep)
    b = make_batch(6, binary=True)
    keep, _ = filter_groups(b.rewards.sum(1), jnp.asarray(b.ids), jnp.asarray(b.valid))
    np.testing.assert_array_equal(keep, ref.filter_groups(b.rewards.sum(1), b.ids, b.valid))


def test_registry_and_shape_errors():
    reg = Registry("thing")
    reg.register("alpha", "a")(len)
    assert reg["a"] is len
    with pytest.raises(UnknownNameError, match=r"Did you mean 'alpha'.*Registered: a, alpha"):
        reg["alpah"]
    with pytest.raises(ValueError, match="already registered"):
        reg.register("alpha")(max)
    with pytest.raises(KeyError, match="k3"):
        KL_ESTIMATORS["k4"]
    assert check_shapes(x_BxT=np.zeros((2, 3)), y_B=np.zeros(2), z=None) == {"B": 2, "T": 3}
    with pytest.raises(ValueError, match=r"y_B has shape \(3,\) \(B=3\) but x_BxT has B=2"):
        check_shapes(x_BxT=np.zeros((2, 3)), y_B=np.zeros(3))
    with pytest.raises(ValueError, match="w_BxT must have 2 dims"):
        check_shapes(w_BxT=np.zeros(3))
