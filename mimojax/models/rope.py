"""Rotary position embeddings in the HF layout (rotate-half over the two halves of head_dim)."""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np

from mimojax.models.config import ModelConfig


def inverse_frequencies(cfg: ModelConfig) -> np.ndarray:
    """Per-pair inverse frequencies [head_dim/2], with linear or llama3 scaling applied."""
    dim = cfg.head_dim
    inv_freq_D2 = 1.0 / (cfg.rope_theta ** (np.arange(0, dim, 2, dtype=np.float64) / dim))
    s = cfg.rope_scaling
    if s.rope_type == "linear":
        inv_freq_D2 = inv_freq_D2 / s.factor
    elif s.rope_type == "llama3":
        # Llama 3.1: long wavelengths are slowed by `factor`, short ones kept, the band between
        # interpolated smoothly.
        low_wavelen = s.original_max_position_embeddings / s.low_freq_factor
        high_wavelen = s.original_max_position_embeddings / s.high_freq_factor
        wavelen = 2 * math.pi / inv_freq_D2
        scaled = np.where(wavelen > low_wavelen, inv_freq_D2 / s.factor, inv_freq_D2)
        smooth = (s.original_max_position_embeddings / wavelen - s.low_freq_factor) / (
            s.high_freq_factor - s.low_freq_factor
        )
        smoothed = (1 - smooth) * scaled / s.factor + smooth * scaled
        is_medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
        inv_freq_D2 = np.where(is_medium, smoothed, scaled)
    return inv_freq_D2.astype(np.float32)


def rope_cos_sin(positions_BxT: jnp.ndarray, cfg: ModelConfig) -> tuple[jnp.ndarray, jnp.ndarray]:
    """cos and sin tables [B, T, head_dim] for integer positions, in float32."""
    inv_freq_D2 = jnp.asarray(inverse_frequencies(cfg))
    angles_BxTxD2 = positions_BxT.astype(jnp.float32)[..., None] * inv_freq_D2
    angles_BxTxD = jnp.concatenate([angles_BxTxD2, angles_BxTxD2], axis=-1)
    return jnp.cos(angles_BxTxD), jnp.sin(angles_BxTxD)


def apply_rope(x_BxTxNxD: jnp.ndarray, cos_BxTxD: jnp.ndarray, sin_BxTxD: jnp.ndarray):
    """Rotates q or k by their positions; computed in float32, returned in x's dtype."""
    x = x_BxTxNxD.astype(jnp.float32)
    half = x.shape[-1] // 2
    rotated = jnp.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    out = x * cos_BxTxD[:, :, None, :] + rotated * sin_BxTxD[:, :, None, :]
    return out.astype(x_BxTxNxD.dtype)
