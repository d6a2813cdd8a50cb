"""ModelConfig: the decoder family's hyper-parameters, read from and written to HF config.json."""

from __future__ import annotations

import dataclasses
from typing import Any

SUPPORTED_MODEL_TYPES = ("llama", "qwen2", "qwen3")


class ModelConfigError(ValueError):
    """A config.json (or GGUF header) that mimojax cannot turn into a ModelConfig."""


@dataclasses.dataclass(frozen=True)
class RopeScaling:
    """RoPE frequency scaling; `rope_type` is 'default', 'linear' or 'llama3'."""

    rope_type: str = "default"
    factor: float = 1.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_position_embeddings: int = 8192


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """One decoder covering Llama, Qwen2/2.5 (qkv bias) and Qwen3 (q/k RMSNorm)."""

    model_type: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rope_theta: float = 10000.0
    rope_scaling: RopeScaling = RopeScaling()
    rms_norm_eps: float = 1e-6
    tie_word_embeddings: bool = False
    attention_bias: bool = False  # qkv bias (Qwen2/2.5)
    qk_norm: bool = False  # per-head RMSNorm on q and k (Qwen3)
    max_position_embeddings: int = 32768
    dtype: str = "float32"  # compute dtype
    param_dtype: str = "float32"  # storage dtype
    attention_impl: str = "xla"
    remat: str = "none"  # per-layer rematerialisation policy: see decoder.REMAT_POLICIES
    bos_token_id: int | None = None
    eos_token_id: int | list[int] | None = None
    pad_token_id: int | None = None

    def __post_init__(self):
        if self.model_type not in SUPPORTED_MODEL_TYPES:
            raise ModelConfigError(
                f"unknown model_type {self.model_type!r}; "
                f"supported: {', '.join(SUPPORTED_MODEL_TYPES)}"
            )
        from mimojax.models.remat import REMAT_POLICIES

        if self.remat not in REMAT_POLICIES:
            raise ModelConfigError(
                f"unknown remat policy {self.remat!r} (model.remat); "
                f"choose from: {', '.join(REMAT_POLICIES)}"
            )
        if self.num_heads % self.num_kv_heads:
            raise ModelConfigError(
                f"num_attention_heads={self.num_heads} is not a multiple of "
                f"num_key_value_heads={self.num_kv_heads}"
            )

    def replace(self, **changes: Any) -> ModelConfig:
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)


def _require(hf: dict, key: str, source: str) -> Any:
    if key not in hf:
        raise ModelConfigError(f"{source}: missing required key {key!r}")
    return hf[key]


def _rope_from_hf(hf: dict) -> tuple[float, RopeScaling]:
    """Reads RoPE settings from either transformers convention.

    4.x: top-level `rope_theta` plus an optional `rope_scaling` dict.
    5.x: one `rope_parameters` dict holding `rope_type`, `rope_theta` and the scaling fields.
    """
    params = hf.get("rope_parameters")
    if params is None:
        theta = float(hf.get("rope_theta", 10000.0))
        params = hf.get("rope_scaling") or {}
    else:
        theta = float(params.get("rope_theta", hf.get("rope_theta", 10000.0)))
    rope_type = params.get("rope_type", params.get("type", "default")) or "default"
    if rope_type not in ("default", "linear", "llama3"):
        raise ModelConfigError(
            f"unsupported rope_type {rope_type!r}; supported: default, linear, llama3"
        )
    scaling = RopeScaling(
        rope_type=rope_type,
        factor=float(params.get("factor", 1.0)),
        low_freq_factor=float(params.get("low_freq_factor", 1.0)),
        high_freq_factor=float(params.get("high_freq_factor", 4.0)),
        original_max_position_embeddings=int(params.get("original_max_position_embeddings", 8192)),
    )
    return theta, scaling


def config_from_hf(hf: dict, source: str = "config.json", **overrides: Any) -> ModelConfig:
    """Builds a ModelConfig from an HF config dict (transformers 4.x or 5.x layout)."""
    model_type = _require(hf, "model_type", source)
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise ModelConfigError(
            f"{source}: unknown model_type {model_type!r}; "
            f"supported: {', '.join(SUPPORTED_MODEL_TYPES)}"
        )
    hidden = int(_require(hf, "hidden_size", source))
    heads = int(_require(hf, "num_attention_heads", source))
    theta, scaling = _rope_from_hf(hf)
    default_bias = model_type == "qwen2"
    fields = dict(
        model_type=model_type,
        vocab_size=int(_require(hf, "vocab_size", source)),
        hidden_size=hidden,
        intermediate_size=int(_require(hf, "intermediate_size", source)),
        num_layers=int(_require(hf, "num_hidden_layers", source)),
        num_heads=heads,
        num_kv_heads=int(hf.get("num_key_value_heads") or heads),
        head_dim=int(hf.get("head_dim") or hidden // heads),
        rope_theta=theta,
        rope_scaling=scaling,
        rms_norm_eps=float(hf.get("rms_norm_eps", 1e-6)),
        tie_word_embeddings=bool(hf.get("tie_word_embeddings", False)),
        attention_bias=bool(hf.get("attention_bias", default_bias)),
        qk_norm=model_type == "qwen3",
        max_position_embeddings=int(hf.get("max_position_embeddings", 32768)),
        bos_token_id=hf.get("bos_token_id"),
        eos_token_id=hf.get("eos_token_id"),
        pad_token_id=hf.get("pad_token_id"),
    )
    if hf.get("mlp_bias", False):
        raise ModelConfigError(f"{source}: mlp_bias=true is not supported (no MLP biases)")
    if hf.get("hidden_act", "silu") != "silu":
        raise ModelConfigError(f"{source}: hidden_act {hf['hidden_act']!r} is not supported (silu)")
    fields.update(overrides)
    return ModelConfig(**fields)


def config_to_hf(cfg: ModelConfig) -> dict:
    """The HF config dict transformers reloads (5.x `rope_parameters` plus 4.x `rope_theta`)."""
    arch = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM"}
    rope: dict[str, Any] = {"rope_type": cfg.rope_scaling.rope_type, "rope_theta": cfg.rope_theta}
    if cfg.rope_scaling.rope_type != "default":
        rope["factor"] = cfg.rope_scaling.factor
    if cfg.rope_scaling.rope_type == "llama3":
        rope.update(
            low_freq_factor=cfg.rope_scaling.low_freq_factor,
            high_freq_factor=cfg.rope_scaling.high_freq_factor,
            original_max_position_embeddings=cfg.rope_scaling.original_max_position_embeddings,
        )
    hf = {
        "architectures": [arch[cfg.model_type]],
        "model_type": cfg.model_type,
        "vocab_size": cfg.vocab_size,
        "hidden_size": cfg.hidden_size,
        "intermediate_size": cfg.intermediate_size,
        "num_hidden_layers": cfg.num_layers,
        "num_attention_heads": cfg.num_heads,
        "num_key_value_heads": cfg.num_kv_heads,
        "head_dim": cfg.head_dim,
        "hidden_act": "silu",
        "rms_norm_eps": cfg.rms_norm_eps,
        "tie_word_embeddings": cfg.tie_word_embeddings,
        "max_position_embeddings": cfg.max_position_embeddings,
        "rope_parameters": rope,
        "rope_theta": cfg.rope_theta,
        "dtype": cfg.param_dtype,  # transformers 5.x
        "torch_dtype": cfg.param_dtype,  # transformers 4.x
        "bos_token_id": cfg.bos_token_id,
        "eos_token_id": cfg.eos_token_id,
        "pad_token_id": cfg.pad_token_id,
    }
    if cfg.model_type == "llama":
        hf["attention_bias"] = cfg.attention_bias
        hf["mlp_bias"] = False
    if cfg.model_type == "qwen3":
        hf["attention_bias"] = cfg.attention_bias
    return hf
