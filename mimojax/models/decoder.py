"""The decoder: token embedding, a scanned stack of pre-norm attention + SwiGLU blocks, LM head.

Layer parameters are stacked along a leading `layers` axis and the stack runs under
`jax.lax.scan`, so compile time does not grow with depth. Every parameter carries its logical
axis names in the `axes` metadata; `mimojax.sharding` maps them to mesh axes.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from flax import nnx

from mimojax.models.attention import attention, causal_mask
from mimojax.models.config import ModelConfig
from mimojax.models.lora import LoRASettings, lora_linear
from mimojax.models.remat import apply_remat
from mimojax.models.rope import apply_rope, rope_cos_sin

_INIT_STD = 0.02  # HF initializer_range


def _param(rngs: nnx.Rngs, shape, axes, dtype, init="normal") -> nnx.Param:
    if init == "normal":
        value = _INIT_STD * jax.random.normal(rngs.params(), shape, jnp.float32)
    elif init == "ones":
        value = jnp.ones(shape, jnp.float32)
    else:
        value = jnp.zeros(shape, jnp.float32)
    return nnx.Param(value.astype(dtype), axes=axes)


def rms_norm(x, weight, eps: float):
    """RMSNorm in float32, scaled by `weight`, returned in x's dtype."""
    x32 = x.astype(jnp.float32)
    x32 = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + eps)
    return (x32 * weight.astype(jnp.float32)).astype(x.dtype)


class DecoderLayers(nnx.Module):
    """All transformer blocks, each parameter stacked as [num_layers, ...]."""

    def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
        L, E, H, K, D, M = (
            cfg.num_layers,
            cfg.hidden_size,
            cfg.num_heads,
            cfg.num_kv_heads,
            cfg.head_dim,
            cfg.intermediate_size,
        )
        pd = jnp.dtype(cfg.param_dtype)
        self.attn_norm = _param(rngs, (L, E), ("layers", "embed"), pd, "ones")
        self.q_proj = _param(rngs, (L, E, H, D), ("layers", "embed", "heads", "head_dim"), pd)
        self.k_proj = _param(rngs, (L, E, K, D), ("layers", "embed", "kv_heads", "head_dim"), pd)
        self.v_proj = _param(rngs, (L, E, K, D), ("layers", "embed", "kv_heads", "head_dim"), pd)
        self.o_proj = _param(rngs, (L, H, D, E), ("layers", "heads", "head_dim", "embed"), pd)
        if cfg.attention_bias:
            self.q_bias = _param(rngs, (L, H, D), ("layers", "heads", "head_dim"), pd, "zeros")
            self.k_bias = _param(rngs, (L, K, D), ("layers", "kv_heads", "head_dim"), pd, "zeros")
            self.v_bias = _param(rngs, (L, K, D), ("layers", "kv_heads", "head_dim"), pd, "zeros")
        if cfg.qk_norm:
            self.q_norm = _param(rngs, (L, D), ("layers", "head_dim"), pd, "ones")
            self.k_norm = _param(rngs, (L, D), ("layers", "head_dim"), pd, "ones")
        self.mlp_norm = _param(rngs, (L, E), ("layers", "embed"), pd, "ones")
        self.gate_proj = _param(rngs, (L, E, M), ("layers", "embed", "mlp"), pd)
        self.up_proj = _param(rngs, (L, E, M), ("layers", "embed", "mlp"), pd)
        self.down_proj = _param(rngs, (L, M, E), ("layers", "mlp", "embed"), pd)
        self.lora: LoRASettings | None = None  # set by mimojax.models.lora.add_lora

    def stacked(self) -> dict[str, jax.Array]:
        """The per-layer arrays, each [num_layers, ...], as a plain dict for scan (with LoRA:
        the adapters too, and in a training forward the dropout keys)."""
        return {k: v[...] for k, v in nnx.state(self).items()}


def dense(x, w, n_in: int = 1):
    """x's last `n_in` axes contracted with w's first `n_in` axes, as one 2-D matmul.

    Flattening to [tokens, in] @ [in, out] keeps the weight gradient a plain 2-D GEMM too;
    XLA:CPU runs the equivalent multi-axis einsum's backward ~25% slower (transposes).
    Accumulating in float32 explicitly (then rounding to x's dtype) is what XLA:CPU does for
    a bf16 matmul anyway, but asked for outright it keeps bf16 operands on the CPU's bf16 GEMM
    instead of converting the weights to f32 on every call (measured: 240 weight converts,
    2x the f32 step time, in a bf16 decode step). A float32 matmul is unchanged.
    """
    lead, w_in, w_out = x.shape[: x.ndim - n_in], w.shape[:n_in], w.shape[n_in:]
    x2 = x.reshape(-1, math.prod(w_in))
    out = jnp.dot(x2, w.reshape(math.prod(w_in), -1), preferred_element_type=jnp.float32)
    return out.astype(x.dtype).reshape(*lead, *w_out)


def _linear(x, p: dict, name: str, lora: LoRASettings | None, n_in: int = 1):
    return dense(x, p[name], n_in) if lora is None else lora_linear(x, p, name, lora, n_in)


def decoder_block(p: dict, x_BxTxE, cos_sin, attend, cfg: ModelConfig, lora=None):
    """One block: x + attn(norm(x)); then x + mlp(norm(x)).

    `attend(q_BxTxHxD, k_BxTxKxD, v_BxTxKxD) -> [B, T, H, D]` takes this block's new queries,
    keys and values: it attends within them (training) or stores k/v in a cache and attends
    over that (the engine). `lora` (LoRASettings) adds the adapters `p` holds to their linears.
    """
    dt = jnp.dtype(cfg.dtype)
    p = {k: v.astype(dt) if jnp.issubdtype(v.dtype, jnp.floating) else v for k, v in p.items()}
    h = rms_norm(x_BxTxE, p["attn_norm"], cfg.rms_norm_eps)
    q_BxTxHxD = _linear(h, p, "q_proj", lora)
    k_BxTxKxD = _linear(h, p, "k_proj", lora)
    v_BxTxKxD = _linear(h, p, "v_proj", lora)
    if cfg.attention_bias:
        q_BxTxHxD += p["q_bias"]
        k_BxTxKxD += p["k_bias"]
        v_BxTxKxD += p["v_bias"]
    if cfg.qk_norm:
        q_BxTxHxD = rms_norm(q_BxTxHxD, p["q_norm"], cfg.rms_norm_eps)
        k_BxTxKxD = rms_norm(k_BxTxKxD, p["k_norm"], cfg.rms_norm_eps)
    cos, sin = cos_sin
    q_BxTxHxD = apply_rope(q_BxTxHxD, cos, sin)
    k_BxTxKxD = apply_rope(k_BxTxKxD, cos, sin)
    attn_BxTxHxD = attend(q_BxTxHxD, k_BxTxKxD, v_BxTxKxD)
    x_BxTxE = x_BxTxE + _linear(attn_BxTxHxD, p, "o_proj", lora, n_in=2)
    h = rms_norm(x_BxTxE, p["mlp_norm"], cfg.rms_norm_eps)
    gate_BxTxM = _linear(h, p, "gate_proj", lora)
    up_BxTxM = _linear(h, p, "up_proj", lora)
    mlp_BxTxE = _linear(jax.nn.silu(gate_BxTxM) * up_BxTxM, p, "down_proj", lora)
    return x_BxTxE + mlp_BxTxE


def default_positions(attention_mask_BxT):
    """Positions that count only real tokens, so left- and right-padded rows both start at 0."""
    return jnp.maximum(jnp.cumsum(attention_mask_BxT.astype(jnp.int32), axis=-1) - 1, 0)


class Decoder(nnx.Module):
    """Causal LM: `model(input_ids_BxT, attention_mask=mask_BxT) -> logits_BxTxV`."""

    def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
        self.config = cfg
        pd = jnp.dtype(cfg.param_dtype)
        self.embed = _param(rngs, (cfg.vocab_size, cfg.hidden_size), ("vocab", "embed"), pd)
        self.layers = DecoderLayers(cfg, rngs=rngs)
        self.final_norm = _param(rngs, (cfg.hidden_size,), ("embed",), pd, "ones")
        if not cfg.tie_word_embeddings:
            self.lm_head = _param(rngs, (cfg.hidden_size, cfg.vocab_size), ("embed", "vocab"), pd)

    def lm_head_weight(self) -> jax.Array:
        """The [embed, vocab] output projection (the embedding, transposed, when tied)."""
        w = self.embed[...].T if self.config.tie_word_embeddings else self.lm_head[...]
        return w.astype(jnp.dtype(self.config.dtype))

    def hidden_states(self, input_ids_BxT, attention_mask=None, positions=None):
        """Final-norm hidden states [B, T, E]: token t attends to tokens <= t whose
        attention_mask is 1. (Incremental decoding over a KV cache is the engine's:
        mimojax/engine/forward.py runs these same blocks over per-layer caches.)"""
        cfg = self.config
        b, t = input_ids_BxT.shape
        if attention_mask is None:
            attention_mask = jnp.ones((b, t), jnp.int32)
        if positions is None:
            positions = default_positions(attention_mask)
        mask = causal_mask(attention_mask)
        cos_sin = rope_cos_sin(positions, cfg)
        x_BxTxE = jnp.take(self.embed[...], input_ids_BxT, axis=0).astype(jnp.dtype(cfg.dtype))
        attend = lambda q, k, v: attention(q, k, v, mask, impl=cfg.attention_impl)
        lora = self.layers.lora
        body = lambda x, p: (decoder_block(p, x, cos_sin, attend, cfg, lora), None)
        x_BxTxE, _ = jax.lax.scan(apply_remat(body, cfg.remat), x_BxTxE, self.layers.stacked())
        return rms_norm(x_BxTxE, self.final_norm[...], cfg.rms_norm_eps)

    def __call__(self, input_ids_BxT, attention_mask=None, positions=None):
        """Logits [B, T, V] (float32 accumulation)."""
        hidden_BxTxE = self.hidden_states(input_ids_BxT, attention_mask, positions)
        return jnp.einsum(
            "bte,ev->btv", hidden_BxTxE, self.lm_head_weight(), preferred_element_type=jnp.float32
        )


class ValueModel(nnx.Module):
    """Critic: the decoder trunk plus a scalar value head; `model(ids, mask) -> values_BxT`."""

    def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
        self.config = cfg
        self.backbone = Decoder(cfg.replace(tie_word_embeddings=True), rngs=rngs)
        pd = jnp.dtype(cfg.param_dtype)
        self.value_head = _param(rngs, (cfg.hidden_size,), ("embed",), pd)
        self.value_bias = _param(rngs, (), (), pd, "zeros")

    @classmethod
    def from_decoder(cls, policy: Decoder, seed: int = 0) -> ValueModel:
        """A critic whose trunk starts as a copy of `policy` (as verl initialises its critic)."""
        critic = cls(policy.config, rngs=nnx.Rngs(seed))
        trunk = nnx.state(policy, nnx.Param)
        if "lm_head" in trunk:
            del trunk["lm_head"]
        nnx.update(critic.backbone, jax.tree.map(jnp.copy, trunk))
        return critic

    def __call__(self, input_ids_BxT, attention_mask=None, positions=None):
        """Per-token values [B, T] in float32."""
        hidden_BxTxE = self.backbone.hidden_states(input_ids_BxT, attention_mask, positions)
        w_E = self.value_head[...].astype(hidden_BxTxE.dtype)
        values_BxT = jnp.einsum("bte,e->bt", hidden_BxTxE, w_E, preferred_element_type=jnp.float32)
        return values_BxT + self.value_bias[...].astype(jnp.float32)
