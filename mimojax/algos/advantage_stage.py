"""The advantage stage: truncation, overlong shaping, KL-in-reward, group filtering, estimator.

One pure function from a batch's arrays to advantages, in the order verl applies them:

    rewards = 0 on truncated rows                           (truncated="zero")
    rewards = token rewards (+ DAPO overlong penalty on the last valid token)
    rewards = rewards - kl_coef * KL(old || ref)           (use_kl_in_reward)
    mask    = response mask * keep_B                       (filter_groups, on scores_B)
    adv, returns = estimator(rewards, mask, ...) * mask
    mask    = mask * ~truncated_B                          (truncated="mask", after the estimator)

The estimator still receives `valid_B` unchanged; only the mask is filtered. What the
estimator needs (groups, values, a baseline rollout, log-prob stats, Dr.GRPO's switch) comes
from the traits it was registered with, so callers keep no lists of names.

    settings = AdvantageSettings(estimator="grpo", filter_groups=True, num_groups=4)
    out = jax.jit(advantage_stage, static_argnums=0)(settings, AdvantageInputs(
        token_rewards_BxT=r, response_mask_BxT=m, scores_B=s, group_ids_B=g, valid_B=v))
    out.adv_BxT, out.returns_BxT, out.loss_mask_BxT, out.metrics, out.current_kl
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from mimojax.algos.batch_filters import apply_overlong_shaping, filter_groups
from mimojax.algos.checks import check_shapes
from mimojax.algos.kl import apply_kl_penalty
from mimojax.algos.ops import as_float
from mimojax.algos.registry import ADVANTAGE_ESTIMATORS, KL_ESTIMATORS, EstimatorTraits

# Estimator arguments the stage fills itself; `estimator_kwargs` may not set them.
_STAGE_ARGS = frozenset(
    {
        "token_rewards_BxT",
        "mask_BxT",
        "group_ids_B",
        "values_BxT",
        "gamma",
        "lam",
        "valid_B",
        "num_groups",
        "norm_by_std",
        "baseline_rewards_B",
        "old_logp_BxT",
        "sum_pi_squared_BxT",
        "rollout_is_weights_BxT",
        "rewards_BxK",
    }
)


TRUNCATED_MODES = ("keep", "mask", "zero")


@dataclasses.dataclass(frozen=True)
class AdvantageSettings:
    """Static knobs of the advantage stage (hashable: pass it as a jit static argument)."""

    estimator: str = "grpo"  # a name in ADVANTAGE_ESTIMATORS
    gamma: float = 1.0
    lam: float = 1.0
    norm_by_std: bool = True  # used only by estimators whose traits say norm_by_std
    num_groups: int | None = None  # group ids lie in [0, num_groups); None: B
    overlong_enable: bool = False  # DAPO soft overlong punishment
    overlong_max_response_len: int = 0
    overlong_buffer_len: int = 0
    overlong_penalty_factor: float = 1.0
    use_kl_in_reward: bool = False
    kl_type: str = "kl"  # a name in KL_ESTIMATORS
    filter_groups: bool = False  # DAPO dynamic sampling: mask out zero-variance groups
    # Responses cut off by the token budget: "keep" (as graded), "mask" (DAPO's overlong
    # filtering, TRL's mask_truncated_completions: in the group baseline, out of the loss) or
    # "zero" (reward 0 before filtering and the estimator: a cut-off answer earns nothing, so
    # a lucky last number in a rambling response is not reinforced).
    truncated: str = "keep"
    # further static keyword arguments of the estimator, e.g. (("epsilon", 1e-6),)
    estimator_kwargs: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self):
        fn = ADVANTAGE_ESTIMATORS[self.estimator]  # unknown names raise with near matches
        if self.truncated not in TRUNCATED_MODES:
            raise ValueError(f"truncated must be one of {TRUNCATED_MODES}, got {self.truncated!r}")
        if self.use_kl_in_reward:
            KL_ESTIMATORS[self.kl_type]  # noqa: B018
        if self.overlong_enable and not self.overlong_buffer_len > 0:
            raise ValueError(f"overlong buffer_len must be > 0, got {self.overlong_buffer_len}")
        if self.num_groups is not None and not self.num_groups > 0:
            raise ValueError(f"num_groups must be > 0, got {self.num_groups}")
        params = inspect.signature(fn).parameters
        for key, _ in self.estimator_kwargs:
            if key in _STAGE_ARGS:
                raise ValueError(
                    f"estimator_kwargs may not set {key!r}: the advantage stage passes it"
                )
            if key not in params:
                known = sorted(p for p in params if p not in _STAGE_ARGS)
                raise ValueError(
                    f"advantage estimator {self.estimator!r} has no argument {key!r}; "
                    f"its settable arguments: {', '.join(known) or '(none)'}"
                )

    @property
    def traits(self) -> EstimatorTraits:
        """The estimator's registered traits."""
        return ADVANTAGE_ESTIMATORS.traits(self.estimator)


class AdvantageInputs(NamedTuple):
    """The batch's arrays (a pytree: vmap over a leading axis; None for absent entries)."""

    token_rewards_BxT: Any
    response_mask_BxT: Any
    scores_B: Any = None  # raw outcome scores (filter_groups)
    group_ids_B: Any = None  # ints in [0, num_groups) (group estimators, filter_groups)
    valid_B: Any = None  # False = infra failure; None: all valid
    values_BxT: Any = None  # critic values (needs_values)
    old_logp_BxT: Any = None  # (use_kl_in_reward, needs_logprob_stats)
    ref_logp_BxT: Any = None  # (use_kl_in_reward)
    kl_coef: Any = None  # scalar, traced so an adaptive coefficient does not recompile
    baseline_rewards_B: Any = None  # greedy rollout's reward (needs_baseline_rollout)
    sum_pi_squared_BxT: Any = None  # sum_v pi(v)^2 per token (needs_logprob_stats)
    rollout_is_weights_BxT: Any = None  # optional, estimators with needs_logprob_stats
    rewards_BxK: Any = None  # optional per-dimension rewards, estimators that take them (gdpo)
    truncated_B: Any = None  # True: cut off by the token budget (truncated != "keep")


class AdvantageOutput(NamedTuple):
    """Advantages and returns (zero outside loss_mask), the filtered mask, metrics, current KL."""

    adv_BxT: jax.Array
    returns_BxT: jax.Array
    loss_mask_BxT: jax.Array  # response mask after group filtering
    metrics: dict[str, jax.Array]
    current_kl: jax.Array  # for KLController.update; 0 without KL-in-reward


def required_inputs(settings: AdvantageSettings) -> tuple[str, ...]:
    """Names of the AdvantageInputs fields `settings` needs besides rewards and mask."""
    t = settings.traits
    need = []
    if t.needs_groups or settings.filter_groups:
        need.append("group_ids_B")
    if settings.filter_groups:
        need.append("scores_B")
    if settings.truncated != "keep":
        need.append("truncated_B")
    if t.needs_values:
        need.append("values_BxT")
    if t.needs_logprob_stats or settings.use_kl_in_reward:
        need.append("old_logp_BxT")
    if settings.use_kl_in_reward:
        need += ["ref_logp_BxT", "kl_coef"]
    if t.needs_baseline_rollout:
        need.append("baseline_rewards_B")
    if t.needs_logprob_stats:
        need.append("sum_pi_squared_BxT")
    return tuple(need)


def _why(settings: AdvantageSettings, name: str) -> str:
    t, why = settings.traits, []
    if name == "group_ids_B" and t.needs_groups:
        why.append("needs_groups")
    if name == "values_BxT":
        why.append("needs_values")
    if name == "baseline_rewards_B":
        why.append("needs_baseline_rollout")
    if name in ("old_logp_BxT", "sum_pi_squared_BxT") and t.needs_logprob_stats:
        why.append("needs_logprob_stats")
    if name in ("old_logp_BxT", "ref_logp_BxT", "kl_coef") and settings.use_kl_in_reward:
        why.append("use_kl_in_reward")
    if name in ("group_ids_B", "scores_B") and settings.filter_groups:
        why.append("filter_groups")
    if name == "truncated_B":
        why.append(f"truncated={settings.truncated!r}")
    return f"{name} ({', '.join(why)})"


def _check_inputs(settings: AdvantageSettings, inputs: AdvantageInputs) -> None:
    missing = [n for n in required_inputs(settings) if getattr(inputs, n) is None]
    if missing:
        raise ValueError(
            f"advantage estimator {settings.estimator!r} with these settings needs "
            f"{', '.join(_why(settings, n) for n in missing)}, missing from the inputs"
        )
    if inputs.rewards_BxK is not None:
        params = inspect.signature(ADVANTAGE_ESTIMATORS[settings.estimator]).parameters
        if "rewards_BxK" not in params:
            raise ValueError(
                f"advantage estimator {settings.estimator!r} does not take rewards_BxK"
            )
    arrays = {k: v for k, v in inputs._asdict().items() if k != "kl_coef"}
    check_shapes(**arrays)
    if inputs.kl_coef is not None and jnp.ndim(inputs.kl_coef) != 0:
        raise ValueError(f"kl_coef must be a scalar, got shape {jnp.shape(inputs.kl_coef)}")


def _estimator_kwargs(settings: AdvantageSettings, x: AdvantageInputs) -> dict[str, Any]:
    t = settings.traits
    kwargs = dict(settings.estimator_kwargs)
    if t.norm_by_std:
        kwargs["norm_by_std"] = bool(settings.norm_by_std)
    if t.needs_baseline_rollout:
        kwargs["baseline_rewards_B"] = x.baseline_rewards_B
    if t.needs_logprob_stats:
        kwargs["old_logp_BxT"] = x.old_logp_BxT
        kwargs["sum_pi_squared_BxT"] = x.sum_pi_squared_BxT
        if x.rollout_is_weights_BxT is not None:
            kwargs["rollout_is_weights_BxT"] = x.rollout_is_weights_BxT
    if x.rewards_BxK is not None:
        kwargs["rewards_BxK"] = x.rewards_BxK
    return kwargs


def advantage_stage(settings: AdvantageSettings, inputs: AdvantageInputs) -> AdvantageOutput:
    """Overlong shaping, KL-in-reward, group filtering and the estimator, as one pure function."""
    _check_inputs(settings, inputs)
    x = inputs
    s = settings
    rewards = jnp.asarray(x.token_rewards_BxT)
    rewards = rewards.astype(jnp.result_type(rewards, jnp.float32))
    mask = as_float(x.response_mask_BxT, rewards)
    metrics: dict[str, jax.Array] = {}
    scores_B = None if x.scores_B is None else jnp.asarray(x.scores_B)
    if s.truncated != "keep":  # how many: response_length/clip_ratio
        truncated_B = jnp.asarray(x.truncated_B).astype(bool)
    if s.truncated == "zero":  # before everything that reads rewards or scores
        rewards = jnp.where(truncated_B[:, None], jnp.zeros_like(rewards), rewards)
        if scores_B is not None:
            scores_B = jnp.where(truncated_B, jnp.zeros_like(scores_B), scores_B)

    if s.overlong_enable:
        rewards, m = apply_overlong_shaping(
            rewards,
            mask,
            int(s.overlong_max_response_len),
            int(s.overlong_buffer_len),
            s.overlong_penalty_factor,
        )
        metrics.update(m)
    current_kl = jnp.zeros((), rewards.dtype)
    if s.use_kl_in_reward:
        coef = jnp.asarray(x.kl_coef, rewards.dtype)
        old, ref = (jnp.asarray(a, rewards.dtype) for a in (x.old_logp_BxT, x.ref_logp_BxT))
        rewards, current_kl, m = apply_kl_penalty(rewards, old, ref, mask, coef, s.kl_type)
        metrics.update(m)
    valid = None if x.valid_B is None else jnp.asarray(x.valid_B)
    if s.filter_groups:
        keep_B, m = filter_groups(
            scores_B, jnp.asarray(x.group_ids_B), valid, num_groups=s.num_groups
        )
        metrics.update(m)
        mask = mask * as_float(keep_B, mask)[:, None]

    estimator = ADVANTAGE_ESTIMATORS[s.estimator]
    adv, returns = estimator(
        rewards,
        mask,
        None if x.group_ids_B is None else jnp.asarray(x.group_ids_B),
        None if x.values_BxT is None else jnp.asarray(x.values_BxT),
        float(s.gamma),
        float(s.lam),
        valid_B=valid,
        num_groups=s.num_groups,
        **_estimator_kwargs(s, x),
    )
    if s.truncated == "mask":  # after the estimator: they still count in the group baseline
        mask = mask * as_float(~truncated_B, mask)[:, None]
    return AdvantageOutput(adv * mask, returns * mask, mask, metrics, current_kl)
