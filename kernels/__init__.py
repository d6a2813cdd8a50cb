"""Pallas kernels (Triton on GPU, interpret mode elsewhere), each with a pure-jnp reference.

This folder installs as `mimojax.kernels`. Python run from the repo root also finds it as a
top-level `kernels`, a name that belongs to Hugging Face's package (transformers imports it);
imported under that name, this file hands the name over to the next `kernels` on sys.path.
"""

if __name__ != "mimojax.kernels":  # see mimojax/shadowing.py
    from mimojax.shadowing import hand_over

    hand_over(__name__, __file__)
else:
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
