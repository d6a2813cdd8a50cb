"""The engine's forward pass: the decoder's blocks unrolled over per-layer weights and caches.

The training model stacks layer weights as [L, ...] under `lax.scan`; decoding that way makes
XLA copy each layer's weight slice and thread the whole [L, B, S, K, D] cache through the loop
every step (measured on SmolLM2, batch 32: ~3 full cache copies per token, ~2x the weight
traffic at batch 1). Here every layer owns separate weight arrays and separate cache buffers,
new keys/values are scattered in place into donated buffers, and the LM head reads the
embedding without materialising its transpose. The blocks are the decoder's own
(`decoder_block`), so the numerics are the model's.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from flax import nnx

from mimojax.models.attention import cache_mask
from mimojax.models.config import ModelConfig
from mimojax.models.decoder import decoder_block, rms_norm
from mimojax.models.rope import rope_cos_sin


class LayerCaches(NamedTuple):
    """One [B, S, K, D] key and value buffer per layer, and each row's filled length."""

    k_L: tuple  # of k_BxSxKxD
    v_L: tuple
    lengths_B: jax.Array


def init_layer_caches(cfg: ModelConfig, batch: int, length: int) -> LayerCaches:
    """Zeroed caches for `batch` rows of `length` tokens, in the compute dtype."""
    shape, dt = (batch, length, cfg.num_kv_heads, cfg.head_dim), jnp.dtype(cfg.dtype)
    zeros = lambda: tuple(jnp.zeros(shape, dt) for _ in range(cfg.num_layers))
    return LayerCaches(zeros(), zeros(), jnp.zeros((batch,), jnp.int32))


def engine_params(model_state) -> dict:
    """The engine's layout of a Decoder's nnx.State: plain arrays, layers split out."""
    state = nnx.to_pure_dict(model_state) if isinstance(model_state, nnx.State) else model_state
    layers = state["layers"]
    n = next(iter(layers.values())).shape[0]
    out = {k: v for k, v in state.items() if k != "layers"}
    out["layers"] = [{k: v[i] for k, v in layers.items()} for i in range(n)]
    return out


def cached_hidden(params: dict, cfg: ModelConfig, ids_BxT, caches: LayerCaches):
    """Final-norm hidden states [B, T, E] of T new tokens per row, and the updated caches.

    Row b's new tokens go to positions lengths[b] + t (writes past the end are dropped) and
    see every cached position <= their own; the caller advances `lengths`.
    """
    b, t = ids_BxT.shape
    positions_BxT = caches.lengths_B[:, None] + jnp.arange(t, dtype=jnp.int32)[None]
    rows_Bx1 = jnp.arange(b)[:, None]
    mask = cache_mask(caches.lengths_B, t)
    cos_sin = rope_cos_sin(positions_BxT, cfg)
    x_BxTxE = jnp.take(params["embed"], ids_BxT, axis=0).astype(jnp.dtype(cfg.dtype))
    k_L, v_L = list(caches.k_L), list(caches.v_L)
    for i, p in enumerate(params["layers"]):

        def write(k_new_BxTxKxD, v_new_BxTxKxD, i=i):
            k_L[i] = k_L[i].at[rows_Bx1, positions_BxT].set(k_new_BxTxKxD.astype(k_L[i].dtype))
            v_L[i] = v_L[i].at[rows_Bx1, positions_BxT].set(v_new_BxTxKxD.astype(v_L[i].dtype))
            return k_L[i], v_L[i]

        x_BxTxE, _ = decoder_block(p, x_BxTxE, cos_sin, mask, write, cfg)
    hidden_BxTxE = rms_norm(x_BxTxE, params["final_norm"], cfg.rms_norm_eps)
    return hidden_BxTxE, caches._replace(k_L=tuple(k_L), v_L=tuple(v_L))


def logits_at(params: dict, cfg: ModelConfig, hidden_BxE):
    """float32 logits [B, V]; a tied head contracts with the [V, E] embedding as stored."""
    dt = jnp.dtype(cfg.dtype)
    if cfg.tie_word_embeddings:
        return jnp.einsum(
            "be,ve->bv", hidden_BxE, params["embed"].astype(dt), preferred_element_type=jnp.float32
        )
    return jnp.dot(hidden_BxE, params["lm_head"].astype(dt), preferred_element_type=jnp.float32)
