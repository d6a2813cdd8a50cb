"""Advantage estimators against float64 NumPy references, hand cases, jit/vmap, bad input."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import numpy_refs as ref
import pytest
from algos_testdata import make_batch

from mimojax.algos import ADVANTAGE_ESTIMATORS

TOL = dict(rtol=2e-5, atol=2e-5)


def _run(name, b, use_valid, **opts):
    adv, ret = ADVANTAGE_ESTIMATORS[name](
        token_rewards_BxT=jnp.asarray(b.rewards, jnp.float32),
        mask_BxT=jnp.asarray(b.mask),
        group_ids_B=jnp.asarray(b.ids),
        values_BxT=jnp.asarray(b.values, jnp.float32),
        valid_B=jnp.asarray(b.valid) if use_valid else None,
        **opts,
    )
    return np.asarray(adv, np.float64), np.asarray(ret, np.float64)


def _ref(name, b, valid, gamma=0.9, lam=0.8):
    r, m, ids = b.rewards, b.mask, b.ids
    if name == "grpo":
        return ref.grpo(r, m, ids, valid), {}
    if name == "drgrpo":
        return ref.grpo(r, m, ids, valid, norm_by_std=False), {"norm_by_std": False}
    if name == "grpo_passk":
        return ref.grpo_passk(r, m, ids, valid), {}
    if name == "rloo":
        return ref.rloo(r, m, ids, valid), {}
    if name == "opo":
        return ref.opo(r, m, ids, valid), {}
    if name == "gpg":
        return ref.gpg(r, m, ids, valid, f_norm=2.0), {"f_norm": 2.0}
    if name == "reinforce_plus_plus_baseline":
        return ref.reinforce_pp_baseline(r, m, ids, valid), {}
    if name == "gae":
        return ref.gae(r, b.values, m, gamma, lam, valid)[0], {"gamma": gamma, "lam": lam}
    if name == "reinforce_plus_plus":
        return ref.reinforce_pp(r, m, gamma, valid)[0], {"gamma": gamma}
    if name == "remax":
        base = np.linspace(-1, 1, r.shape[0])
        return ref.remax(r, m, base, valid)[0], {"baseline_rewards_B": jnp.asarray(base)}
    raise KeyError(name)


NAMES = [
    "grpo",
    "drgrpo",
    "grpo_passk",
    "rloo",
    "opo",
    "gpg",
    "reinforce_plus_plus_baseline",
    "gae",
    "reinforce_plus_plus",
    "remax",
]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("seed,binary,use_valid", [(0, False, True), (1, True, False)])
def test_matches_numpy_reference(name, seed, binary, use_valid):
    b = make_batch(seed, binary=binary)
    valid = b.valid if use_valid else None
    expected, opts = _ref(name, b, valid)
    registered = "grpo" if name == "drgrpo" else name
    adv, _ = _run(registered, b, use_valid, **opts)
    np.testing.assert_allclose(adv, expected, **TOL)
    if use_valid:  # infra failures: zero advantage
        assert np.all(adv[~b.valid] == 0)


def test_returns_match_reference():
    b = make_batch(3)
    _, ret = _run("gae", b, True, gamma=0.9, lam=0.8)
    np.testing.assert_allclose(
        ret, ref.gae(b.rewards, b.values, b.mask, 0.9, 0.8, b.valid)[1], **TOL
    )
    _, ret = _run("reinforce_plus_plus", b, True, gamma=0.9)
    np.testing.assert_allclose(ret, ref.reinforce_pp(b.rewards, b.mask, 0.9, b.valid)[1], **TOL)


def test_gdpo_matches_reference():
    b = make_batch(4)
    rng = np.random.default_rng(4)
    rewards_BxK = np.stack([rng.integers(0, 2, 12), rng.normal(size=12)], 1).astype(float)
    w = np.array([1.0, 0.5])
    adv, _ = _run(
        "gdpo",
        b,
        True,
        rewards_BxK=jnp.asarray(rewards_BxK, jnp.float32),
        reward_weights_K=jnp.asarray(w),
    )
    np.testing.assert_allclose(adv, ref.gdpo(rewards_BxK, b.mask, b.ids, w, b.valid), **TOL)
    # without per-dimension rewards, GDPO is whitened GRPO
    adv, _ = _run("gdpo", b, False)
    one_dim = b.rewards.sum(1, keepdims=True)
    np.testing.assert_allclose(adv, ref.gdpo(one_dim, b.mask, b.ids, [1.0]), **TOL)


def _outcome(scores, T=3):
    r = np.zeros((len(scores), T), np.float32)
    r[:, -1] = scores
    return jnp.asarray(r), jnp.ones((len(scores), T))


def test_hand_computed_grpo_rloo_passk_opo():
    r, m = _outcome([1.0, 0.0, 1.0, 0.0, 2.0])
    ids = jnp.array([0, 0, 0, 0, 1])
    adv, _ = ADVANTAGE_ESTIMATORS["grpo"](r, m, ids)
    std = np.std([1, 0, 1, 0], ddof=1)  # 0.57735
    np.testing.assert_allclose(
        adv[:4, 0], np.array([0.5, -0.5, 0.5, -0.5]) / (std + 1e-6), rtol=1e-6
    )
    assert float(adv[4, 0]) == pytest.approx(2.0 / (1 + 1e-6))  # singleton: mean 0, std 1
    adv, _ = ADVANTAGE_ESTIMATORS["grpo"](r, m, ids, norm_by_std=False)
    np.testing.assert_allclose(adv[:, 1], [0.5, -0.5, 0.5, -0.5, 2.0])
    adv, _ = ADVANTAGE_ESTIMATORS["rloo"](r, m, ids)
    np.testing.assert_allclose(adv[:, 0], [1 - 1 / 3, -2 / 3, 1 - 1 / 3, -2 / 3, 2.0], rtol=1e-6)

    r, m = _outcome([0.2, 0.9, 0.5, 0.9, 0.1, 0.7])
    ids = jnp.array([0, 0, 0, 0, 1, 1])
    adv, _ = ADVANTAGE_ESTIMATORS["grpo_passk"](r, m, ids, norm_by_std=False)
    np.testing.assert_allclose(adv[:, 0], [0, 0, 0, 0, 0, 0.6], atol=1e-6)  # tie at 0.9 -> 0

    r, _ = _outcome([1.0, 0.0])
    m = jnp.array([[1, 0, 0], [1, 1, 1]], jnp.float32)  # lengths 1 and 3
    adv, _ = ADVANTAGE_ESTIMATORS["opo"](r, m, jnp.array([0, 0]))
    np.testing.assert_allclose(adv[:, 0], [1 - 0.25, -0.25], rtol=1e-6)  # baseline 1*1/(1+3)


def test_hand_computed_gae():
    r = jnp.array([[0.0, 0.0, 1.0]])
    v = jnp.array([[0.5, 0.2, 0.4]])
    m = jnp.array([[1.0, 0.0, 1.0]])  # middle token is tool output: skipped
    adv, ret = ADVANTAGE_ESTIMATORS["gae"](r, m, values_BxT=v, gamma=0.5, lam=0.5, whiten=False)
    a2 = 1.0 - 0.4
    a0 = 0.0 + 0.5 * 0.4 - 0.5 + 0.25 * a2
    np.testing.assert_allclose(adv, [[a0, 0.0, a2]], rtol=1e-6)
    np.testing.assert_allclose(ret, [[a0 + 0.5, 0.0, 1.0]], rtol=1e-6)


def test_infra_failures_are_excluded_from_group_stats():
    b = make_batch(5)
    adv1, _ = _run("grpo", b, True)
    b.rewards[~b.valid] += 100.0  # garbage rewards on failed samples change nothing
    adv2, _ = _run("grpo", b, True)
    np.testing.assert_allclose(adv1, adv2, atol=1e-6)


@pytest.mark.parametrize("name", ["grpo", "rloo", "gae", "reinforce_plus_plus"])
def test_jit_and_vmap_over_seeds(name):
    b = make_batch(0)
    mask, ids, values = jnp.asarray(b.mask), jnp.asarray(b.ids), jnp.asarray(b.values)
    est = ADVANTAGE_ESTIMATORS[name]

    def adv_for_seed(key):
        r = jax.random.bernoulli(key, 0.5, mask.shape).astype(jnp.float32) * mask
        return est(r, mask, ids, values, gamma=0.95, lam=0.9)[0]

    keys = jax.random.split(jax.random.key(0), 4)
    batched = jax.jit(jax.vmap(adv_for_seed))(keys)
    assert batched.shape == (4, *mask.shape)
    for i in range(4):
        np.testing.assert_allclose(batched[i], adv_for_seed(keys[i]), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", sorted(ADVANTAGE_ESTIMATORS))
def test_every_estimator_jits(name):
    b = make_batch(7)
    otb = {
        "old_logp_BxT": jnp.asarray(b.old_logp, jnp.float32),
        "sum_pi_squared_BxT": jnp.ones((12, 9)),
    }
    extra = {
        "remax": {"baseline_rewards_B": jnp.zeros(12)},
        "optimal_token_baseline": otb,
        "tir_optimal_token_baseline": otb,
    }.get(name, {})
    args = (
        jnp.asarray(b.rewards, jnp.float32),
        jnp.asarray(b.mask),
        jnp.asarray(b.ids),
        jnp.asarray(b.values, jnp.float32),
    )
    fn = lambda *a: ADVANTAGE_ESTIMATORS[name](*a, gamma=0.9, lam=0.9, **extra)
    for eager, jitted in zip(fn(*args), jax.jit(fn)(*args), strict=True):
        np.testing.assert_allclose(jitted, eager, rtol=1e-5, atol=1e-6)


def test_unknown_estimator_lists_registered_names():
    with pytest.raises(KeyError) as err:
        ADVANTAGE_ESTIMATORS["grpo_pass_k"]
    msg = str(err.value)
    assert "grpo_passk" in msg and "rloo" in msg and "Did you mean" in msg
    with pytest.raises(ValueError):
        ADVANTAGE_ESTIMATORS["nope"]


def test_shape_mismatch_names_the_arrays():
    r, m = jnp.zeros((4, 5)), jnp.ones((4, 6))
    with pytest.raises(ValueError, match="mask_BxT.*token_rewards_BxT"):
        ADVANTAGE_ESTIMATORS["grpo"](r, m, jnp.zeros(4, jnp.int32))
    with pytest.raises(ValueError, match="group_ids_B"):
        ADVANTAGE_ESTIMATORS["grpo"](r, jnp.ones((4, 5)), jnp.zeros(3, jnp.int32))
    with pytest.raises(ValueError, match="needs group_ids_B"):
        ADVANTAGE_ESTIMATORS["rloo"](r, jnp.ones((4, 5)))
    with pytest.raises(ValueError, match=r"num_groups=4"):
        ADVANTAGE_ESTIMATORS["grpo"](r, jnp.ones((4, 5)), jnp.array([0, 1, 2, 7]))
    with pytest.raises(ValueError, match="values_BxT"):
        ADVANTAGE_ESTIMATORS["gae"](r, jnp.ones((4, 5)))
