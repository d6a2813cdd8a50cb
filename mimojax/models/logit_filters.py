"""Temperature, top-k and top-p applied to logits: the distribution the engine samples from.

The engine samples from `process_logits(...)` and reports the log-probability of each sampled
token under it; the trainer recomputes log-probs through the same function, so the two agree
(verl's "processed logprobs"). Filtered-out tokens get -inf.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def _filter_top_k_top_p(x_BxV, top_k_B, top_p_B):
    v = x_BxV.shape[-1]
    sorted_BxV = -jnp.sort(-x_BxV, axis=-1)
    # top-k: keep values >= the k-th largest (k = 0 means off).
    k_B = jnp.where(top_k_B > 0, jnp.minimum(top_k_B, v), v)
    kth_B = jnp.take_along_axis(sorted_BxV, (k_B - 1)[:, None], axis=-1)[:, 0]
    # top-p over what top-k kept (HF and vLLM order): the smallest prefix of the sorted
    # distribution whose mass reaches p; the top token is always kept.
    ranks_V = jnp.arange(v)
    sorted_BxV = jnp.where(ranks_V[None] < k_B[:, None], sorted_BxV, -jnp.inf)
    probs_BxV = jax.nn.softmax(sorted_BxV, axis=-1)
    mass_before_BxV = jnp.cumsum(probs_BxV, axis=-1) - probs_BxV
    keep_BxV = (mass_before_BxV < top_p_B[:, None]) | (ranks_V[None] == 0)
    n_keep_B = jnp.sum(keep_BxV & (ranks_V[None] < k_B[:, None]), axis=-1)
    pth_B = jnp.take_along_axis(sorted_BxV, (n_keep_B - 1)[:, None], axis=-1)[:, 0]
    threshold_B = jnp.maximum(kth_B, pth_B)
    return jnp.where(x_BxV >= threshold_B[:, None], x_BxV, -jnp.inf)


def process_logits(logits_BxV, temperature_B, top_k_B, top_p_B):
    """float32 logits / temperature, with tokens outside top-k / top-p set to -inf.

    Per-row parameters; temperature 0 (greedy) is treated as 1 here so a greedy token still
    gets a proper log-probability. top_k 0 and top_p 1 switch the filters off; the sort they
    need only runs when some row uses one.
    """
    x_BxV = logits_BxV.astype(jnp.float32)
    temperature_B = jnp.asarray(temperature_B, jnp.float32)
    top_k_B = jnp.asarray(top_k_B, jnp.int32)
    top_p_B = jnp.asarray(top_p_B, jnp.float32)
    t_B = jnp.where(temperature_B > 0, temperature_B, 1.0)
    x_BxV = x_BxV / t_B[:, None]
    needs_filter = jnp.any(top_k_B > 0) | jnp.any(top_p_B < 1.0)
    return jax.lax.cond(
        needs_filter,
        lambda x: _filter_top_k_top_p(x, top_k_B, top_p_B),
        lambda x: x,
        x_BxV,
    )


def processed_log_softmax(logits_BxV, temperature, top_k=0, top_p=1.0):
    """log p over the processed distribution for scalar sampling settings (trainer side)."""
    b = logits_BxV.shape[0]
    full = lambda value, dtype: jnp.full((b,), value, dtype)
    x_BxV = process_logits(
        logits_BxV, full(temperature, jnp.float32), full(top_k, jnp.int32), full(top_p, jnp.float32)
    )
    return jax.nn.log_softmax(x_BxV, axis=-1)
