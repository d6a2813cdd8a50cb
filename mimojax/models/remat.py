"""Rematerialisation policies for the scanned layer body (config key model.remat)."""

from __future__ import annotations

import jax

# none: keep every activation (fastest, most memory); full: keep only each layer's input and
# recompute the layer in the backward pass; dots: keep matmul outputs, recompute the cheap
# elementwise ops (on 2 CPU cores ~15% faster than none for SmolLM2, since fewer [L, ...]
# residual buffers are written and read back).
REMAT_POLICIES = {
    "none": None,
    "full": jax.checkpoint_policies.nothing_saveable,
    "dots": jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
}


def apply_remat(body, policy: str):
    """`body` wrapped in jax.checkpoint with the named policy ("none" returns it unchanged)."""
    if REMAT_POLICIES[policy] is None:
        return body
    return jax.checkpoint(body, policy=REMAT_POLICIES[policy])
