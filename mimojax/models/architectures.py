"""Model architectures without weights: a table of public ones, and `architecture_config`.

The planner (mimojax/plan/run_shape.py) sizes a run before anyone has the weights, so it needs a
model's shape from its name alone. The table holds the shape fields of each model's published
`config.json` (Hugging Face hub, `Qwen/<name>` and `HuggingFaceTB/SmolLM2-135M-Instruct`),
copied by hand; nothing here is downloaded.
"""

from __future__ import annotations

import json
import os
import re

from mimojax.models.config import ModelConfig, config_from_hf
from mimojax.models.registry import TINY_MODELS


def _qwen2(hidden, layers, heads, kv, inter, vocab, tied, eps=1e-6) -> ModelConfig:
    return ModelConfig(
        "qwen2", vocab, hidden, inter, layers, heads, kv, hidden // heads,
        rope_theta=1e6, rms_norm_eps=eps, tie_word_embeddings=tied, attention_bias=True,
        max_position_embeddings=32768,
    )  # fmt: skip


def _qwen3(hidden, layers, heads, kv, inter, tied) -> ModelConfig:
    return ModelConfig(
        "qwen3", 151936, hidden, inter, layers, heads, kv, 128,
        rope_theta=1e6, rms_norm_eps=1e-6, tie_word_embeddings=tied, qk_norm=True,
        max_position_embeddings=40960,
    )  # fmt: skip


# name -> ModelConfig. hidden, layers, heads, kv heads, intermediate, vocab, tied embeddings.
KNOWN_ARCHITECTURES: dict[str, ModelConfig] = {
    "qwen2.5-0.5b": _qwen2(896, 24, 14, 2, 4864, 151936, True),
    "qwen2.5-1.5b": _qwen2(1536, 28, 12, 2, 8960, 151936, True),
    "qwen2.5-3b": _qwen2(2048, 36, 16, 2, 11008, 151936, True),
    "qwen2.5-7b": _qwen2(3584, 28, 28, 4, 18944, 152064, False),
    "qwen2.5-14b": _qwen2(5120, 48, 40, 8, 13824, 152064, False, eps=1e-5),
    "qwen2.5-32b": _qwen2(5120, 64, 40, 8, 27648, 152064, False, eps=1e-5),
    "qwen2.5-72b": _qwen2(8192, 80, 64, 8, 29568, 152064, False, eps=1e-5),
    "qwen3-0.6b": _qwen3(1024, 28, 16, 8, 3072, True),
    "qwen3-1.7b": _qwen3(2048, 28, 16, 8, 6144, True),
    "qwen3-4b": _qwen3(2560, 36, 32, 8, 9728, True),
    "qwen3-8b": _qwen3(4096, 36, 32, 8, 12288, False),
    "qwen3-14b": _qwen3(5120, 40, 40, 8, 17408, False),
    "qwen3-32b": _qwen3(5120, 64, 64, 8, 25600, False),
    "smollm2-135m": ModelConfig(
        "llama", 49152, 576, 1536, 30, 9, 3, 64, rope_theta=100000.0, rms_norm_eps=1e-5,
        tie_word_embeddings=True, max_position_embeddings=8192,
    ),
}  # fmt: skip


def _key(name: str) -> str:
    """'Qwen/Qwen2.5-7B-Instruct', 'qwen2p5_7b', 'qwen2.5-7b' -> one lookup key."""
    name = os.path.basename(name.rstrip("/")).lower()
    name = re.sub(r"\.gguf$", "", name)
    name = re.sub(r"-(instruct|base|chat)$", "", name)
    name = re.sub(r"(\d)p(\d)", r"\1\2", name)
    return re.sub(r"[^a-z0-9]", "", name)


_BY_KEY = {_key(name): name for name in KNOWN_ARCHITECTURES}


def known_architecture(name: str) -> str | None:
    """The table's name for `name` (any spelling, path or hub id of a known model), or None."""
    return _BY_KEY.get(_key(name))


def architecture_config(name_or_path: str) -> tuple[ModelConfig, str]:
    """(ModelConfig, where it came from) for a registered name, an HF dir (its config.json),
    a .gguf file (its header), or a known architecture (also when `name_or_path` is a path
    that is not on this machine but names one, like /models/Qwen2.5-7B-Instruct)."""
    if name_or_path in TINY_MODELS:
        return TINY_MODELS[name_or_path][0](), f"registered tiny model {name_or_path}"
    if name_or_path == "smollm2-135m-instruct":
        return KNOWN_ARCHITECTURES["smollm2-135m"], "known architecture smollm2-135m"
    if os.path.isdir(name_or_path) and os.path.exists(os.path.join(name_or_path, "config.json")):
        path = os.path.join(name_or_path, "config.json")
        with open(path) as f:
            return config_from_hf(json.load(f), source=path), path
    if name_or_path.endswith(".gguf") and os.path.exists(name_or_path):
        from mimojax.models.gguf_io import _open, gguf_config

        return gguf_config(_open(name_or_path), source=name_or_path), name_or_path
    known = known_architecture(name_or_path)
    if known is not None:
        where = "" if name_or_path == known else f" ({name_or_path} not read)"
        return KNOWN_ARCHITECTURES[known], f"known architecture {known}{where}"
    raise FileNotFoundError(
        f"model {name_or_path!r}: not an HF dir with a config.json, a .gguf file, a registered "
        f"name or a known architecture ({', '.join(KNOWN_ARCHITECTURES)})"
    )
