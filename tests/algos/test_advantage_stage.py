"""The advantage stage against float64 NumPy references and against today's trainer sequence."""

from __future__ import annotations

import dataclasses
import inspect

import jax
import jax.numpy as jnp
import numpy as np
import numpy_refs as ref
import numpy_refs_ext as ext
import pytest

from mimojax.algos import (
    ADVANTAGE_ESTIMATORS,
    AdvantageInputs,
    AdvantageSettings,
    advantage_stage,
    apply_kl_penalty,
    apply_overlong_shaping,
    filter_groups,
    required_inputs,
)

B, T, G = 12, 10, 5
MAX_LEN, BUF, FACTOR = T, 4, 0.7  # lengths above 6 are penalised
GAMMA, LAM = 0.9, 0.8
X64_TOL = dict(rtol=1e-10, atol=1e-10)
# whitening: masked_mean's + 1e-8 denominator (verl) shifts results by ~1e-9 relative
WHITENED_TOL = dict(rtol=1e-8, atol=1e-8)
FILTERED_GROUP = 1  # all its raw scores are equal
SWITCHES = dict(overlong=True, kl=True, filt=True)
NO_SWITCHES = dict(overlong=False, kl=False, filt=False)


@dataclasses.dataclass
class StageBatch:
    rewards: np.ndarray  # BxT, score on the last valid token
    mask: np.ndarray
    scores: np.ndarray
    ids: np.ndarray
    valid: np.ndarray
    values: np.ndarray
    old: np.ndarray
    refl: np.ndarray
    baseline: np.ndarray
    sum_pi_sq: np.ndarray
    is_w: np.ndarray


def make_stage_batch(seed: int) -> StageBatch:
    """Uneven groups (one singleton), tool tokens, long responses, a filtered group and
    infra failures: one in a group of 4, one leaving a group of 2 with a single member."""
    rng = np.random.default_rng(seed)
    sizes = [4, 3, 1, 2, 2]
    ids = rng.permutation(np.repeat(np.arange(G), sizes)).astype(np.int32)
    lengths = rng.integers(3, T + 1, size=B)
    lengths[rng.choice(B, 3, replace=False)] = T
    mask = (np.arange(T)[None, :] < lengths[:, None]).astype(np.float64)
    tool = (rng.random((B, T)) < 0.15) & (np.arange(T)[None, :] < lengths[:, None] - 1)
    mask[tool] = 0.0
    scores = rng.normal(size=B)
    scores[ids == FILTERED_GROUP] = 1.0
    rewards = np.zeros((B, T))
    rewards[np.arange(B), lengths - 1] = scores
    valid = np.ones(B, bool)
    valid[np.flatnonzero(ids == 0)[0]] = False
    valid[np.flatnonzero(ids == 3)[0]] = False
    old = np.minimum(-rng.exponential(1.0, (B, T)), -1e-3)
    pi = np.exp(old)
    return StageBatch(
        rewards=rewards,
        mask=mask,
        scores=scores,
        ids=ids,
        valid=valid,
        values=rng.normal(size=(B, T)),
        old=old,
        refl=old + rng.normal(scale=0.3, size=(B, T)),
        baseline=rng.normal(size=B),
        sum_pi_sq=pi**2 + (1 - pi) ** 2 * rng.uniform(0, 1, (B, T)),
        is_w=rng.uniform(0.5, 1.5, (B, T)),
    )


# ---------------------------------------------------------------- float64 NumPy reference


def ref_stage(name, b, overlong, kl, filt, coef=0.05, kl_type="k3", norm_by_std=True):
    """The stage's composition, written out with the NumPy references (float64)."""
    r, m, metrics, current_kl = b.rewards.copy(), b.mask.copy(), {}, 0.0
    if overlong:
        pen = ref.overlong(m.sum(1), MAX_LEN, BUF, FACTOR)
        for i in range(B):
            if m[i].any():
                r[i, np.flatnonzero(m[i])[-1]] += pen[i]
        metrics["reward/overlong_penalty_mean"] = pen.mean()
        metrics["reward/overlong_frac"] = np.mean(pen < 0)
    if kl:
        k = ref.kl(b.old, b.refl, kl_type) * m
        r = r - coef * k
        current_kl = np.mean([k[i].sum() / (m[i].sum() + 1e-8) for i in range(B)])
        metrics["actor/reward_kl_penalty"] = current_kl
        metrics["actor/reward_kl_penalty_coeff"] = coef
    if filt:
        keep = ref.filter_groups(b.scores, b.ids, b.valid)
        m = m * keep[:, None]
        groups = ref.groups_of(b.ids, b.valid)
        kept = len({int(b.ids[i]) for i in np.flatnonzero(keep)})
        metrics["batch/groups"] = len(groups)
        metrics["batch/groups_kept"] = kept
        metrics["batch/groups_filtered_frac"] = 1 - kept / len(groups)
    v = b.valid
    if name == "grpo":
        adv = ret = ref.grpo(r, m, b.ids, v, norm_by_std=norm_by_std)
    elif name == "rloo":
        adv = ret = ref.rloo(r, m, b.ids, v)
    elif name == "gae":
        adv, ret = ref.gae(r, b.values, m, GAMMA, LAM, v)
    elif name == "remax":
        adv, ret = ref.remax(r, m, b.baseline, v)
    elif name == "optimal_token_baseline":
        adv, ret = ext.otb(r, m, b.ids, b.old, b.sum_pi_sq, b.is_w, v)
    else:
        raise KeyError(name)
    return adv * m, ret * m, m, metrics, current_kl


# ---------------------------------------------------------------- helpers


def settings_for(name, overlong, kl, filt, kl_type="k3", norm_by_std=True, **kw):
    return AdvantageSettings(
        estimator=name,
        gamma=GAMMA,
        lam=LAM,
        norm_by_std=norm_by_std,
        num_groups=G,
        overlong_enable=overlong,
        overlong_max_response_len=MAX_LEN,
        overlong_buffer_len=BUF,
        overlong_penalty_factor=FACTOR,
        use_kl_in_reward=kl,
        kl_type=kl_type,
        filter_groups=filt,
        **kw,
    )


def full_inputs(b, dtype, coef=0.05):
    f = lambda x: jnp.asarray(x, dtype)
    return AdvantageInputs(
        token_rewards_BxT=f(b.rewards),
        response_mask_BxT=f(b.mask),
        scores_B=f(b.scores),
        group_ids_B=jnp.asarray(b.ids),
        valid_B=jnp.asarray(b.valid),
        values_BxT=f(b.values),
        old_logp_BxT=f(b.old),
        ref_logp_BxT=f(b.refl),
        kl_coef=jnp.asarray(coef, dtype),
        baseline_rewards_B=f(b.baseline),
        sum_pi_squared_BxT=f(b.sum_pi_sq),
        rollout_is_weights_BxT=f(b.is_w),
    )


def only(inputs: AdvantageInputs, names) -> AdvantageInputs:
    """Rewards and mask plus exactly `names`; every other field None."""
    keep = {"token_rewards_BxT", "response_mask_BxT", *names}
    return AdvantageInputs(**{k: (v if k in keep else None) for k, v in inputs._asdict().items()})


def as_np(out):
    return jax.tree.map(lambda x: np.asarray(x, np.float64), out)


@pytest.fixture
def x64():
    with jax.enable_x64(True):
        yield


# ---------------------------------------------------------------- float64 references


CASES = [("on", SWITCHES), ("off", NO_SWITCHES)]


@pytest.mark.parametrize("name", ["grpo", "rloo", "gae", "remax", "optimal_token_baseline"])
@pytest.mark.parametrize("label,switches", CASES, ids=[c[0] for c in CASES])
def test_matches_float64_reference(x64, name, label, switches):
    b = make_stage_batch(0)
    s = settings_for(name, **switches)
    out = as_np(advantage_stage(s, full_inputs(b, jnp.float64)))
    assert out.adv_BxT.dtype == np.float64
    adv, ret, mask, metrics, current_kl = ref_stage(name, b, **switches)
    np.testing.assert_allclose(out.adv_BxT, adv, **(WHITENED_TOL if name == "gae" else X64_TOL))
    np.testing.assert_allclose(out.returns_BxT, ret, **X64_TOL)
    np.testing.assert_array_equal(out.loss_mask_BxT, mask)
    assert sorted(out.metrics) == sorted(metrics)
    for k, v in metrics.items():
        np.testing.assert_allclose(out.metrics[k], v, **X64_TOL, err_msg=k)
    np.testing.assert_allclose(out.current_kl, current_kl, **X64_TOL)
    # infra failures get zero advantage; the filtered group loses its loss tokens
    assert np.all(out.adv_BxT[~b.valid] == 0)
    if switches["filt"]:
        assert np.all(out.loss_mask_BxT[b.ids == FILTERED_GROUP] == 0)
        assert np.all(out.loss_mask_BxT[~b.valid] == 0)
        assert out.metrics["batch/groups_kept"] == G - 1
        # a group left with one valid member is kept (as verl)
        assert out.loss_mask_BxT[(b.ids == 3) & b.valid].sum() > 0
    else:
        assert out.current_kl == 0


@pytest.mark.parametrize("kl_type", ["kl", "k2", "low_var_kl"])
def test_grpo_kl_types_and_dr_grpo(x64, kl_type):
    b = make_stage_batch(1)
    s = settings_for("grpo", **SWITCHES, kl_type=kl_type, norm_by_std=False)
    out = as_np(advantage_stage(s, full_inputs(b, jnp.float64, coef=0.3)))
    adv, _, _, _, current_kl = ref_stage(
        "grpo", b, **SWITCHES, coef=0.3, kl_type=kl_type, norm_by_std=False
    )
    np.testing.assert_allclose(out.adv_BxT, adv, **X64_TOL)
    np.testing.assert_allclose(out.current_kl, current_kl, **X64_TOL)


def test_gdpo_takes_per_dimension_rewards(x64):
    b = make_stage_batch(2)
    rewards_BxK = np.stack([b.scores, np.random.default_rng(2).normal(size=B)], 1)
    s = settings_for("gdpo", **SWITCHES, estimator_kwargs=(("reward_weights_K", (1.0, 0.5)),))
    x = full_inputs(b, jnp.float64)._replace(rewards_BxK=jnp.asarray(rewards_BxK))
    out = as_np(advantage_stage(s, x))
    _, _, mask, _, _ = ref_stage("grpo", b, **SWITCHES)
    want = ref.gdpo(rewards_BxK, mask, b.ids, [1.0, 0.5], b.valid)
    np.testing.assert_allclose(out.adv_BxT, want, **WHITENED_TOL)
    with pytest.raises(ValueError, match="'grpo' does not take rewards_BxK"):
        advantage_stage(settings_for("grpo", **SWITCHES), x)


# ---------------------------------------------------------------- today's trainer sequence

_STD_NORMED = ("grpo", "grpo_passk", "grpo_vectorized", "gdpo")  # trainer.py before issue 12


def trainer_before(name, b, coef, kl_type, norm_by_std):
    """mimojax/train/trainer.py's `with timer("adv"):` block before the stage (all switches on)."""
    metrics = {}
    mask = b.mask.astype(np.float32)
    old, refl = b.old.astype(np.float32), b.refl.astype(np.float32)
    values = (b.values * b.mask).astype(np.float32)
    rewards = jnp.asarray(b.rewards.astype(np.float32))
    rewards, m = apply_overlong_shaping(rewards, mask, MAX_LEN, BUF, FACTOR)
    metrics.update({k: float(v) for k, v in m.items()})
    rewards, current_kl, m = apply_kl_penalty(rewards, old, refl, mask, coef, kl_type)
    metrics.update({k: float(v) for k, v in m.items()})
    valid = jnp.asarray(b.valid)
    keep_B, m = filter_groups(
        jnp.asarray(b.scores.astype(np.float32)), jnp.asarray(b.ids), valid, num_groups=G
    )
    metrics.update({k: float(v) for k, v in m.items()})
    mask = mask * np.asarray(keep_B, np.float32)[:, None]
    kwargs = {"norm_by_std": bool(norm_by_std)}
    if name not in _STD_NORMED:
        kwargs = {}
    adv, returns = ADVANTAGE_ESTIMATORS[name](
        rewards,
        jnp.asarray(mask),
        jnp.asarray(b.ids),
        jnp.asarray(values),
        float(GAMMA),
        float(LAM),
        valid_B=valid,
        num_groups=G,
        **kwargs,
    )
    adv, returns = np.asarray(adv) * mask, np.asarray(returns) * mask
    return adv, returns, mask, metrics, float(current_kl)


@pytest.mark.parametrize("name,norm_by_std", [("grpo", True), ("grpo", False), ("gae", True)])
def test_reproduces_todays_trainer_numbers(name, norm_by_std):
    b = make_stage_batch(3)
    coef, kl_type = 0.1, "k3"
    want = trainer_before(name, b, coef, kl_type, norm_by_std)
    s = settings_for(name, **SWITCHES, kl_type=kl_type, norm_by_std=norm_by_std)
    x = full_inputs(b, jnp.float32, coef=coef)._replace(
        values_BxT=jnp.asarray((b.values * b.mask).astype(np.float32))
    )
    for stage in (advantage_stage, jax.jit(advantage_stage, static_argnums=0)):
        out = stage(s, x)
        assert out.adv_BxT.dtype == jnp.float32
        for got, exp in zip(out[:3], want[:3], strict=True):
            np.testing.assert_allclose(np.asarray(got), exp, rtol=1e-6, atol=1e-6)
        assert sorted(out.metrics) == sorted(want[3])
        for k, v in want[3].items():
            np.testing.assert_allclose(float(out.metrics[k]), v, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(float(out.current_kl), want[4], rtol=1e-6)


# ---------------------------------------------------------------- jit and vmap


def test_jit_matches_eager_and_kl_coef_does_not_recompile():
    b = make_stage_batch(4)
    s = settings_for("grpo", **SWITCHES)
    traces = []

    def counted(settings, inputs):
        traces.append(settings)
        return advantage_stage(settings, inputs)

    jitted = jax.jit(counted, static_argnums=0)
    for coef in (0.05, 0.2):
        x = full_inputs(b, jnp.float32, coef=coef)
        eager, out = as_np(advantage_stage(s, x)), as_np(jitted(s, x))
        for got, exp in zip(jax.tree.leaves(out), jax.tree.leaves(eager), strict=True):
            np.testing.assert_allclose(got, exp, rtol=1e-6, atol=1e-6)
    assert len(traces) == 1
    assert hash(s) == hash(settings_for("grpo", **SWITCHES))


@pytest.mark.parametrize("name", ["grpo", "gae", "optimal_token_baseline"])
def test_vmap_over_batches(x64, name):
    batches = [make_stage_batch(seed) for seed in (5, 6, 7)]
    s = settings_for(name, **SWITCHES)
    stacked = jax.tree.map(
        lambda *xs: jnp.stack(xs), *[full_inputs(b, jnp.float64, coef=0.1) for b in batches]
    )
    out = as_np(jax.jit(jax.vmap(lambda x: advantage_stage(s, x)))(stacked))
    assert out.adv_BxT.shape == (3, B, T)
    for i, b in enumerate(batches):
        adv, ret, mask, metrics, current_kl = ref_stage(name, b, **SWITCHES, coef=0.1)
        tol = WHITENED_TOL if name == "gae" else X64_TOL
        np.testing.assert_allclose(out.adv_BxT[i], adv, **tol)
        np.testing.assert_allclose(out.returns_BxT[i], ret, **X64_TOL)
        np.testing.assert_array_equal(out.loss_mask_BxT[i], mask)
        np.testing.assert_allclose(out.current_kl[i], current_kl, **X64_TOL)
        for k, v in metrics.items():
            np.testing.assert_allclose(out.metrics[k][i], v, **X64_TOL, err_msg=k)


# ---------------------------------------------------------------- every estimator, by its traits


@pytest.mark.parametrize("name", sorted(ADVANTAGE_ESTIMATORS))
def test_every_estimator_runs_on_what_its_traits_ask_for(name):
    """Given only the inputs its traits name, each estimator runs and gives finite outputs;
    an estimator needing something its traits do not declare fails here."""
    b = make_stage_batch(8)
    full = full_inputs(b, jnp.float32)
    for switches in (NO_SWITCHES, SWITCHES):
        s = settings_for(name, **switches)
        out = advantage_stage(s, only(full, ["valid_B", *required_inputs(s)]))
        for leaf in jax.tree.leaves(out):
            assert np.all(np.isfinite(np.asarray(leaf))), (name, switches)
        assert np.all(np.asarray(out.adv_BxT)[~b.valid] == 0)


@pytest.mark.parametrize("name", sorted(ADVANTAGE_ESTIMATORS))
def test_traits_agree_with_the_signature(name):
    traits = ADVANTAGE_ESTIMATORS.traits(name)
    params = inspect.signature(ADVANTAGE_ESTIMATORS[name]).parameters
    assert traits.norm_by_std == ("norm_by_std" in params)
    assert traits.needs_baseline_rollout == ("baseline_rewards_B" in params)
    assert traits.needs_logprob_stats == ("sum_pi_squared_BxT" in params)


@pytest.mark.parametrize("name", sorted(ADVANTAGE_ESTIMATORS))
def test_each_missing_input_raises_one_clear_error(name):
    b = make_stage_batch(9)
    s = settings_for(name, **SWITCHES)
    need = required_inputs(s)
    for missing in need:
        x = only(full_inputs(b, jnp.float32), [n for n in need if n != missing])
        with pytest.raises(ValueError, match=rf"'{name}'.*{missing}"):
            advantage_stage(s, x)


def test_missing_error_names_the_reason():
    b = make_stage_batch(9)
    x = only(full_inputs(b, jnp.float32), [])
    with pytest.raises(ValueError, match=r"'gae'.*values_BxT \(needs_values\)"):
        advantage_stage(settings_for("gae", **NO_SWITCHES), x)
    with pytest.raises(ValueError, match=r"baseline_rewards_B \(needs_baseline_rollout\)"):
        advantage_stage(settings_for("remax", **NO_SWITCHES), x)
    msg = r"old_logp_BxT \(needs_logprob_stats, use_kl_in_reward\)"
    with pytest.raises(ValueError, match=msg):
        advantage_stage(settings_for("optimal_token_baseline", **SWITCHES), x)


def test_bad_settings():
    with pytest.raises(KeyError, match="Did you mean 'grpo_passk'"):
        AdvantageSettings(estimator="grpo_pass_k")
    with pytest.raises(KeyError, match="unknown KL estimator"):
        AdvantageSettings(use_kl_in_reward=True, kl_type="k4")
    with pytest.raises(ValueError, match="buffer_len must be > 0"):
        AdvantageSettings(overlong_enable=True, overlong_buffer_len=0)
    with pytest.raises(ValueError, match="no argument 'epsilonn'.*epsilon"):
        AdvantageSettings(estimator="grpo", estimator_kwargs=(("epsilonn", 1e-3),))
    with pytest.raises(ValueError, match="may not set 'norm_by_std'"):
        AdvantageSettings(estimator="grpo", estimator_kwargs=(("norm_by_std", False),))
    with pytest.raises(ValueError, match="kl_coef must be a scalar"):
        b = make_stage_batch(0)
        x = full_inputs(b, jnp.float32)._replace(kl_coef=jnp.ones(2))
        advantage_stage(settings_for("grpo", **SWITCHES), x)


def test_static_estimator_kwargs_reach_the_estimator():
    b = make_stage_batch(10)
    x = full_inputs(b, jnp.float32)
    plain = advantage_stage(settings_for("gae", **NO_SWITCHES), x)
    s = settings_for("gae", **NO_SWITCHES, estimator_kwargs=(("whiten", False),))
    raw = advantage_stage(s, x)
    np.testing.assert_allclose(raw.returns_BxT, plain.returns_BxT, rtol=1e-6, atol=1e-6)
    assert not np.allclose(raw.adv_BxT, plain.adv_BxT)
