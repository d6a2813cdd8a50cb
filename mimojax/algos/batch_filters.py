"""Batch-level reward shaping and filtering from DAPO (arXiv:2503.14476)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from mimojax.algos.checks import check_group_ids, check_shapes
from mimojax.algos.ops import as_float, group_max, group_min


def overlong_penalty(response_len_B, max_response_len, buffer_len, penalty_factor=1.0):
    """DAPO soft overlong punishment: min(-(len - (max - buffer)) / buffer * factor, 0).

    Zero up to max_response_len - buffer_len, then linear down to -penalty_factor at the
    maximum length (verl's DAPO reward manager).
    """
    if buffer_len <= 0:
        raise ValueError(f"overlong buffer_len must be > 0, got {buffer_len}")
    length = as_float(response_len_B, response_len_B)  # at least float32; float64 stays
    exceed = length - (max_response_len - buffer_len)
    return jnp.minimum(-exceed / buffer_len * penalty_factor, 0.0)


def add_outcome_reward(token_rewards_BxT, mask_BxT, extra_B):
    """Add a per-sequence reward on each sequence's last valid token (where outcomes sit)."""
    check_shapes(token_rewards_BxT=token_rewards_BxT, mask_BxT=mask_BxT, extra_B=extra_B)
    m = jnp.asarray(mask_BxT) > 0
    T = m.shape[-1]
    last_B = T - 1 - jnp.argmax(jnp.flip(m, -1), axis=-1)
    at_last_BxT = (jnp.arange(T)[None, :] == last_B[:, None]) & jnp.any(m, -1, keepdims=True)
    return token_rewards_BxT + at_last_BxT * jnp.asarray(extra_B, token_rewards_BxT.dtype)[:, None]


def apply_overlong_shaping(
    token_rewards_BxT, mask_BxT, max_response_len, buffer_len, penalty_factor=1.0
):
    """Token rewards with the overlong penalty added on the last valid token; returns metrics."""
    response_len_B = as_float(mask_BxT, token_rewards_BxT).sum(-1)
    penalty_B = overlong_penalty(response_len_B, max_response_len, buffer_len, penalty_factor)
    rewards = add_outcome_reward(token_rewards_BxT, mask_BxT, penalty_B)
    metrics = {
        "reward/overlong_penalty_mean": jnp.mean(penalty_B),
        "reward/overlong_frac": jnp.mean((penalty_B < 0).astype(penalty_B.dtype)),
    }
    return rewards, metrics


def filter_groups(values_B, group_ids_B, valid_B=None, num_groups=None):
    """DAPO dynamic sampling: keep-mask dropping groups whose values are all equal.

    A group is kept when its valid members' values differ (max > min) or it has a single
    member (as verl). Infra failures (`valid_B` False) are never kept and do not count.
    Returns (keep_B, metrics); index the batch with it outside jit.
    """
    sizes = check_shapes(values_B=values_B, group_ids_B=group_ids_B, valid_B=valid_B)
    G = sizes["B"] if num_groups is None else int(num_groups)
    check_group_ids(group_ids_B, G)
    v = as_float(values_B, values_B)
    valid = jnp.ones_like(v) if valid_B is None else as_float(valid_B, v)
    count_G = jax.ops.segment_sum(valid, group_ids_B, num_segments=G)
    varied_G = group_max(v, group_ids_B, valid, G) > group_min(v, group_ids_B, valid, G)
    keep_G = (count_G > 0) & (varied_G | (count_G == 1))
    keep_B = keep_G[group_ids_B] & (valid > 0)
    n_groups = jnp.sum(count_G > 0)
    metrics = {
        "batch/groups": n_groups,
        "batch/groups_kept": jnp.sum(keep_G),
        "batch/groups_filtered_frac": 1.0 - jnp.sum(keep_G) / jnp.maximum(n_groups, 1),
    }
    return keep_B, metrics
