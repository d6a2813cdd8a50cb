"""KL estimators, straight-through gradients, KL controllers and loss aggregation."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import numpy_refs as ref
import pytest
from algos_testdata import make_batch

from mimojax.algos import (
    AGG_MODES,
    KL_ESTIMATORS,
    KLController,
    adaptive_kl_coef,
    agg_loss,
    apply_kl_penalty,
    global_counts,
    kl_loss,
)

BASE = {
    "k1": "k1",
    "kl": "k1",
    "abs": "abs",
    "k2": "k2",
    "mse": "k2",
    "k3": "k3",
    "low_var_kl": "k3",
}


def _logps(seed=0):
    rng = np.random.default_rng(seed)
    logp = -rng.exponential(1.0, (6, 7))
    ref_logp = logp + rng.normal(scale=0.8, size=logp.shape)
    ref_logp[0, :2] = logp[0, :2] - 15.0  # k3's exp(d) beyond the 10 clamp
    ref_logp[1, :2] = logp[1, :2] + 25.0  # d beyond the 20 clamp
    return logp, ref_logp


@pytest.mark.parametrize("name", sorted(KL_ESTIMATORS))
def test_kl_estimator_values_match_reference(name):
    logp, ref_logp = _logps()
    got = KL_ESTIMATORS[name](jnp.asarray(logp, jnp.float32), jnp.asarray(ref_logp, jnp.float32))
    expected = ref.kl(logp, ref_logp, BASE[name.rstrip("+")])
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["k1+", "abs+", "k3+", "low_var_kl+", "k2+"])
def test_straight_through_gradient_is_k2s(name):
    logp, ref_logp = _logps(1)
    r = jnp.asarray(ref_logp, jnp.float32)
    g = jax.grad(lambda x: KL_ESTIMATORS[name](x, r).sum())(jnp.asarray(logp, jnp.float32))
    np.testing.assert_allclose(g, logp - ref_logp, rtol=1e-5, atol=1e-5)  # d/dx (x - r)^2 / 2


def test_k3_is_clamped_and_plain_k3_gradient_differs():
    logp, ref_logp = _logps()
    k3 = np.asarray(KL_ESTIMATORS["k3"](jnp.asarray(logp), jnp.asarray(ref_logp)))
    assert k3.max() <= 10.0 and k3[0, 0] == pytest.approx(10.0)
    g = jax.grad(lambda x: KL_ESTIMATORS["k3"](x, jnp.asarray(ref_logp[2:])).sum())(
        jnp.asarray(logp[2:])
    )
    np.testing.assert_allclose(g, 1 - np.exp(ref_logp[2:] - logp[2:]), rtol=1e-5, atol=1e-6)


def test_kl_loss_and_reward_penalty():
    b = make_batch(0)
    logp, ref_logp = _logps()
    logp, ref_logp = np.resize(logp, b.mask.shape), np.resize(ref_logp, b.mask.shape)
    loss, metrics = kl_loss(
        jnp.asarray(logp), jnp.asarray(ref_logp), jnp.asarray(b.mask), "k3", "seq-mean-token-mean"
    )
    expected = ref.agg(ref.kl(logp, ref_logp, "k3"), b.mask, "seq-mean-token-mean")
    assert float(loss) == pytest.approx(expected, rel=1e-5)
    assert float(metrics["actor/kl_loss"]) == pytest.approx(expected, rel=1e-5)

    rewards, current_kl, metrics = apply_kl_penalty(
        jnp.asarray(b.rewards), jnp.asarray(logp), jnp.asarray(ref_logp), jnp.asarray(b.mask), 0.1
    )
    k1 = (logp - ref_logp) * b.mask
    np.testing.assert_allclose(rewards, b.rewards - 0.1 * k1, rtol=1e-5, atol=1e-6)
    per_seq = [k1[i].sum() / b.mask[i].sum() for i in range(len(k1))]
    assert float(current_kl) == pytest.approx(np.mean(per_seq), rel=1e-5)
    assert {"actor/reward_kl_penalty", "actor/reward_kl_penalty_coeff"} <= set(metrics)


def test_kl_controllers():
    fixed = KLController(0.05)
    assert fixed.update(1.0, 256) is fixed
    ctl = KLController(0.1, kind="adaptive", target_kl=0.02, horizon=1000)
    up = ctl.update(current_kl=0.05, n_steps=100)  # error clipped to +0.2
    assert float(up.coef) == pytest.approx(0.1 * (1 + 0.2 * 100 / 1000))
    down = ctl.update(current_kl=0.018, n_steps=100)  # error -0.1
    assert float(down.coef) == pytest.approx(0.1 * (1 - 0.1 * 100 / 1000))
    assert ctl.coef == 0.1  # immutable
    assert float(jax.jit(adaptive_kl_coef)(0.1, 0.0, 10, 0.02, 100)) == pytest.approx(0.098)
    with pytest.raises(ValueError, match="fixed, adaptive"):
        KLController(0.1, kind="adaptve")


@pytest.mark.parametrize("mode", AGG_MODES)
def test_agg_loss_matches_reference(mode):
    b = make_batch(2, empty_row=True)
    loss_BxT = np.random.default_rng(2).normal(size=b.mask.shape)
    got = agg_loss(jnp.asarray(loss_BxT, jnp.float32), jnp.asarray(b.mask), mode)
    assert float(got) == pytest.approx(ref.agg(loss_BxT, b.mask, mode), rel=1e-5, abs=1e-6)
    got = agg_loss(jnp.asarray(loss_BxT), jnp.asarray(b.mask), mode, 50, 7, loss_scale_factor=4)
    assert float(got) == pytest.approx(ref.agg(loss_BxT, b.mask, mode, 50, 7, 4), rel=1e-5)


def test_agg_loss_hand_case():
    loss = jnp.array([[1.0, 2.0, 3.0], [4.0, 0.0, 0.0]])
    mask = jnp.array([[1, 1, 1], [1, 0, 0]])
    assert float(agg_loss(loss, mask, "token-mean")) == pytest.approx(10 / 4)
    assert float(agg_loss(loss, mask, "token-sum")) == pytest.approx(10)
    assert float(agg_loss(loss, mask, "seq-mean-token-sum")) == pytest.approx((6 + 4) / 2)
    assert float(agg_loss(loss, mask, "seq-mean-token-mean")) == pytest.approx((2 + 4) / 2)
    assert float(agg_loss(loss, mask, "seq-mean-token-sum-norm")) == pytest.approx(5 / 3)


@pytest.mark.parametrize("mode", AGG_MODES)
def test_agg_loss_micro_batch_invariance_loss_and_grad(mode):
    b = make_batch(3, empty_row=True)
    with jax.enable_x64(True):  # token-sum reaches ~60: float32 rounding alone is ~1e-5 there
        x = jnp.asarray(np.random.default_rng(3).normal(size=b.mask.shape))
        mask = jnp.asarray(b.mask)
        tokens, seqs = global_counts(mask)
        f = jax.value_and_grad(lambda x, m: agg_loss(x**2, m, mode, tokens, seqs))
        full, g_full = f(x, mask)
        parts = [f(x[s], mask[s]) for s in (slice(0, 3), slice(3, 7), slice(7, 12))]
        assert abs(sum(float(v) for v, _ in parts) - float(full)) < 1e-6
        g_parts = np.concatenate([g for _, g in parts])
        np.testing.assert_allclose(g_parts, g_full, atol=1e-6, rtol=0)
