"""Clip-Cov, KL-Cov and UP against float64 NumPy references; selection, rng, micro-batches."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import numpy_refs as ref
import numpy_refs_ext as ext
import pytest
from algos_testdata import make_batch

from mimojax.algos import AGG_MODES, POLICY_LOSSES, global_counts
from mimojax.algos.policy_losses_cov import clip_cov_select, kl_cov_select, token_budget

TOL = dict(rtol=1e-7, atol=1e-9)  # float64 (selection must not hinge on rounding); 1e-8 eps
CLIP = dict(clip_ratio=0.2, clip_cov_lb=1.0, clip_cov_ub=5.0)


@pytest.fixture(autouse=True)
def x64():
    with jax.enable_x64(True):
        yield


def _batch(seed=0):
    return make_batch(seed, empty_row=True)


def _args(b):
    return tuple(jnp.asarray(x) for x in (b.logp, b.old_logp, b.adv, b.mask))


def _selected(sel_BxT):
    return {tuple(int(v) for v in it) for it in np.argwhere(np.asarray(sel_BxT))}


def _clip_cov_selection(b, key, ratio):
    lp, old, adv, m = _args(b)
    r = np.exp(b.logp - b.old_logp)
    clipped = -b.adv * np.clip(r, 0.8, 1.2) > -b.adv * r
    return _selected(
        clip_cov_select(lp, adv, m, jnp.asarray(clipped), key, ratio, CLIP["clip_cov_lb"], 5.0)
    )


@pytest.mark.parametrize("seed", [0, 4])
def test_clip_cov_selects_a_random_subset_of_the_reference_candidates(seed):
    b = _batch(seed)
    cand = set(ext.clip_cov_candidates(b.logp, b.old_logp, b.adv, b.mask, 0.2, 0.2, 1.0, 5.0))
    k = ext.budget(int(b.mask.sum()), 0.05)
    assert 0 < k < len(cand)  # the random choice matters in this batch
    picks = []
    for key in jax.random.split(jax.random.key(seed), 3):
        sel = _clip_cov_selection(b, key, 0.05)
        assert sel <= cand and len(sel) == k
        picks.append(sel)
        tok = ext.clip_cov_token_losses(b.logp, b.old_logp, b.adv, 0.2, 0.2, sel)
        for mode in ("token-mean", "seq-mean-token-mean"):
            loss, metrics = POLICY_LOSSES["clip_cov"](
                *_args(b), mode, rng=key, clip_cov_ratio=0.05, **CLIP
            )
            np.testing.assert_allclose(float(loss), ref.agg(tok, b.mask, mode), **TOL)
        assert float(metrics["actor/pg_clipfrac"]) == pytest.approx(k / b.mask.sum())
        kl = (b.old_logp - b.logp)[b.mask > 0].mean()
        assert float(metrics["actor/ppo_kl"]) == pytest.approx(kl)
    assert len({frozenset(p) for p in picks}) > 1  # different keys, different tokens


@pytest.mark.parametrize("mode", AGG_MODES)
def test_clip_cov_matches_reference_when_every_candidate_is_taken(mode):
    b = _batch(2)
    w = np.random.default_rng(2).uniform(0.5, 2.0, b.mask.shape)
    cand = set(ext.clip_cov_candidates(b.logp, b.old_logp, b.adv, b.mask, 0.2, 0.2, 1.0, 5.0))
    assert ext.budget(int(b.mask.sum()), 0.5) >= len(cand) > 0
    tok = ext.clip_cov_token_losses(b.logp, b.old_logp, b.adv, 0.2, 0.2, cand) * w
    loss, _ = POLICY_LOSSES["clip_cov"](
        *_args(b), mode, rollout_is_weights_BxT=jnp.asarray(w), rng=jax.random.key(0),
        clip_cov_ratio=0.5, **CLIP,
    )  # fmt: skip
    np.testing.assert_allclose(float(loss), ref.agg(tok, b.mask, mode), **TOL)


@pytest.mark.parametrize("mode", AGG_MODES)
@pytest.mark.parametrize("ratio,coef", [(0.05, 0.1), (0.2, 1.0)])
def test_kl_cov_matches_reference(mode, ratio, coef):
    b = _batch(3)
    sel = ext.kl_cov_selected(b.logp, b.adv, b.mask, ratio)
    assert _selected(kl_cov_select(*_args(b)[::2], jnp.asarray(b.mask), ratio)) == sel
    tok = ext.kl_cov_token_losses(b.logp, b.old_logp, b.adv, coef, sel)
    loss, metrics = POLICY_LOSSES["kl_cov"](*_args(b), mode, kl_cov_ratio=ratio, ppo_kl_coef=coef)
    np.testing.assert_allclose(float(loss), ref.agg(tok, b.mask, mode), **TOL)
    abs_kl = np.abs(b.logp - b.old_logp)[b.mask > 0].mean()
    assert float(metrics["actor/ppo_kl"]) == pytest.approx(abs_kl)


def _hand():
    # cov = (A - 0) * (logp - (-1.5)) = [4*.5, 0*.5, -2*.5, -2*-1.5] = [2, 0, -1, 3]
    logp = jnp.array([[-1.0, -1.0, -1.0, -3.0]])
    adv = jnp.array([[4.0, 0.0, -2.0, -2.0]])
    return logp, adv, jnp.ones((1, 4))


def test_clip_cov_hand_computed():
    logp, adv, m = _hand()
    f = lambda key, **o: POLICY_LOSSES["clip_cov"](logp, logp, adv, m, "token-sum", rng=key, **o)
    # ratio 1: per-token loss -A = [-4, 0, 2, 2]; candidates (1 < cov < 5): tokens 0 and 3
    loss, metrics = f(jax.random.key(0), clip_cov_ratio=0.5)  # k = 2: both detached
    assert float(loss) == pytest.approx(2.0)
    assert float(metrics["actor/pg_clipfrac"]) == pytest.approx(0.5)
    loss, _ = f(jax.random.key(0), clip_cov_ratio=0.25, clip_cov_ub=2.5)  # only token 0
    assert float(loss) == pytest.approx(4.0)
    keys = jax.random.split(jax.random.key(1), 64)  # k = 1 of {0, 3}: loss 4 or -2
    losses = np.asarray(jax.vmap(lambda k: f(k, clip_cov_ratio=0.25)[0])(keys))
    assert set(np.round(losses, 6)) == {4.0, -2.0}


def test_kl_cov_hand_computed():
    logp, adv, m = _hand()
    old = logp + jnp.array([[0.1, 0.0, -0.2, 0.3]])  # log r = [-0.1, 0, 0.2, -0.3]
    f = lambda ratio: POLICY_LOSSES["kl_cov"](
        logp, old, adv, m, "token-sum", kl_cov_ratio=ratio, ppo_kl_coef=1.0
    )[0]
    base = -4 * math.exp(-0.1) + 2 * math.exp(0.2) + 2 * math.exp(-0.3)
    assert float(f(0.25)) == pytest.approx(base + 0.3)  # k = 1: token 3 (cov 3)
    assert float(f(0.5)) == pytest.approx(base + 0.3 + 0.1)  # k = 2: tokens 3 and 0


def test_selection_is_reproducible_uniform_and_jittable():
    b = _batch(0)
    lp, old, adv, m = _args(b)
    f = lambda key, lp: POLICY_LOSSES["clip_cov"](
        lp, old, adv, m, rng=key, clip_cov_ratio=0.05, **CLIP
    )[0]
    key = jax.random.key(7)
    assert float(f(key, lp)) == float(f(key, lp))  # same key, same tokens
    assert float(jax.jit(f)(key, lp)) == pytest.approx(float(f(key, lp)), rel=1e-12)
    cand = ext.clip_cov_candidates(b.logp, b.old_logp, b.adv, b.mask, 0.2, 0.2, 1.0, 5.0)
    k = ext.budget(int(b.mask.sum()), 0.05)
    keys = jax.random.split(key, 400)
    r = np.exp(b.logp - b.old_logp)
    clipped = jnp.asarray(-b.adv * np.clip(r, 0.8, 1.2) > -b.adv * r)
    sel = jax.jit(jax.vmap(lambda k_: clip_cov_select(lp, adv, m, clipped, k_, 0.05, 1.0, 5.0)))
    freq = np.asarray(sel(keys)).mean(0)
    for i, t in cand:  # each candidate is picked with probability k / #candidates
        assert abs(freq[i, t] - k / len(cand)) < 0.1
    assert freq.sum() == pytest.approx(k)


def test_gradients_on_selected_tokens():
    b = make_batch(4)
    lp, old, adv, m = _args(b)
    key = jax.random.key(3)
    g = jax.grad(
        lambda x: POLICY_LOSSES["clip_cov"](
            x, old, adv, m, "token-sum", rng=key, clip_cov_ratio=0.05, **CLIP
        )[0]
    )(lp)
    r = np.exp(b.logp - b.old_logp)
    clipped = -b.adv * np.clip(r, 0.8, 1.2) > -b.adv * r
    sel = _clip_cov_selection(b, key, 0.05)
    live = (b.mask > 0) & ~clipped
    for i, t in sel:
        live[i, t] = False
    np.testing.assert_allclose(g, np.where(live, -b.adv * r, 0.0), **TOL)
    g = jax.grad(lambda x: POLICY_LOSSES["kl_cov"](x, old, adv, m, "token-sum")[0])(lp)
    expected = -b.adv * r
    for i, t in ext.kl_cov_selected(b.logp, b.adv, b.mask, 2e-4):
        expected[i, t] += 0.1 * np.sign(b.logp[i, t] - b.old_logp[i, t])
    np.testing.assert_allclose(g, expected * b.mask, **TOL)


def test_micro_batches_select_within_each_micro_batch():
    """Not invariant (as verl): each micro-batch selects from its own covariance statistics."""
    b = _batch(5)
    tokens, seqs = global_counts(b.mask)
    chunks = (slice(0, 6), slice(6, 12))
    total, expected = 0.0, 0.0
    for sl in chunks:
        args = tuple(x[sl] for x in _args(b))
        total += float(POLICY_LOSSES["kl_cov"](*args, "token-mean", tokens, kl_cov_ratio=0.1)[0])
        sel = ext.kl_cov_selected(b.logp[sl], b.adv[sl], b.mask[sl], 0.1)
        tok = ext.kl_cov_token_losses(b.logp[sl], b.old_logp[sl], b.adv[sl], 0.1, sel)
        expected += ref.agg(tok, b.mask[sl], "token-mean", global_tokens=float(tokens))
    np.testing.assert_allclose(total, expected, **TOL)
    full = float(POLICY_LOSSES["kl_cov"](*_args(b), "token-mean", kl_cov_ratio=0.1)[0])
    assert abs(full - total) > 1e-6  # the split changed the selection


def test_up_gradient_and_clipfrac():
    b = make_batch(6)
    lp, old, adv, m = _args(b)
    g = jax.grad(lambda x: POLICY_LOSSES["up"](x, old, adv, m, "token-sum")[0])(lp)
    pos = (b.adv > 0) & (b.mask > 0)
    np.testing.assert_allclose(np.asarray(g)[pos], -b.adv[pos], **TOL)  # REINFORCE, no ratio
    _, metrics = POLICY_LOSSES["up"](*_args(b), "token-mean")
    r = np.exp(b.logp - b.old_logp)
    neg = (b.adv <= 0) * b.mask
    clipped = -b.adv * np.clip(r, 0.8, 1.2) > -b.adv * r
    assert float(metrics["actor/pg_clipfrac"]) == pytest.approx((clipped * neg).sum() / neg.sum())


def test_token_budget_and_bad_options():
    for ratio in (2e-4, 0.05, 0.2, 1 / 3):
        ns = np.array([0, 1, 3, 19, 20, 60, 4999, 5000, 10000, 15001])
        got = jax.jit(lambda n, r=ratio: token_budget(n, r, 10**5))(jnp.asarray(ns))
        np.testing.assert_array_equal(got, [ext.budget(int(n), ratio) for n in ns])
    b = _batch()
    with pytest.raises(ValueError, match="rng"):
        POLICY_LOSSES["clip_cov"](*_args(b))
    with pytest.raises(ValueError, match="> 0"):
        POLICY_LOSSES["kl_cov"](*_args(b), kl_cov_ratio=0.0)
    with pytest.raises(ValueError, match="kl_cov_ratio"):
        POLICY_LOSSES["kl_cov"](*_args(b), kl_cov_rate=0.1)
