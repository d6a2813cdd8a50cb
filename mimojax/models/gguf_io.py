"""GGUF (llama.cpp) files: header -> ModelConfig, quantised tensors -> dequantised HF tensors."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

import numpy as np
from jax.sharding import Mesh

from mimojax.models.config import ModelConfig, ModelConfigError, RopeScaling
from mimojax.models.decoder import Decoder
from mimojax.models.hf_mapping import WeightLoadError
from mimojax.models.weights import build_model

_ARCH_TO_MODEL_TYPE = {"llama": "llama", "qwen2": "qwen2", "qwen3": "qwen3"}

# GGUF tensor name -> HF name; `{l}` is the layer index.
_NAME_MAP = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
    "blk.{l}.attn_norm.weight": "model.layers.{l}.input_layernorm.weight",
    "blk.{l}.attn_q.weight": "model.layers.{l}.self_attn.q_proj.weight",
    "blk.{l}.attn_k.weight": "model.layers.{l}.self_attn.k_proj.weight",
    "blk.{l}.attn_v.weight": "model.layers.{l}.self_attn.v_proj.weight",
    "blk.{l}.attn_q.bias": "model.layers.{l}.self_attn.q_proj.bias",
    "blk.{l}.attn_k.bias": "model.layers.{l}.self_attn.k_proj.bias",
    "blk.{l}.attn_v.bias": "model.layers.{l}.self_attn.v_proj.bias",
    "blk.{l}.attn_q_norm.weight": "model.layers.{l}.self_attn.q_norm.weight",
    "blk.{l}.attn_k_norm.weight": "model.layers.{l}.self_attn.k_norm.weight",
    "blk.{l}.attn_output.weight": "model.layers.{l}.self_attn.o_proj.weight",
    "blk.{l}.ffn_norm.weight": "model.layers.{l}.post_attention_layernorm.weight",
    "blk.{l}.ffn_gate.weight": "model.layers.{l}.mlp.gate_proj.weight",
    "blk.{l}.ffn_up.weight": "model.layers.{l}.mlp.up_proj.weight",
    "blk.{l}.ffn_down.weight": "model.layers.{l}.mlp.down_proj.weight",
}


def _hf_name(gguf_name: str) -> str | None:
    m = re.match(r"blk\.(\d+)\.(.*)", gguf_name)
    if m is None:
        return _NAME_MAP.get(gguf_name)
    template = _NAME_MAP.get(f"blk.{{l}}.{m.group(2)}")
    return None if template is None else template.format(l=m.group(1))


def unpermute_rope(w: np.ndarray, n_heads: int) -> np.ndarray:
    """Undoes llama.cpp's Q/K row permutation (interleaved rope pairs -> HF rotate-half halves).

    The converter applied reshape(n, 2, r, ...).swapaxes(1, 2); this is its inverse.
    """
    rows = w.shape[0]
    return w.reshape(n_heads, rows // n_heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _open(path: str):
    import gguf

    if not os.path.exists(path):
        raise FileNotFoundError(f"GGUF file not found: {path}")
    return gguf.GGUFReader(path)


def _field(reader, key: str, default=None, required: bool = True):
    f = reader.fields.get(key)
    if f is None:
        if required and default is None:
            raise ModelConfigError(f"GGUF header has no {key!r}")
        return default
    return f.contents()


def gguf_config(reader, source: str = "gguf", **overrides) -> ModelConfig:
    """ModelConfig from a GGUF header (`{arch}.block_count`, `{arch}.attention.*`, ...)."""
    arch = _field(reader, "general.architecture")
    if arch not in _ARCH_TO_MODEL_TYPE:
        raise ModelConfigError(
            f"{source}: unsupported GGUF architecture {arch!r}; supported: "
            f"{', '.join(_ARCH_TO_MODEL_TYPE)}"
        )
    if "rope_freqs.weight" in {t.name for t in reader.tensors}:
        raise ModelConfigError(f"{source}: GGUF rope_freqs (baked llama3 scaling) is not supported")
    hidden = int(_field(reader, f"{arch}.embedding_length"))
    heads = int(_field(reader, f"{arch}.attention.head_count"))
    tokens = _field(reader, "tokenizer.ggml.tokens", default=[], required=False)
    names = {t.name for t in reader.tensors}
    fields = dict(
        model_type=_ARCH_TO_MODEL_TYPE[arch],
        vocab_size=int(_field(reader, f"{arch}.vocab_size", default=len(tokens) or None)),
        hidden_size=hidden,
        intermediate_size=int(_field(reader, f"{arch}.feed_forward_length")),
        num_layers=int(_field(reader, f"{arch}.block_count")),
        num_heads=heads,
        num_kv_heads=int(_field(reader, f"{arch}.attention.head_count_kv", default=heads)),
        head_dim=int(_field(reader, f"{arch}.attention.key_length", default=hidden // heads)),
        rope_theta=float(_field(reader, f"{arch}.rope.freq_base", default=10000.0)),
        rope_scaling=RopeScaling(),
        rms_norm_eps=float(_field(reader, f"{arch}.attention.layer_norm_rms_epsilon", 1e-6)),
        tie_word_embeddings="output.weight" not in names,
        attention_bias="blk.0.attn_q.bias" in names,
        qk_norm="blk.0.attn_q_norm.weight" in names,
        max_position_embeddings=int(_field(reader, f"{arch}.context_length", default=32768)),
        bos_token_id=_field(reader, "tokenizer.ggml.bos_token_id", required=False),
        eos_token_id=_field(reader, "tokenizer.ggml.eos_token_id", required=False),
        pad_token_id=_field(reader, "tokenizer.ggml.padding_token_id", required=False),
    )
    fields.update(overrides)
    return ModelConfig(**fields)


class GGUFTensorReader:
    """Reads GGUF tensors by their HF name, dequantised to float32 in HF [out, in] layout."""

    def __init__(self, reader, cfg: ModelConfig, source: str):
        import gguf

        self._dequantize = gguf.quants.dequantize
        self.tensors = {}
        for t in reader.tensors:
            hf = _hf_name(t.name)
            if hf is not None:
                self.tensors[hf] = t
        self.cfg, self.source = cfg, source

    def __call__(self, name: str) -> np.ndarray:
        t = self.tensors.get(name)
        if t is None:
            raise WeightLoadError(f"{self.source}: GGUF file has no tensor for {name!r}")
        w = np.asarray(self._dequantize(t.data, t.tensor_type), dtype=np.float32)
        # llama.cpp permutes Q/K rows only for the llama architecture.
        if self.cfg.model_type == "llama" and name.endswith("q_proj.weight"):
            w = unpermute_rope(w, self.cfg.num_heads)
        elif self.cfg.model_type == "llama" and name.endswith("k_proj.weight"):
            w = unpermute_rope(w, self.cfg.num_kv_heads)
        return w


def load_gguf_model(
    path: str, mesh: Mesh | None = None, rules: Mapping | None = None, **overrides
) -> Decoder:
    """Loads a GGUF file's weights (dequantised) into a Decoder, sharded per `rules`."""
    reader = _open(path)
    cfg = gguf_config(reader, source=path, **overrides)
    return build_model(cfg, GGUFTensorReader(reader, cfg, path), mesh, rules)
