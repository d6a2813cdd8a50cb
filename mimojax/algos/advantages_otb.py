"""Optimal Token Baseline (OTB): a per-token, per-group baseline weighted by path variance.

"The Optimal Token Baseline: Variance Reduction for Long-Horizon LLM-RL" (Li, Xu, Li et al.,
PMLR v306), as verl's compute_optimal_token_baseline_advantage and
compute_multi_turn_optimal_token_baseline_advantage. For sample i at step t:

    G_it = sum_{s >= t} r_is                          (undiscounted reward-to-go)
    w_it = 1 - 2 pi_it + sum_v pi_t(v)^2               (logit-gradient proxy of ||score||^2)
           (times rho_it^2 when rollout IS weights rho are given)
    W_it = sum_{s <= t} w_is                           (cumulative path variance)
    b_t  = sum_i G_it W_it / (sum_i W_it + eps)        (over the samples of i's group)
    A_it = G_it - b_t

Only valid tokens count; pi_it = exp(old_logp). A group with one sample gets b = 0. With
`handle_zero_tail`, a group's unique longest sample gets b = 0 from the second-longest
length on. Infra failures (`valid_B` False) leave the groups and get zero advantage.
Returns `(adv_BxT, returns_BxT)` with returns = G on valid tokens (verl leaves G unmasked).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from mimojax.algos.advantages_common import prepare
from mimojax.algos.ops import group_max
from mimojax.algos.registry import ADVANTAGE_ESTIMATORS, EstimatorTraits

# old_logp_BxT and sum_pi_squared_BxT come from the log-prob pass; rollout IS weights optional
_OTB_TRAITS = EstimatorTraits(needs_groups=True, needs_logprob_stats=True)


def _returns_and_path_variance(r, mask, old_logp, sum_pi_sq, is_w):
    returns = jnp.flip(jnp.cumsum(jnp.flip(r * mask, -1), -1), -1)
    w = 1.0 - 2.0 * jnp.exp(old_logp) + sum_pi_sq
    if is_w is not None:
        w = w * jnp.square(is_w)
    return returns, jnp.cumsum(w * mask, -1)


def _otb_advantages(returns, w_cum, mask, member_B, group_ids_B, G, zero_tail, eps):
    """A = (G_t - b_t) * mask with b_t per group and column (see the module docstring)."""
    member = member_B.astype(mask.dtype)
    m = mask * member[:, None]
    seg = lambda x: jax.ops.segment_sum(x, group_ids_B, num_segments=G)
    num_GxT, den_GxT = seg(returns * w_cum * m), seg(w_cum * m)
    base = (num_GxT / (den_GxT + eps))[group_ids_B]
    n_B = seg(member)[group_ids_B]
    base = jnp.where((n_B > 1)[:, None], base, 0.0)
    if zero_tail:
        len_B = m.sum(-1)
        is_max_B = (len_B == group_max(len_B, group_ids_B, member, G)[group_ids_B]) & (member > 0)
        n_max_B = seg(is_max_B.astype(m.dtype))[group_ids_B]
        second_G = group_max(jnp.where(is_max_B, -jnp.inf, len_B), group_ids_B, member, G)
        tail_B = is_max_B & (n_max_B == 1) & (n_B > 1)
        cols = jnp.arange(m.shape[-1], dtype=m.dtype)[None, :]
        cut = jnp.where(tail_B, second_G[group_ids_B], jnp.inf)[:, None]
        base = jnp.where(cols >= cut, 0.0, base)
    return (returns - base) * m


def _prepare(name, token_rewards_BxT, mask_BxT, group_ids_B, valid_B, num_groups, old, sps, isw):
    if old is None or sps is None:
        raise ValueError(
            f"advantage estimator {name!r} needs old_logp_BxT and sum_pi_squared_BxT "
            "(sum over the vocabulary of the training policy's squared probabilities)"
        )
    r, mask, valid, G = prepare(
        name,
        token_rewards_BxT,
        mask_BxT,
        group_ids_B,
        valid_B,
        num_groups,
        need_groups=True,
        old_logp_BxT=old,
        sum_pi_squared_BxT=sps,
        rollout_is_weights_BxT=isw,
    )
    cast = lambda x: None if x is None else jnp.asarray(x, r.dtype)
    returns, w_cum = _returns_and_path_variance(r, mask, cast(old), cast(sps), cast(isw))
    return returns, w_cum, mask, valid, G


@ADVANTAGE_ESTIMATORS.register("optimal_token_baseline", traits=_OTB_TRAITS)
def optimal_token_baseline(
    token_rewards_BxT,
    mask_BxT,
    group_ids_B=None,
    values_BxT=None,
    gamma=1.0,
    lam=1.0,
    *,
    valid_B=None,
    num_groups=None,
    old_logp_BxT=None,
    sum_pi_squared_BxT=None,
    rollout_is_weights_BxT=None,
    handle_zero_tail=True,
    epsilon=1e-8,
):
    """OTB: A_t = G_t - sum_i G_it W_it / sum_i W_it, the baseline per absolute position t.

    Source: verl compute_optimal_token_baseline_advantage. gamma/lam are ignored.
    """
    returns, w_cum, mask, valid, G = _prepare(
        "optimal_token_baseline", token_rewards_BxT, mask_BxT, group_ids_B, valid_B,
        num_groups, old_logp_BxT, sum_pi_squared_BxT, rollout_is_weights_BxT,
    )  # fmt: skip
    adv = _otb_advantages(returns, w_cum, mask, valid, group_ids_B, G, handle_zero_tail, epsilon)
    return jax.lax.stop_gradient(adv), jax.lax.stop_gradient(returns * mask)


@ADVANTAGE_ESTIMATORS.register("tir_optimal_token_baseline", traits=_OTB_TRAITS)
def tir_optimal_token_baseline(
    token_rewards_BxT,
    mask_BxT,
    group_ids_B=None,
    values_BxT=None,
    gamma=1.0,
    lam=1.0,
    *,
    valid_B=None,
    num_groups=None,
    old_logp_BxT=None,
    sum_pi_squared_BxT=None,
    rollout_is_weights_BxT=None,
    handle_zero_tail=True,
    epsilon=1e-8,
):
    """Multi-turn OTB: the baseline is indexed by the k-th model token, not the position.

    Tool-output tokens (mask 0) are squeezed out before samples are aligned, so the k-th
    generated token of each sample shares b_k; samples with no valid token leave the group.
    Source: verl compute_multi_turn_optimal_token_baseline_advantage.
    """
    returns, w_cum, mask, valid, G = _prepare(
        "tir_optimal_token_baseline", token_rewards_BxT, mask_BxT, group_ids_B, valid_B,
        num_groups, old_logp_BxT, sum_pi_squared_BxT, rollout_is_weights_BxT,
    )  # fmt: skip
    B, T = mask.shape
    k_BxT = jnp.cumsum(mask > 0, -1) - 1
    dest = jnp.where(mask > 0, k_BxT, T)  # masked tokens go out of range and are dropped
    rows = jnp.arange(B)[:, None]
    squeeze = lambda x: jnp.zeros_like(x).at[rows, dest].set(x, mode="drop")
    len_B = mask.sum(-1)
    mask_c = (jnp.arange(T)[None, :] < len_B[:, None]).astype(mask.dtype)
    member = valid * (len_B > 0)
    adv_c = _otb_advantages(
        squeeze(returns), squeeze(w_cum), mask_c, member, group_ids_B, G, handle_zero_tail, epsilon
    )
    adv = jnp.take_along_axis(adv_c, jnp.clip(k_BxT, 0, T - 1), -1) * mask
    return jax.lax.stop_gradient(adv), jax.lax.stop_gradient(returns * mask)
