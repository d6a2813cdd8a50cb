"""verl's vectorised estimators and the Optimal Token Baseline against NumPy references."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import numpy_refs as ref
import numpy_refs_ext as ext
import pytest
from algos_testdata import make_batch

from mimojax.algos import ADVANTAGE_ESTIMATORS

TOL = dict(rtol=2e-5, atol=2e-5)
OTB = ["optimal_token_baseline", "tir_optimal_token_baseline"]


def _j(x):
    return None if x is None else jnp.asarray(x, jnp.float32)


def _sum_pi_sq(old_logp, seed):
    # sum_v pi(v)^2 lies in [pi^2, pi^2 + (1 - pi)^2] for the sampled token's pi
    pi = np.exp(old_logp)
    return pi**2 + (1 - pi) ** 2 * np.random.default_rng(seed).uniform(0, 1, pi.shape)


@pytest.mark.parametrize("use_valid", [True, False])
def test_vectorized_estimators_match_reference(use_valid):
    b = make_batch(0)
    valid = b.valid if use_valid else None
    common = dict(valid_B=None if valid is None else jnp.asarray(valid))
    args = (_j(b.rewards), jnp.asarray(b.mask), jnp.asarray(b.ids))
    adv, ret = ADVANTAGE_ESTIMATORS["rloo_vectorized"](*args, **common)
    np.testing.assert_allclose(adv, ext.rloo_vectorized(b.rewards, b.mask, b.ids, valid), **TOL)
    np.testing.assert_allclose(ret, adv)
    assert ADVANTAGE_ESTIMATORS["grpo_vectorized"] is ADVANTAGE_ESTIMATORS["grpo"]
    for norm in (True, False):
        adv, _ = ADVANTAGE_ESTIMATORS["grpo_vectorized"](*args, norm_by_std=norm, **common)
        expected = ref.grpo(b.rewards, b.mask, b.ids, valid, norm_by_std=norm)
        np.testing.assert_allclose(adv, expected, **TOL)


def test_rloo_vectorized_hand_computed():
    r = jnp.zeros((4, 2)).at[:, 1].set(jnp.array([1.0, 0.0, 0.5, 3.0]))
    m, ids = jnp.ones((4, 2)), jnp.array([0, 0, 0, 1])
    adv, _ = ADVANTAGE_ESTIMATORS["rloo_vectorized"](r, m, ids)
    np.testing.assert_allclose(adv[:, 0], [1 - 0.25, 0 - 0.75, 0.5 - 0.5, 0.0], atol=1e-6)
    adv, _ = ADVANTAGE_ESTIMATORS["rloo"](r, m, ids)
    assert float(adv[3, 0]) == 3.0  # rloo keeps a singleton's reward; the vectorised one: 0


@pytest.mark.parametrize("name", OTB)
@pytest.mark.parametrize(
    "seed,use_valid,use_is,zero_tail",
    [(0, True, False, True), (1, False, True, True), (2, True, True, False)],
)
def test_otb_matches_reference(name, seed, use_valid, use_is, zero_tail):
    b = make_batch(seed, empty_row=seed == 1)
    valid = b.valid if use_valid else None
    sps = _sum_pi_sq(b.old_logp, seed)
    is_w = np.random.default_rng(seed + 10).uniform(0.5, 2.0, b.mask.shape) if use_is else None
    adv, ret = ADVANTAGE_ESTIMATORS[name](
        _j(b.rewards), jnp.asarray(b.mask), jnp.asarray(b.ids),
        valid_B=None if valid is None else jnp.asarray(valid), old_logp_BxT=_j(b.old_logp),
        sum_pi_squared_BxT=_j(sps), rollout_is_weights_BxT=_j(is_w), handle_zero_tail=zero_tail,
    )  # fmt: skip
    fn = ext.otb if name == "optimal_token_baseline" else ext.tir_otb
    exp_adv, exp_ret = fn(b.rewards, b.mask, b.ids, b.old_logp, sps, is_w, valid, zero_tail)
    np.testing.assert_allclose(adv, exp_adv, **TOL)
    np.testing.assert_allclose(ret, exp_ret, **TOL)
    if use_valid:
        assert np.all(np.asarray(adv)[~b.valid] == 0)


def test_otb_hand_computed():
    # pi = 0.5 and sum pi^2 = 0.5 give w = 1 - 1 + 0.5 = 0.5 on every token.
    r = jnp.array([[0, 0, 1.0], [0, 0, 0], [2.0, 0, 0]])
    m = jnp.array([[1, 1, 1], [1, 1, 0], [1, 0, 0]], jnp.float32)
    old = jnp.full((3, 3), math.log(0.5))
    f = lambda **o: ADVANTAGE_ESTIMATORS["optimal_token_baseline"](
        r, m, jnp.array([0, 0, 1]), old_logp_BxT=old, sum_pi_squared_BxT=jnp.full((3, 3), 0.5), **o
    )[0]
    # G0 = 1, G1 = 0; W0 = [.5, 1, 1.5], W1 = [.5, 1, -]; b = [.5, .5, 1]; singleton: b = 0
    expected = np.array([[0.5, 0.5, 0.0], [-0.5, -0.5, 0.0], [2.0, 0.0, 0.0]])
    np.testing.assert_allclose(f(handle_zero_tail=False), expected, atol=1e-6)
    expected[0, 2] = 1.0  # the unique longest sample's tail (t >= 2) gets b = 0
    np.testing.assert_allclose(f(), expected, atol=1e-6)


def test_tir_otb_aligns_by_model_token():
    b = make_batch(3)
    sps = _sum_pi_sq(b.old_logp, 3)
    kw = lambda m: dict(
        token_rewards_BxT=_j(b.rewards * m), mask_BxT=jnp.asarray(m),
        group_ids_B=jnp.asarray(b.ids), old_logp_BxT=_j(b.old_logp), sum_pi_squared_BxT=_j(sps),
    )  # fmt: skip
    run = lambda name, m: np.asarray(ADVANTAGE_ESTIMATORS[name](**kw(m))[0])
    assert not np.allclose(run(OTB[0], b.mask), run(OTB[1], b.mask))  # tool tokens shift t
    prefix = (np.arange(9)[None, :] < b.mask.sum(1, keepdims=True)).astype(float)
    np.testing.assert_allclose(run(OTB[0], prefix), run(OTB[1], prefix), **TOL)


@pytest.mark.parametrize("name", OTB)
def test_otb_jit_vmap_and_missing_inputs(name):
    b = make_batch(4)
    m, ids = jnp.asarray(b.mask), jnp.asarray(b.ids)
    old, sps = _j(b.old_logp), _j(_sum_pi_sq(b.old_logp, 4))

    def adv_for(key):
        r = jax.random.bernoulli(key, 0.5, m.shape).astype(jnp.float32) * m
        return ADVANTAGE_ESTIMATORS[name](r, m, ids, old_logp_BxT=old, sum_pi_squared_BxT=sps)[0]

    keys = jax.random.split(jax.random.key(0), 3)
    batched = jax.jit(jax.vmap(adv_for))(keys)
    np.testing.assert_allclose(batched[1], adv_for(keys[1]), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="sum_pi_squared_BxT"):
        ADVANTAGE_ESTIMATORS[name](_j(b.rewards), m, ids, old_logp_BxT=old)
    with pytest.raises(ValueError, match="sum_pi_squared_BxT"):
        ADVANTAGE_ESTIMATORS[name](
            _j(b.rewards), m, ids, old_logp_BxT=old, sum_pi_squared_BxT=sps[:, :-1]
        )
