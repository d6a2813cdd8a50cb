"""Pallas kernels (Triton on GPU, interpret mode elsewhere), each with a pure-jnp reference."""

from mimojax.kernels.decode_attention import decode_attention
from mimojax.kernels.flash_attention import BlockSizes, default_block_sizes, flash_attention
from mimojax.kernels.reference import (
    reference_attention,
    reference_decode_attention,
    reference_visibility,
)

__all__ = [
    "BlockSizes",
    "decode_attention",
    "default_block_sizes",
    "flash_attention",
    "reference_attention",
    "reference_decode_attention",
    "reference_visibility",
]
