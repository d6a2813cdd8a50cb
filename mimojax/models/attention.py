"""The one attention entry point of the model; `impl` (model.attention_impl) picks the kernel.

Every implementation takes grouped-query inputs without repeating K/V and an `AttentionMask`:
a structured description of which keys each query sees that flash kernels evaluate tile by
tile. `dense_mask` materialises it for implementations that want a [B, T, S] mask.

Implementations: "xla" (portable reference), "pallas" (mimojax.kernels: flash attention and
flash-decoding; interpret mode off GPU), "cudnn" (jax.nn.dot_product_attention on cuDNN).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

# Finite, so a fully masked row (a padding query) softmaxes to uniform instead of NaN.
MASKED_SCORE = -1e30


class AttentionMask(NamedTuple):
    """Query t of row b sees key s iff s <= q_positions_BxT[b, t], key s is valid and, with
    segment ids, q_segment_ids_BxT[b, t] == kv_segment_ids_BxS[b, s].

    q_positions are key indices (not RoPE positions). kv_valid_BxS None means every key is valid.
    """

    q_positions_BxT: jax.Array
    kv_valid_BxS: jax.Array | None = None
    q_segment_ids_BxT: jax.Array | None = None
    kv_segment_ids_BxS: jax.Array | None = None


def causal_mask(attention_mask_BxT) -> AttentionMask:
    """Self-attention over T tokens: token t sees tokens <= t whose attention_mask is 1."""
    b, t = attention_mask_BxT.shape
    q_positions_BxT = jnp.broadcast_to(jnp.arange(t, dtype=jnp.int32), (b, t))
    return AttentionMask(q_positions_BxT, attention_mask_BxT.astype(bool))


def cache_mask(lengths_B, t: int) -> AttentionMask:
    """T new tokens at cache positions lengths[b] + t see every cache position <= their own."""
    return AttentionMask(lengths_B.astype(jnp.int32)[:, None] + jnp.arange(t, dtype=jnp.int32))


def dense_mask(mask: AttentionMask, s: int):
    """The [B, T, S] boolean mask `mask` describes over S keys."""
    visible_BxTxS = jnp.arange(s)[None, None, :] <= mask.q_positions_BxT[:, :, None]
    if mask.kv_valid_BxS is not None:
        visible_BxTxS &= mask.kv_valid_BxS[:, None, :].astype(bool)
    if mask.q_segment_ids_BxT is not None:
        visible_BxTxS &= mask.q_segment_ids_BxT[:, :, None] == mask.kv_segment_ids_BxS[:, None, :]
    return visible_BxTxS


def xla_attention(q_BxTxHxD, k_BxSxKxD, v_BxSxKxD, mask: AttentionMask):
    """Plain XLA attention with GQA by reshaping heads into groups; softmax in float32."""
    b, t, h, d = q_BxTxHxD.shape
    kv_heads = k_BxSxKxD.shape[2]
    groups = h // kv_heads
    mask_BxTxS = dense_mask(mask, k_BxSxKxD.shape[1])
    q_BxTxKxGxD = q_BxTxHxD.reshape(b, t, kv_heads, groups, d)
    scores_BxKxGxTxS = jnp.einsum(
        "btkgd,bskd->bkgts", q_BxTxKxGxD, k_BxSxKxD, preferred_element_type=jnp.float32
    ) * (d**-0.5)
    scores_BxKxGxTxS = jnp.where(mask_BxTxS[:, None, None], scores_BxKxGxTxS, MASKED_SCORE)
    probs_BxKxGxTxS = jax.nn.softmax(scores_BxKxGxTxS, axis=-1).astype(v_BxSxKxD.dtype)
    out_BxTxKxGxD = jnp.einsum("bkgts,bskd->btkgd", probs_BxKxGxTxS, v_BxSxKxD)
    return out_BxTxKxGxD.reshape(b, t, h, d)


def pallas_attention(q_BxTxHxD, k_BxSxKxD, v_BxSxKxD, mask: AttentionMask):
    """Pallas kernels: flash-decoding for one new token over a KV cache, flash attention else.

    A fully masked query row gives 0 here (uniform in "xla"); such rows are padding that the
    model masks out of every loss, so results do not depend on it.
    """
    # Imported on first use: Pallas is heavy, and mimojax.models must import without it.
    from mimojax import kernels

    one_token_over_cache = (
        q_BxTxHxD.shape[1] == 1 and mask.kv_valid_BxS is None and mask.q_segment_ids_BxT is None
    )
    if one_token_over_cache:
        kv_lengths_B = mask.q_positions_BxT[:, 0] + 1
        out_BxHxD = kernels.decode_attention(q_BxTxHxD[:, 0], k_BxSxKxD, v_BxSxKxD, kv_lengths_B)
        return out_BxHxD[:, None]
    return kernels.flash_attention(q_BxTxHxD, k_BxSxKxD, v_BxSxKxD, *mask)


def cudnn_attention(q_BxTxHxD, k_BxSxKxD, v_BxSxKxD, mask: AttentionMask):
    """cuDNN flash attention via jax.nn.dot_product_attention; GPU and bf16/fp16 only."""
    backend = jax.default_backend()
    if backend != "gpu":
        raise ValueError(
            f"model.attention_impl='cudnn' needs an NVIDIA GPU with cuDNN, but JAX's default "
            f"backend is {backend!r}; use model.attention_impl='xla' or 'pallas' here"
        )
    if q_BxTxHxD.dtype not in (jnp.bfloat16, jnp.float16):
        raise ValueError(
            f"model.attention_impl='cudnn' runs bfloat16/float16 only, got {q_BxTxHxD.dtype}; "
            "set model.dtype='bfloat16' or use model.attention_impl='xla' or 'pallas'"
        )
    # Padding may be on either side of a row, which cuDNN's length-based masks cannot express,
    # so the mask goes in dense (cuDNN applies it as a bias).
    mask_Bx1xTxS = dense_mask(mask, k_BxSxKxD.shape[1])[:, None]
    return jax.nn.dot_product_attention(
        q_BxTxHxD, k_BxSxKxD, v_BxSxKxD, mask=mask_Bx1xTxS, implementation="cudnn"
    )


ATTENTION_IMPLS: dict[str, Callable] = {
    "xla": xla_attention,
    "pallas": pallas_attention,
    "cudnn": cudnn_attention,
}


def register_attention(name: str, fn: Callable) -> None:
    """Adds an implementation under `name` (same signature as `xla_attention`)."""
    ATTENTION_IMPLS[name] = fn


def attention(q_BxTxHxD, k_BxSxKxD, v_BxSxKxD, mask: AttentionMask, impl: str = "xla"):
    """Dispatches to the implementation named by `impl` (config key model.attention_impl)."""
    try:
        fn = ATTENTION_IMPLS[impl]
    except KeyError:
        raise ValueError(
            f"unknown attention impl {impl!r} (model.attention_impl); "
            f"registered: {', '.join(sorted(ATTENTION_IMPLS))}"
        ) from None
    return fn(q_BxTxHxD, k_BxSxKxD, v_BxSxKxD, mask)
