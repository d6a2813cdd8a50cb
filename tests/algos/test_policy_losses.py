"""Policy/value losses against float64 NumPy references; gradients; micro-batch invariance."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import numpy_refs as ref
import numpy_refs_ext as ext
import pytest
from algos_testdata import make_batch

from mimojax.algos import AGG_MODES, POLICY_LOSSES, agg_loss, global_counts, value_loss
from mimojax.algos.value_loss import entropy_from_logits

TOL = dict(rtol=2e-5, atol=2e-6)
VERL_KEYS = {"actor/pg_loss", "actor/pg_clipfrac", "actor/pg_clipfrac_lower", "actor/ppo_kl"}


def _batch(seed=0, empty_row=True):
    b = make_batch(seed, empty_row=empty_row)
    # ratio e^1.5 > 3 with A < 0: dual-clip territory (logprobs stay < 0)
    b.old_logp[:2, 0], b.logp[:2, 0], b.adv[:2, 0], b.mask[1, 0] = -3.0, -1.5, -1.0, 1.0
    return b


def _j(x):
    return jnp.asarray(x, jnp.float32)


def _call(name, b, mode, is_w=None, **opts):
    return POLICY_LOSSES[name](
        _j(b.logp),
        _j(b.old_logp),
        _j(b.adv),
        _j(b.mask),
        mode,
        rollout_is_weights_BxT=None if is_w is None else _j(is_w),
        **opts,
    )


def _ref_token_losses(name, b, is_w):
    lp, old, adv, m = b.logp, b.old_logp, b.adv, b.mask
    w = 1.0 if is_w is None else is_w
    if name == "vanilla":
        return ref.ppo_token_losses(lp, old, adv, 0.2, 0.28, 3.0)[0] * w, dict(
            clip_low=0.2, clip_high=0.28, clip_c=3.0
        )
    if name == "gspo":
        return ref.gspo_token_losses(lp, old, adv, m, 0.05, 0.1) * w, dict(
            clip_low=0.05, clip_high=0.1
        )
    if name == "cispo":
        return ref.cispo_token_losses(lp, old, adv, 0.2, 0.3) * w, dict(clip_low=0.2, clip_high=0.3)
    if name == "sapo":
        return ref.sapo_token_losses(lp, old, adv, 1.0, 1.05) * w, {}
    if name in ("dppo_tv", "dppo_kl"):
        kind, thr = name[-2:], {"dppo_tv": 0.15, "dppo_kl": 0.05}[name]
        return ref.dppo_token_losses(lp, old, adv, thr, thr, 20.0, kind)[0] * w, {}
    if name == "reinforce":
        return -adv * lp * w, {}
    if name == "up":
        return ext.up_token_losses(lp, old, adv, 0.2, 0.25, 3.0) * w, dict(clip_high=0.25)
    raise KeyError(name)


TOKEN_LOSSES = ["vanilla", "gspo", "cispo", "sapo", "dppo_tv", "dppo_kl", "reinforce", "up"]


@pytest.mark.parametrize("name", TOKEN_LOSSES)
@pytest.mark.parametrize("mode", AGG_MODES)
def test_loss_matches_numpy_reference(name, mode):
    b = _batch()
    is_w = None
    if mode == "token-mean":
        is_w = np.random.default_rng(1).uniform(0.5, 2.0, b.mask.shape)
    expected_tok, opts = _ref_token_losses(name, b, is_w)
    loss, metrics = _call(name, b, mode, is_w, **opts)
    assert np.isfinite(float(loss))
    np.testing.assert_allclose(float(loss), ref.agg(expected_tok, b.mask, mode), **TOL)
    assert VERL_KEYS <= set(metrics)
    np.testing.assert_allclose(metrics["actor/pg_loss"], float(loss), rtol=1e-6)


def _masked_mean(x, m):
    return (x * m).sum() / m.sum()


def test_vanilla_metrics_match_reference():
    b = _batch()
    _, clipped, dual = ref.ppo_token_losses(b.logp, b.old_logp, b.adv, 0.2, 0.28, 3.0)
    _, metrics = _call("vanilla", b, "token-mean", clip_low=0.2, clip_high=0.28)
    np.testing.assert_allclose(metrics["actor/pg_clipfrac"], _masked_mean(clipped, b.mask), **TOL)
    np.testing.assert_allclose(
        metrics["actor/pg_clipfrac_lower"], _masked_mean(dual, b.mask), **TOL
    )
    np.testing.assert_allclose(
        metrics["actor/ppo_kl"], _masked_mean(b.old_logp - b.logp, b.mask), **TOL
    )
    assert 0 < metrics["actor/pg_clipfrac"] < 1 and metrics["actor/pg_clipfrac_lower"] > 0


def test_gmpo_matches_reference():
    b = _batch()
    seq = ref.gmpo_seq_losses(b.logp, b.old_logp, b.adv, b.mask, 0.4, 0.4)
    nonempty = b.mask.sum(1) > 0
    loss, _ = _call("gmpo", b, "seq-mean-token-mean")
    np.testing.assert_allclose(float(loss), seq[nonempty].mean(), **TOL)
    # registered under verl's name too
    loss2, _ = _call("geo_mean", b, "seq-mean-token-mean")
    assert float(loss2) == float(loss)


def test_ppo_clip_gradient_is_zero_exactly_on_clipped_tokens():
    b = _batch(empty_row=False)

    def loss(lp):
        return POLICY_LOSSES["vanilla"](
            lp,
            _j(b.old_logp),
            _j(b.adv),
            _j(b.mask),
            "token-sum",
            clip_low=0.2,
            clip_high=0.28,
            clip_c=3.0,
        )[0]

    g = np.asarray(jax.grad(loss)(_j(b.logp)), np.float64)
    expected = ref.ppo_token_grads(b.logp, b.old_logp, b.adv, 0.2, 0.28, 3.0) * b.mask
    np.testing.assert_allclose(g, expected, rtol=1e-5, atol=1e-7)
    _, clipped, dual = ref.ppo_token_losses(b.logp, b.old_logp, b.adv, 0.2, 0.28, 3.0)
    live = (b.mask > 0) & ~clipped & ~dual
    assert np.all(g[~live] == 0.0)  # exactly zero where verl's is
    assert np.all(g[live] != 0.0)
    assert clipped.sum() > 0 and dual.sum() > 0


def test_cispo_and_reinforce_gradients():
    b = _batch(empty_row=False)
    w = np.random.default_rng(2).uniform(0.5, 2.0, b.mask.shape)

    def grad(name, **opts):
        f = lambda lp: POLICY_LOSSES[name](
            lp, _j(b.old_logp), _j(b.adv), _j(b.mask), "token-sum", **opts
        )[0]
        return np.asarray(jax.grad(f)(_j(b.logp)), np.float64)

    r = np.exp(b.logp - b.old_logp)
    np.testing.assert_allclose(
        grad("cispo", clip_ratio=0.2), -np.clip(r, 0.8, 1.2) * b.adv * b.mask, rtol=1e-5, atol=1e-7
    )
    f = lambda lp: POLICY_LOSSES["reinforce"](
        lp, _j(b.old_logp), _j(b.adv), _j(b.mask), "token-sum", rollout_is_weights_BxT=_j(w)
    )[0]
    np.testing.assert_allclose(jax.grad(f)(_j(b.logp)), -b.adv * w * b.mask, rtol=1e-5, atol=1e-7)


MICRO_CASES = [("vanilla", m) for m in AGG_MODES] + [
    ("gspo", "seq-mean-token-mean"),
    ("cispo", "token-mean"),
    ("sapo", "seq-mean-token-mean"),
    ("gmpo", "seq-mean-token-mean"),
    ("dppo_tv", "seq-mean-token-sum-norm"),
    ("dppo_kl", "token-mean"),
    ("reinforce", "seq-mean-token-sum"),
    ("up", "token-mean"),
]


@pytest.mark.parametrize("name,mode", MICRO_CASES)
def test_micro_batches_sum_to_full_batch(name, mode):
    b = _batch()
    with jax.enable_x64(True):  # compare at 1e-6 independent of float32 rounding
        lp, old, adv, mask = (jnp.asarray(x) for x in (b.logp, b.old_logp, b.adv, b.mask))
        tokens, seqs = global_counts(mask)

        def loss(lp, o, a, m):
            return POLICY_LOSSES[name](lp, o, a, m, mode, tokens, seqs)[0]

        grad = jax.jit(jax.value_and_grad(loss))
        full, g_full = grad(lp, old, adv, mask)
        total, g_parts = 0.0, []
        for sl in (slice(0, 4), slice(4, 8), slice(8, 12)):
            v, g = grad(lp[sl], old[sl], adv[sl], mask[sl])
            total += float(v)
            g_parts.append(g)
        assert abs(total - float(full)) < 1e-6
        np.testing.assert_allclose(np.concatenate(g_parts), g_full, atol=1e-6, rtol=0)


@pytest.mark.parametrize("name", sorted(POLICY_LOSSES))
def test_every_loss_jits_in_float32(name):
    b = _batch()
    opts = {"clip_cov": {"rng": jax.random.key(0), "clip_cov_ratio": 0.05}}.get(name, {})
    args = (_j(b.logp), _j(b.old_logp), _j(b.adv), _j(b.mask))
    f = lambda *a: POLICY_LOSSES[name](*a, "token-mean", **opts)
    (loss, metrics), (jloss, jmetrics) = f(*args), jax.jit(f)(*args)
    assert loss.dtype == jnp.float32 and np.isfinite(float(loss))
    np.testing.assert_allclose(jloss, loss, rtol=1e-5, atol=1e-6)
    assert set(jmetrics) == set(metrics) and VERL_KEYS <= set(metrics)


def test_entropy_bonus_kl_term_and_metrics_under_jit():
    b = _batch()
    rng = np.random.default_rng(3)
    logits = rng.normal(size=(*b.mask.shape, 5))
    p = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    ent_np = -(p * np.log(p)).sum(-1)
    ent = entropy_from_logits(_j(logits))
    np.testing.assert_allclose(ent, ent_np, rtol=1e-5)
    ref_logp = b.logp + rng.normal(scale=0.1, size=b.mask.shape)

    @jax.jit
    def f(lp):
        return POLICY_LOSSES["vanilla"](
            lp,
            _j(b.old_logp),
            _j(b.adv),
            _j(b.mask),
            "token-mean",
            entropy_BxT=ent,
            entropy_coeff=0.01,
            ref_logp_BxT=_j(ref_logp),
            kl_coef=0.1,
            kl_estimator="k3",
        )

    loss, metrics = f(_j(b.logp))
    assert VERL_KEYS | {"actor/entropy", "actor/kl_loss", "actor/kl_coef"} <= set(metrics)
    ent_agg = ref.agg(ent_np, b.mask, "token-mean")
    kl_agg = ref.agg(ref.kl(b.logp, ref_logp, "k3"), b.mask, "token-mean")
    np.testing.assert_allclose(metrics["actor/entropy"], ent_agg, rtol=1e-5)
    np.testing.assert_allclose(metrics["actor/kl_loss"], kl_agg, rtol=1e-5)
    np.testing.assert_allclose(
        loss, metrics["actor/pg_loss"] - 0.01 * ent_agg + 0.1 * kl_agg, rtol=1e-5, atol=1e-6
    )


def test_value_loss_matches_reference_and_is_micro_batch_invariant():
    b = _batch()
    rng = np.random.default_rng(4)
    vpred, values, returns = (rng.normal(size=b.mask.shape) for _ in range(3))
    per_tok, clipped = ref.value_losses(vpred, values, returns, 0.2)
    for mode in AGG_MODES:
        loss, metrics = value_loss(_j(vpred), _j(values), _j(returns), _j(b.mask), 0.2, mode)
        np.testing.assert_allclose(float(loss), 0.5 * ref.agg(per_tok, b.mask, mode), **TOL)
    np.testing.assert_allclose(metrics["critic/vf_clipfrac"], _masked_mean(clipped, b.mask), **TOL)
    assert {"critic/vf_loss", "critic/vf_clipfrac"} <= set(metrics)
    tokens, seqs = global_counts(b.mask)
    parts = [
        value_loss(
            _j(vpred[s]),
            _j(values[s]),
            _j(returns[s]),
            _j(b.mask[s]),
            0.2,
            "seq-mean-token-mean",
            tokens,
            seqs,
        )[0]
        for s in (slice(0, 5), slice(5, 12))
    ]
    full = value_loss(_j(vpred), _j(values), _j(returns), _j(b.mask), 0.2, "seq-mean-token-mean")
    assert abs(float(sum(parts)) - float(full[0])) < 1e-6


def test_bypass_mode_matches_its_parts():
    b = _batch(empty_row=False)
    rollout = b.old_logp
    loss, metrics = _call("bypass_mode", b, "token-mean", loss_type="ppo_clip")
    expected, _ = _call("vanilla", b, "token-mean")
    assert float(loss) == pytest.approx(float(expected), rel=1e-6)
    assert "rollout_corr/k3_kl" in metrics
    loss, _ = _call("bypass_mode", b, "token-mean", loss_type="reinforce", rollout_is_threshold=2.0)
    w = ref.token_tis(b.logp, rollout, b.mask, 2.0)
    assert float(loss) == pytest.approx(
        ref.agg(-b.adv * b.logp * w, b.mask, "token-mean"), rel=1e-5
    )
    # rejection shrinks the mask, so the token-mean denominator changes too
    loss, metrics = _call(
        "bypass_mode", b, "token-mean", rollout_rs="token_k2", rollout_rs_threshold=0.02
    )
    lr = b.logp - rollout
    keep = b.mask * (0.5 * lr**2 <= 0.02)
    tok = ref.ppo_token_losses(b.logp, rollout, b.adv, 0.2, 0.2, 3.0)[0]
    assert float(loss) == pytest.approx(ref.agg(tok, keep, "token-mean"), rel=1e-5)
    assert float(metrics["rollout_corr/rollout_rs_masked_fraction"]) > 0


def test_vmap_over_a_leading_axis():
    b = _batch()
    lp = jnp.stack([_j(b.logp), _j(b.logp) - 0.1])
    f = lambda x: POLICY_LOSSES["gspo"](
        x, _j(b.old_logp), _j(b.adv), _j(b.mask), "seq-mean-token-mean"
    )[0]
    np.testing.assert_allclose(jax.vmap(f)(lp), [f(lp[0]), f(lp[1])], rtol=1e-6)


def test_bad_options_and_shapes():
    b = _batch()
    with pytest.raises(ValueError, match="clip_high"):
        _call("vanilla", b, "token-mean", clip_hgh=0.3)
    with pytest.raises(ValueError, match="seq-mean-token-mean"):
        _call("vanilla", b, "seq_mean")
    with pytest.raises(ValueError, match="clip_c"):
        _call("vanilla", b, "token-mean", clip_c=0.5)
    with pytest.raises(ValueError, match="adv_BxT.*logp_BxT"):
        POLICY_LOSSES["vanilla"](_j(b.logp), _j(b.old_logp), _j(b.adv[:, :-1]), _j(b.mask))
    with pytest.raises(KeyError, match="vanilla"):
        POLICY_LOSSES["vanila"]
    with pytest.raises(ValueError, match="loss_BxT"):
        agg_loss(jnp.zeros((2, 3)), jnp.zeros((2, 4)))
