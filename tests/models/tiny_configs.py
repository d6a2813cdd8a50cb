"""Tiny ModelConfigs covering each architecture variant (random init, no files)."""

from mimojax.models import ModelConfig

TINY_CONFIGS = {
    "llama_tied": ModelConfig("llama", 128, 32, 64, 2, 4, 2, 8, tie_word_embeddings=True),
    "qwen2": ModelConfig("qwen2", 128, 32, 64, 2, 4, 2, 8, attention_bias=True),
    "qwen3": ModelConfig("qwen3", 128, 32, 64, 2, 4, 1, 16, qk_norm=True),
}
