"""Pure-jnp references the attention kernels are tested against (same mask, same zero rows)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from mimojax.kernels.tiling import MASK_VALUE
from mimojax.models.attention import AttentionMask, dense_mask


def reference_visibility(
    q_positions_BxT, s: int, kv_valid_BxS=None, q_segment_ids_BxT=None, kv_segment_ids_BxS=None
):
    """Dense [B, T, S] bool: which key each query sees (the model's rule, as dense_mask)."""
    mask = AttentionMask(q_positions_BxT, kv_valid_BxS, q_segment_ids_BxT, kv_segment_ids_BxS)
    return dense_mask(mask, s)


def reference_attention(
    q_BxTxHxD,
    k_BxSxKxD,
    v_BxSxKxD,
    q_positions_BxT,
    kv_valid_BxS=None,
    q_segment_ids_BxT=None,
    kv_segment_ids_BxS=None,
):
    """Dense float32 attention; a query that sees no key gets output 0 (as the kernels do)."""
    b, t, h, d = q_BxTxHxD.shape
    s, kv_heads = k_BxSxKxD.shape[1], k_BxSxKxD.shape[2]
    groups = h // kv_heads
    visible_BxTxS = reference_visibility(
        q_positions_BxT, s, kv_valid_BxS, q_segment_ids_BxT, kv_segment_ids_BxS
    )
    q_BxTxKxGxD = q_BxTxHxD.astype(jnp.float32).reshape(b, t, kv_heads, groups, d)
    scores_BxKxGxTxS = jnp.einsum(
        "btkgd,bskd->bkgts", q_BxTxKxGxD, k_BxSxKxD.astype(jnp.float32)
    ) * (d**-0.5)
    mask_Bx1x1xTxS = visible_BxTxS[:, None, None]
    scores_BxKxGxTxS = jnp.where(mask_Bx1x1xTxS, scores_BxKxGxTxS, MASK_VALUE)
    probs_BxKxGxTxS = jax.nn.softmax(scores_BxKxGxTxS, axis=-1)
    probs_BxKxGxTxS = jnp.where(mask_Bx1x1xTxS.any(-1, keepdims=True), probs_BxKxGxTxS, 0.0)
    out_BxTxKxGxD = jnp.einsum("bkgts,bskd->btkgd", probs_BxKxGxTxS, v_BxSxKxD.astype(jnp.float32))
    return out_BxTxKxGxD.reshape(b, t, h, d).astype(q_BxTxHxD.dtype)


def reference_decode_attention(q_BxHxD, k_BxSxKxD, v_BxSxKxD, kv_lengths_B):
    """One query per row over keys s < kv_lengths_B[b]; length 0 gives output 0."""
    q_positions_Bx1 = (kv_lengths_B.astype(jnp.int32) - 1)[:, None]
    return reference_attention(q_BxHxD[:, None], k_BxSxKxD, v_BxSxKxD, q_positions_Bx1)[:, 0]
