"""The decoder family (Llama, Qwen2/2.5, Qwen3), value head, weight I/O and tokenizers."""

from mimojax.models.config import ModelConfig, ModelConfigError, config_from_hf, config_to_hf
from mimojax.models.decoder import Decoder, ValueModel
from mimojax.models.hf_mapping import WeightLoadError
from mimojax.models.loader import load_model, save_hf  # noqa: E402
from mimojax.models.logprobs import logprobs_from_hidden, token_logprobs

__all__ = [
    "Decoder",
    "ModelConfig",
    "ModelConfigError",
    "ValueModel",
    "WeightLoadError",
    "config_from_hf",
    "config_to_hf",
    "load_model",
    "logprobs_from_hidden",
    "save_hf",
    "token_logprobs",
]
