"""Rollout-correction diagnostics (chi-square, perplexities, IS ESS) and KPop binary_kl."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import numpy_refs as ref
import numpy_refs_ext as ext
import pytest
from algos_testdata import make_batch

from mimojax.algos import binary_kl, mismatch_metrics, rollout_correction
from mimojax.algos.rollout_correction import rejection_mask

P = "rollout_corr/"


def _lp(seed=0, scale=0.4):
    b = make_batch(seed, empty_row=True)
    rollout = b.logp + np.random.default_rng(seed).normal(scale=scale, size=b.mask.shape)
    rollout = np.minimum(rollout, -1e-3)
    return b, jnp.asarray(b.logp, jnp.float32), jnp.asarray(rollout, jnp.float32), rollout


def test_chi2_and_perplexity_metrics_match_reference():
    b, lp, rlp, rollout = _lp(0, scale=0.15)  # sequence chi2 stays far from the e^40 clamp
    _, _, metrics = rollout_correction(lp, rlp, b.mask)
    tok, seq = ext.chi2(b.logp, rollout, b.mask)
    assert float(metrics[P + "chi2_token"]) == pytest.approx(tok, rel=1e-5)
    assert float(metrics[P + "chi2_seq"]) == pytest.approx(seq, rel=1e-4)
    for name, value in ext.ppl_metrics(b.logp, rollout, b.mask).items():
        assert float(metrics[P + name]) == pytest.approx(value, rel=1e-5, abs=1e-6), name
    assert mismatch_metrics(lp, rlp, jnp.asarray(b.mask)).keys() <= metrics.keys()


@pytest.mark.parametrize(
    "level,threshold,lower", [("token", 2.0, None), ("sequence", 3.0, None), ("token", 1.5, 0.5)]
)
def test_is_ess_std_and_sequence_stats_match_reference(level, threshold, lower):
    b, lp, rlp, rollout = _lp(1)
    w, _, metrics = rollout_correction(
        lp, rlp, b.mask, is_level=level, is_threshold=threshold, is_threshold_lower=lower
    )
    raw = np.exp(b.logp - rollout)
    if level == "sequence":
        raw = np.exp(((b.logp - rollout) * b.mask).sum(1, keepdims=True)) * np.ones_like(raw)
    if lower is None:
        expected_w = np.minimum(raw, threshold) * b.mask
    else:
        expected_w = np.where((raw >= lower) & (raw <= threshold), raw, 0.0) * b.mask
    np.testing.assert_allclose(w, expected_w, rtol=1e-4)
    ess, std = ext.is_ess_and_std(expected_w, b.mask, threshold)
    assert float(metrics[P + "rollout_is_eff_sample_size"]) == pytest.approx(ess, rel=1e-4)
    assert float(metrics[P + "rollout_is_std"]) == pytest.approx(std, rel=1e-4)
    assert 0 < ess <= 1
    seq_w = ext._seq_means(expected_w, b.mask)
    seq_raw = ext._seq_means(raw * b.mask, b.mask)
    low = 1 / threshold if lower is None else lower
    expected = {
        "seq_mean": seq_w.mean(),
        "seq_std": seq_w.std(ddof=1),
        "seq_max": seq_w.max(),
        "seq_min": seq_w.min(),
        "seq_max_deviation": np.abs(seq_w - 1).max(),
        "seq_fraction_high": np.mean(seq_raw > threshold),
        "seq_fraction_low": np.mean(seq_raw < low),
    }
    for name, value in expected.items():
        got = float(metrics[P + "rollout_is_" + name])
        assert got == pytest.approx(value, rel=1e-4, abs=1e-6), name
    if lower is not None:
        oob = ((raw < lower) | (raw > threshold)) * b.mask
        assert float(metrics[P + "rollout_is_oob_ratio"]) == pytest.approx(oob.sum() / b.mask.sum())


def test_hand_computed_ess_and_chi2():
    # ratios [2, 0.1, 2, 0.1]: IcePop [0.5, 2.5] keeps w = [2, 0, 2, 0]
    lr = jnp.log(jnp.array([[2.0, 0.1, 2.0, 0.1]]))
    rollout = jnp.full((1, 4), -3.0)
    w, _, m = rollout_correction(
        rollout + lr, rollout, jnp.ones((1, 4)), is_level="token", is_threshold=2.5,
        is_threshold_lower=0.5,
    )  # fmt: skip
    np.testing.assert_allclose(w, [[2, 0, 2, 0]], rtol=1e-6)
    # mean 1, mean of (w / 1)^2 = 2 -> ESS 1/2; std sqrt(2 - 1) = 1
    assert float(m[P + "rollout_is_eff_sample_size"]) == pytest.approx(0.5, rel=1e-6)
    assert float(m[P + "rollout_is_std"]) == pytest.approx(1.0, rel=1e-6)
    assert float(m[P + "rollout_is_oob_ratio"]) == pytest.approx(0.5)
    assert float(m[P + "chi2_token"]) == pytest.approx((4 + 0.01 + 4 + 0.01) / 4 - 1, rel=1e-5)
    assert float(m[P + "chi2_seq"]) == pytest.approx(0.04**2 - 1, rel=1e-5)  # (2*.1*2*.1)^2


def test_binary_kl_rejection_matches_reference():
    b, lp, rlp, rollout = _lp(2)
    _, mask, metrics = rollout_correction(lp, rlp, b.mask, rs="binary_kl", rs_threshold=0.02)
    expected = np.zeros_like(b.mask)
    for i, t in zip(*np.nonzero(b.mask), strict=True):
        fwd = ext.binary_kl(b.logp[i, t], rollout[i, t])
        rev = ext.binary_kl(rollout[i, t], b.logp[i, t])
        expected[i, t] = float(max(fwd, rev) <= 0.02)
    np.testing.assert_allclose(mask, expected)
    rejected = ((1 - expected) * b.mask).sum() / b.mask.sum()
    assert 0 < rejected < 1
    assert float(metrics[P + "rollout_rs_binary_kl_masked_fraction"]) == pytest.approx(rejected)
    seqs = [i for i in range(12) if b.mask[i].sum()]
    seq_frac = np.mean([((1 - expected[i]) * b.mask[i]).sum() > 0 for i in seqs])
    assert float(metrics[P + "rollout_rs_binary_kl_seq_masked_fraction"]) == pytest.approx(seq_frac)
    # hand case: p = 0.5, q = 0.25 -> KL(p||q) = .5 ln 2 + .5 ln(2/3)
    kl = float(binary_kl(jnp.log(0.5), jnp.log(0.25)))
    assert kl == pytest.approx(0.5 * math.log(2) + 0.5 * math.log(0.5 / 0.75), rel=1e-6)
    with pytest.raises(ValueError, match="binary_kl"):
        rejection_mask(lp - rlp, jnp.asarray(b.mask), "binary_kl", 0.1)


def test_metrics_under_jit_and_with_other_criteria():
    b, lp, rlp, _ = _lp(3)
    f = jax.jit(
        lambda a, c: rollout_correction(
            a, c, b.mask, is_level="sequence", rs="token_k2,binary_kl", rs_threshold=[0.05, 0.02]
        )
    )
    w, mask, metrics = f(lp, rlp)
    _, m1, _ = rollout_correction(lp, rlp, b.mask, rs="token_k2", rs_threshold=0.05)
    _, m2, _ = rollout_correction(lp, rlp, b.mask, rs="binary_kl", rs_threshold=0.02)
    np.testing.assert_allclose(mask, np.asarray(m1) * np.asarray(m2))
    assert all(v.shape == () and np.isfinite(v) for v in metrics.values())
    assert np.isfinite(ref.agg(np.asarray(w), b.mask, "token-mean"))
