"""Pallas kernels (Triton on GPU, interpret mode elsewhere), each with a pure-jnp reference.

This folder installs as `mimojax.kernels`. Python run from the repo root also finds it as a
top-level `kernels`, a name that belongs to Hugging Face's package (transformers imports it);
imported under that name, this file hands the name over to the next `kernels` on sys.path.
"""

if __name__ != "mimojax.kernels":
    import importlib.machinery as _machinery
    import importlib.util as _util
    import os as _os
    import sys as _sys

    _here = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
    _path = [p for p in _sys.path if _os.path.abspath(p or _os.curdir) != _here]
    _spec = _machinery.PathFinder.find_spec(__name__, _path)
    if _spec is None:
        raise ModuleNotFoundError(f"No module named {__name__!r}", name=__name__)
    _module = _util.module_from_spec(_spec)
    _sys.modules[__name__] = _module  # the import statement returns sys.modules[__name__]
    _spec.loader.exec_module(_module)
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
