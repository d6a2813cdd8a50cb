"""The one attention entry point of the model; `impl` picks the implementation.

Every implementation takes grouped-query inputs without repeating K/V and a boolean mask that
says which key each query may see (causality and padding folded in by the caller), so kernels
(issue "Pallas attention kernels") slot in by registering a function here.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

# Finite, so a fully masked row (a padding query) softmaxes to uniform instead of NaN.
_MASKED = -1e30


def xla_attention(q_BxTxHxD, k_BxSxKxD, v_BxSxKxD, mask_BxTxS):
    """Plain XLA attention with GQA by reshaping heads into groups; softmax in float32."""
    b, t, h, d = q_BxTxHxD.shape
    kv_heads = k_BxSxKxD.shape[2]
    groups = h // kv_heads
    q_BxTxKxGxD = q_BxTxHxD.reshape(b, t, kv_heads, groups, d)
    scores_BxKxGxTxS = jnp.einsum(
        "btkgd,bskd->bkgts", q_BxTxKxGxD, k_BxSxKxD, preferred_element_type=jnp.float32
    ) * (d**-0.5)
    scores_BxKxGxTxS = jnp.where(mask_BxTxS[:, None, None], scores_BxKxGxTxS, _MASKED)
    probs_BxKxGxTxS = jax.nn.softmax(scores_BxKxGxTxS, axis=-1).astype(v_BxSxKxD.dtype)
    out_BxTxKxGxD = jnp.einsum("bkgts,bskd->btkgd", probs_BxKxGxTxS, v_BxSxKxD)
    return out_BxTxKxGxD.reshape(b, t, h, d)


ATTENTION_IMPLS: dict[str, Callable] = {"xla": xla_attention}


def register_attention(name: str, fn: Callable) -> None:
    """Adds an implementation under `name` (same signature as `xla_attention`)."""
    ATTENTION_IMPLS[name] = fn


def attention(q_BxTxHxD, k_BxSxKxD, v_BxSxKxD, mask_BxTxS, impl: str = "xla"):
    """Dispatches to the implementation named by `impl` (config key model.attention_impl)."""
    try:
        fn = ATTENTION_IMPLS[impl]
    except KeyError:
        raise ValueError(
            f"unknown attention impl {impl!r} (model.attention_impl); "
            f"registered: {', '.join(sorted(ATTENTION_IMPLS))}"
        ) from None
    return fn(q_BxTxHxD, k_BxSxKxD, v_BxSxKxD, mask_BxTxS)
