"""Loss aggregation over tokens and sequences, normalised by global counts.

Pass the whole batch's `global_tokens` (valid tokens) and `global_seqs` (sequences with at
least one valid token) when the batch is split into micro-batches or across devices: the
micro-batch losses then sum to exactly the full-batch loss. Left as None, the local counts
are used, so a single batch needs nothing.
"""

from __future__ import annotations

import jax.numpy as jnp

from mimojax.algos.checks import check_agg_mode, check_shapes
from mimojax.algos.ops import as_float


def agg_loss(
    loss_BxT,
    mask_BxT,
    mode: str = "token-mean",
    global_tokens=None,
    global_seqs=None,
    loss_scale_factor=None,
):
    """Reduce a per-token loss to a scalar.

    token-mean: sum / tokens. token-sum: sum. seq-mean-token-sum: per-sequence sums averaged
    over sequences. seq-mean-token-mean: per-sequence means averaged over sequences.
    seq-mean-token-sum-norm: seq-mean-token-sum / loss_scale_factor (default T), Dr.GRPO's
    constant normaliser.
    """
    check_agg_mode(mode)
    check_shapes(loss_BxT=loss_BxT, mask_BxT=mask_BxT)
    m = as_float(mask_BxT, loss_BxT)
    if mode == "token-mean":
        denom = jnp.sum(m) if global_tokens is None else global_tokens
        return jnp.sum(loss_BxT * m) / jnp.maximum(denom, 1)
    if mode == "token-sum":
        return jnp.sum(loss_BxT * m)
    tokens_B = jnp.sum(m, axis=-1)
    has_tokens_B = (tokens_B > 0).astype(m.dtype)
    seq_B = jnp.sum(loss_BxT * m, axis=-1)
    if mode == "seq-mean-token-mean":
        seq_B = seq_B / (tokens_B + 1e-8)
    denom = jnp.sum(has_tokens_B) if global_seqs is None else global_seqs
    loss = jnp.sum(seq_B * has_tokens_B) / jnp.maximum(denom, 1)
    if mode == "seq-mean-token-sum-norm":
        loss = loss / (m.shape[-1] if loss_scale_factor is None else loss_scale_factor)
    return loss


def global_counts(mask_BxT):
    """(valid tokens, sequences with a valid token) of a batch: pass these to every micro-batch."""
    m = jnp.asarray(mask_BxT) > 0
    return jnp.sum(m), jnp.sum(jnp.any(m, axis=-1))
