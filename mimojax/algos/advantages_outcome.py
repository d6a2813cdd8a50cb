"""Group-based outcome advantage estimators (one scalar reward per sequence).

Each returns `(adv_BxT, returns_BxT)`. The sequence score is the sum of `token_rewards_BxT`
over T (the outcome reward sits on the last valid token, as in verl). Samples with
`valid_B == False` (infra failures) are left out of every group statistic and get zero
advantage. Group ids must lie in [0, num_groups); num_groups defaults to B.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from mimojax.algos.advantages_common import broadcast, prepare
from mimojax.algos.ops import group_count_mean_std, group_max, masked_whiten
from mimojax.algos.registry import ADVANTAGE_ESTIMATORS, EstimatorTraits

EPS = 1e-6
GROUP_TRAITS = EstimatorTraits(needs_groups=True)
GROUP_STD_TRAITS = EstimatorTraits(needs_groups=True, norm_by_std=True)  # takes Dr.GRPO's switch


def _group_normalise(scores_B, group_ids_B, valid_B, num_groups, norm_by_std, epsilon):
    _, mean_G, std_G = group_count_mean_std(scores_B, group_ids_B, valid_B, num_groups)
    adv_B = scores_B - mean_G[group_ids_B]
    if norm_by_std:
        adv_B = adv_B / (std_G[group_ids_B] + epsilon)
    return adv_B * valid_B


def leave_one_out_B(scores_B, group_ids_B, valid_B, num_groups, alone_B):
    """n/(n-1) * (r - group mean) = r - mean of the others; `alone_B` where a sample is alone."""
    count_G, mean_G, _ = group_count_mean_std(scores_B, group_ids_B, valid_B, num_groups)
    n_B = count_G[group_ids_B]
    loo_B = (scores_B - mean_G[group_ids_B]) * n_B / jnp.maximum(n_B - 1.0, 1.0)
    return jnp.where(n_B > 1, loo_B, alone_B) * valid_B


def _done(adv_BxT):
    adv_BxT = jax.lax.stop_gradient(adv_BxT)
    return adv_BxT, adv_BxT


@ADVANTAGE_ESTIMATORS.register("grpo", traits=GROUP_STD_TRAITS)
def grpo(
    token_rewards_BxT,
    mask_BxT,
    group_ids_B=None,
    values_BxT=None,
    gamma=1.0,
    lam=1.0,
    *,
    valid_B=None,
    num_groups=None,
    epsilon=EPS,
    norm_by_std=True,
):
    """GRPO: (r - group mean) / (group std + eps); with norm_by_std=False it is Dr.GRPO."""
    r, mask, valid, G = prepare(
        "grpo", token_rewards_BxT, mask_BxT, group_ids_B, valid_B, num_groups, need_groups=True
    )
    adv_B = _group_normalise(r.sum(-1), group_ids_B, valid, G, norm_by_std, epsilon)
    return _done(broadcast(adv_B, mask))


@ADVANTAGE_ESTIMATORS.register("grpo_passk", traits=GROUP_STD_TRAITS)
def grpo_passk(
    token_rewards_BxT,
    mask_BxT,
    group_ids_B=None,
    values_BxT=None,
    gamma=1.0,
    lam=1.0,
    *,
    valid_B=None,
    num_groups=None,
    epsilon=EPS,
    norm_by_std=True,
):
    """Pass@k GRPO: only a group's unique best sample gets r_max - r_second (/ std).

    Groups with fewer than two valid samples get zero advantage (verl raises instead).
    """
    r, mask, valid, G = prepare(
        "grpo_passk",
        token_rewards_BxT,
        mask_BxT,
        group_ids_B,
        valid_B,
        num_groups,
        need_groups=True,
    )
    s, g = r.sum(-1), group_ids_B
    count_G, _, std_G = group_count_mean_std(s, g, valid, G)
    max_G = group_max(s, g, valid, G)
    is_max_B = (s == max_G[g]) & (valid > 0)
    n_max_G = jax.ops.segment_sum(is_max_B.astype(s.dtype), g, num_segments=G)
    rest_max_G = group_max(jnp.where(is_max_B, -jnp.inf, s), g, valid, G)
    unique_best_B = is_max_B & (n_max_G[g] == 1) & (count_G[g] >= 2)
    gap_B = jnp.where(unique_best_B, max_G[g] - jnp.where(unique_best_B, rest_max_G[g], 0), 0)
    if norm_by_std:
        gap_B = gap_B / (std_G[g] + epsilon)
    return _done(broadcast(gap_B, mask))


@ADVANTAGE_ESTIMATORS.register("rloo", traits=GROUP_TRAITS)
def rloo(
    token_rewards_BxT,
    mask_BxT,
    group_ids_B=None,
    values_BxT=None,
    gamma=1.0,
    lam=1.0,
    *,
    valid_B=None,
    num_groups=None,
):
    """RLOO: r minus the mean of the other samples in the group, n/(n-1) * (r - mean).

    A sample alone in its group keeps its raw reward, as verl's `rloo`.
    """
    r, mask, valid, G = prepare(
        "rloo", token_rewards_BxT, mask_BxT, group_ids_B, valid_B, num_groups, need_groups=True
    )
    s = r.sum(-1)
    return _done(broadcast(leave_one_out_B(s, group_ids_B, valid, G, alone_B=s), mask))


@ADVANTAGE_ESTIMATORS.register("opo", traits=GROUP_TRAITS)
def opo(
    token_rewards_BxT,
    mask_BxT,
    group_ids_B=None,
    values_BxT=None,
    gamma=1.0,
    lam=1.0,
    *,
    valid_B=None,
    num_groups=None,
):
    """OPO: r minus the length-weighted group mean sum(len * r) / sum(len)."""
    r, mask, valid, G = prepare(
        "opo", token_rewards_BxT, mask_BxT, group_ids_B, valid_B, num_groups, need_groups=True
    )
    s, g = r.sum(-1), group_ids_B
    len_B = mask.sum(-1)
    seg = lambda v: jax.ops.segment_sum(v, g, num_segments=G)
    count_G, len_G = seg(valid), seg(len_B * valid)
    base_G = jnp.where(
        (count_G > 1) & (len_G > 0), seg(len_B * s * valid) / jnp.maximum(len_G, 1), 0.0
    )
    adv_B = (s - base_G[g]) * valid
    return _done(broadcast(adv_B, mask))


@ADVANTAGE_ESTIMATORS.register("gpg", traits=GROUP_TRAITS)
def gpg(
    token_rewards_BxT,
    mask_BxT,
    group_ids_B=None,
    values_BxT=None,
    gamma=1.0,
    lam=1.0,
    *,
    valid_B=None,
    num_groups=None,
    f_norm=1.0,
):
    """GPG: alpha * (r - group mean) / f_norm, alpha = #valid / #valid with nonzero reward."""
    r, mask, valid, G = prepare(
        "gpg", token_rewards_BxT, mask_BxT, group_ids_B, valid_B, num_groups, need_groups=True
    )
    s, g = r.sum(-1), group_ids_B
    _, mean_G, _ = group_count_mean_std(s, g, valid, G)
    nonzero = jnp.sum((s != 0) * valid)
    alpha = valid.sum() / jnp.maximum(nonzero, 1.0)
    adv_B = alpha * (s - mean_G[g]) / f_norm * valid
    return _done(broadcast(adv_B, mask))


@ADVANTAGE_ESTIMATORS.register("reinforce_plus_plus_baseline", traits=GROUP_TRAITS)
def reinforce_plus_plus_baseline(
    token_rewards_BxT,
    mask_BxT,
    group_ids_B=None,
    values_BxT=None,
    gamma=1.0,
    lam=1.0,
    *,
    valid_B=None,
    num_groups=None,
):
    """REINFORCE++-baseline: r - group mean on every token, then whitened over the batch."""
    r, mask, valid, G = prepare(
        "reinforce_plus_plus_baseline",
        token_rewards_BxT,
        mask_BxT,
        group_ids_B,
        valid_B,
        num_groups,
        need_groups=True,
    )
    adv_B = _group_normalise(r.sum(-1), group_ids_B, valid, G, False, 0.0)
    adv_BxT = masked_whiten(broadcast(adv_B, mask), mask) * mask
    return _done(adv_BxT)


@ADVANTAGE_ESTIMATORS.register(
    "gdpo", traits=EstimatorTraits(needs_groups=True, norm_by_std=True, takes_reward_dims=True)
)
def gdpo(
    token_rewards_BxT,
    mask_BxT,
    group_ids_B=None,
    values_BxT=None,
    gamma=1.0,
    lam=1.0,
    *,
    valid_B=None,
    num_groups=None,
    rewards_BxK=None,
    reward_weights_K=None,
    epsilon=EPS,
    norm_by_std=True,
):
    """GDPO: each reward dimension group-normalised on its own, weighted sum, then whitened.

    `rewards_BxK` holds one outcome reward per dimension; without it the summed token
    rewards are the single dimension (then GDPO = whitened GRPO).
    """
    r, mask, valid, G = prepare(
        "gdpo",
        token_rewards_BxT,
        mask_BxT,
        group_ids_B,
        valid_B,
        num_groups,
        need_groups=True,
        rewards_BxK=rewards_BxK,
        reward_weights_K=reward_weights_K,
    )
    scores_BxK = r.sum(-1)[:, None] if rewards_BxK is None else jnp.asarray(rewards_BxK, r.dtype)
    K = scores_BxK.shape[1]
    w_K = jnp.ones(K, r.dtype)
    if reward_weights_K is not None:
        w_K = jnp.asarray(reward_weights_K, r.dtype)
    norm_KxB = jax.vmap(
        lambda s_B: _group_normalise(s_B, group_ids_B, valid, G, norm_by_std, epsilon)
    )(scores_BxK.T)
    adv_B = w_K @ norm_KxB
    adv_BxT = masked_whiten(broadcast(adv_B, mask), mask) * mask
    return _done(adv_BxT)
