"""Masked reductions and per-group statistics shared by estimators and losses."""

from __future__ import annotations

import jax
import jax.numpy as jnp

WHITEN_EPS = 1e-8  # verl's masked_whiten: rsqrt(var + 1e-8)


def as_float(x, like):
    """Cast a mask/flag array to the float dtype of `like`."""
    return jnp.asarray(x).astype(jnp.result_type(like, jnp.float32))


def masked_sum(x, mask, axis=None):
    """Sum of x where mask is 1."""
    return jnp.sum(x * as_float(mask, x), axis=axis)


def masked_mean(x, mask, axis=None):
    """Mean of x where mask is 1 (0 for an empty mask, as verl's + 1e-8 denominator)."""
    m = as_float(mask, x)
    return jnp.sum(x * m, axis=axis) / (jnp.sum(m, axis=axis) + 1e-8)


def masked_var(x, mask):
    """Unbiased (Bessel-corrected) variance of x over the masked entries."""
    m = as_float(mask, x)
    mean = masked_mean(x, m)
    var = masked_mean(jnp.square(x - mean), m)
    n = jnp.sum(m)
    return var * n / jnp.maximum(n - 1.0, 1.0)


def masked_whiten(x, mask):
    """(x - mean) / sqrt(var + 1e-8) with masked mean and unbiased variance, as verl."""
    m = as_float(mask, x)
    return (x - masked_mean(x, m)) * jax.lax.rsqrt(masked_var(x, m) + WHITEN_EPS)


def seq_lengths(mask_BxT, dtype=jnp.float32):
    """Number of valid tokens per sequence."""
    return jnp.sum(jnp.asarray(mask_BxT).astype(dtype), axis=-1)


def group_count_mean_std(scores_B, group_ids_B, weight_B, num_groups: int):
    """Per-group count, mean and unbiased std of `scores_B` over members with weight 1.

    Groups with fewer than two members get mean 0 and std 1, as verl's GRPO.
    Returns arrays indexed by group (shape G = num_groups).
    """
    w = as_float(weight_B, scores_B)
    seg = lambda v: jax.ops.segment_sum(v, group_ids_B, num_segments=num_groups)
    count_G = seg(w)
    many_G = count_G > 1
    mean_G = jnp.where(many_G, seg(w * scores_B) / jnp.maximum(count_G, 1.0), 0.0)
    dev2_B = w * jnp.square(scores_B - mean_G[group_ids_B])
    var_G = seg(dev2_B) / jnp.maximum(count_G - 1.0, 1.0)
    std_G = jnp.where(many_G, jnp.sqrt(var_G), 1.0)
    return count_G, mean_G, std_G


def group_max(values_B, group_ids_B, weight_B, num_groups: int):
    """Per-group max over members with weight 1 (-inf for an empty group)."""
    v = jnp.where(jnp.asarray(weight_B) > 0, values_B, -jnp.inf)
    return jax.ops.segment_max(v, group_ids_B, num_segments=num_groups)


def group_min(values_B, group_ids_B, weight_B, num_groups: int):
    """Per-group min over members with weight 1 (+inf for an empty group)."""
    v = jnp.where(jnp.asarray(weight_B) > 0, values_B, jnp.inf)
    return jax.ops.segment_min(v, group_ids_B, num_segments=num_groups)
