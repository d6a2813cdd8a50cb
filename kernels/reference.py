"""Pure-jnp references the attention kernels are tested against (same mask, same zero rows).

Self-contained on purpose: a reference shares no code with what it checks (neither the kernels'
tiling nor the model's mask), so a bug there cannot hide in both.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

# Large and finite: a fully masked row stays NaN-free through softmax (then zeroed below).
_MASKED_SCORE = -1e30


def reference_visibility(
    q_positions_BxT, s: int, kv_valid_BxS=None, q_segment_ids_BxT=None, kv_segment_ids_BxS=None
):
    """Dense [B, T, S] bool: query t sees key s iff s <= its position, s valid, same segment."""
    visible_BxTxS = jnp.arange(s)[None, None, :] <= jnp.asarray(q_positions_BxT)[:, :, None]
    if kv_valid_BxS is not None:
        visible_BxTxS &= jnp.asarray(kv_valid_BxS)[:, None, :].astype(bool)
    if q_segment_ids_BxT is not None:
        q_seg_BxTx1 = jnp.asarray(q_segment_ids_BxT)[:, :, None]
        visible_BxTxS &= q_seg_BxTx1 == jnp.asarray(kv_segment_ids_BxS)[:, None, :]
    return visible_BxTxS


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
    scores_BxKxGxTxS = jnp.where(mask_Bx1x1xTxS, scores_BxKxGxTxS, _MASKED_SCORE)
    probs_BxKxGxTxS = jax.nn.softmax(scores_BxKxGxTxS, axis=-1)
    probs_BxKxGxTxS = jnp.where(mask_Bx1x1xTxS.any(-1, keepdims=True), probs_BxKxGxTxS, 0.0)
    out_BxTxKxGxD = jnp.einsum("bkgts,bskd->btkgd", probs_BxKxGxTxS, v_BxSxKxD.astype(jnp.float32))
    return out_BxTxKxGxD.reshape(b, t, h, d).astype(q_BxTxHxD.dtype)


def reference_decode_attention(q_BxHxD, k_BxSxKxD, v_BxSxKxD, kv_lengths_B):
    """One query per row over keys s < kv_lengths_B[b]; length 0 gives output 0."""
    q_positions_Bx1 = (kv_lengths_B.astype(jnp.int32) - 1)[:, None]
    return reference_attention(q_BxHxD[:, None], k_BxSxKxD, v_BxSxKxD, q_positions_Bx1)[:, 0]
