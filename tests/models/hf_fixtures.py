"""Tiny random transformers (PyTorch) models saved as HF directories: the parity reference."""

from __future__ import annotations

import torch
import transformers

TINY = dict(
    vocab_size=96,
    hidden_size=64,
    intermediate_size=112,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=256,
    rms_norm_eps=1e-6,
)

CASES = {
    "llama": (transformers.LlamaConfig, dict(rope_theta=10000.0)),
    "llama3_rope": (
        transformers.LlamaConfig,
        dict(
            rope_theta=500000.0,
            rope_scaling=dict(
                rope_type="llama3",
                factor=8.0,
                low_freq_factor=1.0,
                high_freq_factor=4.0,
                original_max_position_embeddings=32,
            ),
        ),
    ),
    "qwen2": (transformers.Qwen2Config, dict(rope_theta=1000000.0)),
    "qwen3": (transformers.Qwen3Config, dict(rope_theta=1000000.0, head_dim=32)),
}
MODEL_CLASSES = {
    "llama": transformers.LlamaForCausalLM,
    "qwen2": transformers.Qwen2ForCausalLM,
    "qwen3": transformers.Qwen3ForCausalLM,
}


def make_hf_model(case: str, tied: bool, seed: int = 0):
    """A random-init transformers model for `case`, with biases/norms randomised too."""
    config_cls, extra = CASES[case]
    cfg = config_cls(**TINY, **extra, tie_word_embeddings=tied)
    torch.manual_seed(seed)
    model = MODEL_CLASSES[cfg.model_type](cfg).eval()
    # Default init leaves norms at 1 and biases at 0; perturb them so the mapping is tested.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name or name.endswith("bias"):
                p.add_(0.1 * torch.randn_like(p))
    return model


def save_hf_dir(model, path) -> str:
    """Saves as safetensors (the format mimojax reads)."""
    model.save_pretrained(path, safe_serialization=True)
    return str(path)


def torch_logits(model, ids, mask):
    """Reference logits from the PyTorch model, as float32 numpy."""
    with torch.no_grad():
        out = model(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask))
    return out.logits.float().numpy()
