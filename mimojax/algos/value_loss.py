"""Clipped value loss for the critic and the entropy helpers."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from mimojax.algos.aggregation import agg_loss
from mimojax.algos.checks import check_shapes
from mimojax.algos.ops import masked_mean


def value_loss(
    vpreds_BxT,
    values_BxT,
    returns_BxT,
    mask_BxT,
    clip_range_value=0.5,
    agg_mode: str = "token-mean",
    global_tokens=None,
    global_seqs=None,
    loss_scale_factor=None,
):
    """0.5 * agg(max((v - R)^2, (clip(v, v_old ± c) - R)^2)), as verl's compute_value_loss.

    `clip_range_value=None` turns clipping off. Returns (loss, metrics).
    """
    check_shapes(
        vpreds_BxT=vpreds_BxT, values_BxT=values_BxT, returns_BxT=returns_BxT, mask_BxT=mask_BxT
    )
    losses1 = jnp.square(vpreds_BxT - returns_BxT)
    if clip_range_value is None:
        losses, clipped = losses1, jnp.zeros_like(losses1)
    else:
        vclip = jnp.clip(vpreds_BxT, values_BxT - clip_range_value, values_BxT + clip_range_value)
        losses2 = jnp.square(vclip - returns_BxT)
        losses = jnp.maximum(losses1, losses2)
        clipped = (losses2 > losses1).astype(losses1.dtype)
    loss = 0.5 * agg_loss(losses, mask_BxT, agg_mode, global_tokens, global_seqs, loss_scale_factor)
    sg = jax.lax.stop_gradient
    metrics = {
        "critic/vf_loss": sg(loss),
        "critic/vf_clipfrac": masked_mean(clipped, mask_BxT),
        "critic/vpred_mean": sg(masked_mean(vpreds_BxT, mask_BxT)),
    }
    return loss, metrics


def entropy_from_logits(logits_BxTxV):
    """Categorical entropy per token: logsumexp(z) - sum(softmax(z) * z)."""
    logits = jnp.asarray(logits_BxTxV)
    p = jax.nn.softmax(logits, axis=-1)
    return jax.nn.logsumexp(logits, axis=-1) - jnp.sum(p * logits, axis=-1)


def entropy_loss(
    entropy_BxT,
    mask_BxT,
    agg_mode: str = "token-mean",
    global_tokens=None,
    global_seqs=None,
    loss_scale_factor=None,
):
    """Aggregated entropy (the policy loss subtracts entropy_coeff times this)."""
    return agg_loss(entropy_BxT, mask_BxT, agg_mode, global_tokens, global_seqs, loss_scale_factor)
