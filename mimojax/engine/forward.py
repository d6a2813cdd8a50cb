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

from mimojax.models.attention import MASKED_SCORE, attention, cache_mask
from mimojax.models.config import ModelConfig
from mimojax.models.decoder import decoder_block, rms_norm
from mimojax.models.rope import rope_cos_sin


class LayerCaches(NamedTuple):
    """One [B, K, S, D] key and value buffer per layer, and each row's filled length.

    Heads before positions: attention contracts over D with (B, K) as batch dimensions, and
    with those dimensions major XLA runs the dots straight off the buffer; in [B, S, K, D]
    it copied and transposed the whole cache every step (measured: 2x the step time at S=512).
    """

    k_L: tuple  # of k_BxKxSxD
    v_L: tuple
    lengths_B: jax.Array


def cache_dtype(cfg: ModelConfig):
    """The KV cache's dtype: the compute dtype, but float32 on CPU.

    XLA:CPU has no bf16 scatter or reduce: with a bf16 cache it converted every layer's whole
    cache to f32 and back each decode step (measured: 150 converts, ~4x the step's GEMM time).
    """
    if jax.default_backend() == "cpu":
        return jnp.dtype(jnp.float32)
    return jnp.dtype(cfg.dtype)


def init_layer_caches(cfg: ModelConfig, batch: int, length: int) -> LayerCaches:
    """Zeroed caches for `batch` rows of `length` tokens, in cache_dtype."""
    shape, dt = (batch, cfg.num_kv_heads, length, cfg.head_dim), cache_dtype(cfg)
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


def cached_hidden(params: dict, cfg: ModelConfig, ids_BxT, caches: LayerCaches, width=None):
    """Final-norm hidden states [B, T, E] of T new tokens per row, and the updated caches.

    Row b's new tokens go to positions lengths[b] + t (writes past the end are dropped) and
    see every cached position <= their own; the caller advances `lengths`. With `width`,
    attention reads only the first `width` cache positions (a static slice, so a decode step
    costs the used context, not the whole buffer); rows whose tokens land at or past it get
    garbage, so the caller picks a width above every live row's position.
    """
    b, t = ids_BxT.shape
    positions_BxT = caches.lengths_B[:, None] + jnp.arange(t, dtype=jnp.int32)[None]
    rows_Bx1 = jnp.arange(b)[:, None]
    mask = cache_mask(caches.lengths_B, t)
    cos_sin = rope_cos_sin(positions_BxT, cfg)
    x_BxTxE = jnp.take(params["embed"], ids_BxT, axis=0).astype(jnp.dtype(cfg.dtype))
    k_L, v_L = list(caches.k_L), list(caches.v_L)
    for i, p in enumerate(params["layers"]):

        def attend(q_BxTxHxD, k_new_BxTxKxD, v_new_BxTxKxD, i=i):
            # Advanced indices around a slice: the indexed view is [B, T, K, D].
            k_L[i] = k_L[i].at[rows_Bx1, :, positions_BxT].set(k_new_BxTxKxD.astype(k_L[i].dtype))
            v_L[i] = v_L[i].at[rows_Bx1, :, positions_BxT].set(v_new_BxTxKxD.astype(v_L[i].dtype))
            keys, values = k_L[i], v_L[i]
            if width is not None and width < keys.shape[2]:
                keys, values = keys[:, :, :width], values[:, :, :width]
            return cache_attention(q_BxTxHxD, keys, values, mask, cfg)

        x_BxTxE = decoder_block(p, x_BxTxE, cos_sin, attend, cfg)
    hidden_BxTxE = rms_norm(x_BxTxE, params["final_norm"], cfg.rms_norm_eps)
    return hidden_BxTxE, caches._replace(k_L=tuple(k_L), v_L=tuple(v_L))


def cache_attention(q_BxTxHxD, k_BxKxSxD, v_BxKxSxD, mask, cfg: ModelConfig):
    """Attention of T new queries over a [B, K, S, D] cache.

    Prefill and the non-xla impls go through the model's dispatch on a [B, S, K, D] view. An
    xla decode step (T = 1) runs here: the same math as the model's xla attention, as a
    multiply-reduce over this layout with the visibility test inline, because XLA:CPU ran the
    generic version ~3x slower per step (it transposed the whole cache and built a [B, T, S]
    mask in every layer).
    """
    b, t, h, d = q_BxTxHxD.shape
    dt = q_BxTxHxD.dtype
    if cfg.attention_impl != "xla" or t > 1:
        keys_BxSxKxD = jnp.swapaxes(k_BxKxSxD, 1, 2).astype(dt)
        values_BxSxKxD = jnp.swapaxes(v_BxKxSxD, 1, 2).astype(dt)
        return attention(q_BxTxHxD, keys_BxSxKxD, values_BxSxKxD, mask, impl=cfg.attention_impl)
    kv_heads, s = k_BxKxSxD.shape[1], k_BxKxSxD.shape[2]
    q_BxKxGxD = q_BxTxHxD.reshape(b, kv_heads, h // kv_heads, d).astype(jnp.float32)
    scores_BxKxGxS = jnp.sum(
        q_BxKxGxD[:, :, :, None, :] * k_BxKxSxD[:, :, None, :, :].astype(jnp.float32), axis=-1
    ) * (d**-0.5)
    visible_BxS = jnp.arange(s)[None, :] <= mask.q_positions_BxT
    scores_BxKxGxS = jnp.where(visible_BxS[:, None, None], scores_BxKxGxS, MASKED_SCORE)
    probs_BxKxGxS = jax.nn.softmax(scores_BxKxGxS, axis=-1).astype(dt)
    out_BxKxGxD = jnp.sum(probs_BxKxGxS[..., None] * v_BxKxSxD[:, :, None].astype(dt), axis=-2)
    return out_BxKxGxD.reshape(b, 1, h, d)


def logits_at(params: dict, cfg: ModelConfig, hidden_BxE):
    """float32 logits [B, V]; a tied head contracts with the [V, E] embedding as stored."""
    dt = jnp.dtype(cfg.dtype)
    if cfg.tie_word_embeddings:
        return jnp.einsum(
            "be,ve->bv", hidden_BxE, params["embed"].astype(dt), preferred_element_type=jnp.float32
        )
    return jnp.dot(hidden_BxE, params["lm_head"].astype(dt), preferred_element_type=jnp.float32)
