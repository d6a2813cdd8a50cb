"""Name and layout mapping between mimojax parameters and HF (transformers) tensors.

HF stores Linear weights as [out, in] with heads flattened; mimojax keeps the head axes
([embed, heads, head_dim]) so they can be sharded by name. Each rule below converts one HF
tensor of one layer to our per-layer slice and back.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from mimojax.models.config import ModelConfig


class WeightLoadError(ValueError):
    """A checkpoint tensor that is missing or has the wrong shape (the message names it)."""


@dataclasses.dataclass(frozen=True)
class Rule:
    """How one mimojax parameter maps to HF tensors (`{l}` in hf_name = layer index)."""

    ours: tuple[str, ...]
    hf_name: str
    hf_shape: Callable[[ModelConfig], tuple[int, ...]]
    to_ours: Callable[[np.ndarray, ModelConfig], np.ndarray]
    to_hf: Callable[[np.ndarray, ModelConfig], np.ndarray]

    def name(self, layer: int | None = None) -> str:
        """The HF tensor name (of layer `layer`, for a per-layer rule)."""
        return self.hf_name if layer is None else self.hf_name.format(l=layer)

    @property
    def per_layer(self) -> bool:
        return "{l}" in self.hf_name


def _same(x, cfg):
    return x


def _t(x, cfg):
    return x.T


def _heads_in(n_heads: Callable[[ModelConfig], int]):
    """[n*D, E] -> [E, n, D] and back."""

    def to_ours(x, cfg):
        return x.reshape(n_heads(cfg), cfg.head_dim, cfg.hidden_size).transpose(2, 0, 1)

    def to_hf(x, cfg):
        return x.transpose(1, 2, 0).reshape(n_heads(cfg) * cfg.head_dim, cfg.hidden_size)

    return to_ours, to_hf


def _bias(n_heads: Callable[[ModelConfig], int]):
    return (
        lambda x, cfg: x.reshape(n_heads(cfg), cfg.head_dim),
        lambda x, cfg: x.reshape(-1),
    )


def _o_to_ours(x, cfg):
    return x.reshape(cfg.hidden_size, cfg.num_heads, cfg.head_dim).transpose(1, 2, 0)


def _o_to_hf(x, cfg):
    return x.transpose(2, 0, 1).reshape(cfg.hidden_size, cfg.num_heads * cfg.head_dim)


def _h(cfg):
    return cfg.num_heads


def _k(cfg):
    return cfg.num_kv_heads


def rules_for(cfg: ModelConfig) -> list[Rule]:
    """The mapping rules that apply to this config (bias / qk-norm / tied head optional)."""
    E, M, D, V = cfg.hidden_size, cfg.intermediate_size, cfg.head_dim, cfg.vocab_size
    HD, KD = cfg.num_heads * D, cfg.num_kv_heads * D
    p = "model.layers.{l}."
    rules = [
        Rule(("embed",), "model.embed_tokens.weight", lambda c: (V, E), _same, _same),
        Rule(("final_norm",), "model.norm.weight", lambda c: (E,), _same, _same),
        Rule(("layers", "attn_norm"), p + "input_layernorm.weight", lambda c: (E,), _same, _same),
        Rule(
            ("layers", "q_proj"), p + "self_attn.q_proj.weight", lambda c: (HD, E), *_heads_in(_h)
        ),
        Rule(
            ("layers", "k_proj"), p + "self_attn.k_proj.weight", lambda c: (KD, E), *_heads_in(_k)
        ),
        Rule(
            ("layers", "v_proj"), p + "self_attn.v_proj.weight", lambda c: (KD, E), *_heads_in(_k)
        ),
        Rule(
            ("layers", "o_proj"),
            p + "self_attn.o_proj.weight",
            lambda c: (E, HD),
            _o_to_ours,
            _o_to_hf,
        ),
        Rule(
            ("layers", "mlp_norm"),
            p + "post_attention_layernorm.weight",
            lambda c: (E,),
            _same,
            _same,
        ),
        Rule(("layers", "gate_proj"), p + "mlp.gate_proj.weight", lambda c: (M, E), _t, _t),
        Rule(("layers", "up_proj"), p + "mlp.up_proj.weight", lambda c: (M, E), _t, _t),
        Rule(("layers", "down_proj"), p + "mlp.down_proj.weight", lambda c: (E, M), _t, _t),
    ]
    if cfg.attention_bias:
        rules += [
            Rule(("layers", "q_bias"), p + "self_attn.q_proj.bias", lambda c: (HD,), *_bias(_h)),
            Rule(("layers", "k_bias"), p + "self_attn.k_proj.bias", lambda c: (KD,), *_bias(_k)),
            Rule(("layers", "v_bias"), p + "self_attn.v_proj.bias", lambda c: (KD,), *_bias(_k)),
        ]
    if cfg.qk_norm:
        rules += [
            Rule(("layers", "q_norm"), p + "self_attn.q_norm.weight", lambda c: (D,), _same, _same),
            Rule(("layers", "k_norm"), p + "self_attn.k_norm.weight", lambda c: (D,), _same, _same),
        ]
    if not cfg.tie_word_embeddings:
        rules.append(Rule(("lm_head",), "lm_head.weight", lambda c: (V, E), _t, _t))
    return rules


def convert(rule: Rule, cfg: ModelConfig, read: Callable[[str], np.ndarray], layer=None):
    """Our slice for one HF tensor (layer `layer` of a per-layer rule), shape-checked."""
    name = rule.name(layer)
    x = read(name)
    if tuple(x.shape) != rule.hf_shape(cfg):
        raise WeightLoadError(
            f"tensor {name!r} has shape {tuple(x.shape)}, expected {rule.hf_shape(cfg)} "
            f"for this config ({cfg.model_type}, hidden={cfg.hidden_size}, "
            f"heads={cfg.num_heads}/{cfg.num_kv_heads}, head_dim={cfg.head_dim})"
        )
    return rule.to_ours(np.asarray(x), cfg)


def to_hf(rule: Rule, cfg: ModelConfig, ours: np.ndarray, layer=None) -> tuple[str, np.ndarray]:
    """(HF name, HF tensor) for our parameter, or for one layer's slice of a per-layer one."""
    return rule.name(layer), np.ascontiguousarray(rule.to_hf(ours, cfg))
