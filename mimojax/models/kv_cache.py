"""Per-slot KV cache for incremental decoding: prefill writes a prompt, each step writes a token."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from mimojax.models.config import ModelConfig


class KVCache(NamedTuple):
    """Keys/values of every layer and the number of valid positions of each row."""

    k_LxBxSxKxD: jax.Array
    v_LxBxSxKxD: jax.Array
    lengths_B: jax.Array


def init_cache(cfg: ModelConfig, batch: int, max_length: int, dtype=None) -> KVCache:
    """An empty cache for `batch` rows of up to `max_length` tokens."""
    shape = (cfg.num_layers, batch, max_length, cfg.num_kv_heads, cfg.head_dim)
    dtype = jnp.dtype(dtype or cfg.dtype)
    # Two separate buffers: the decode step donates both.
    return KVCache(jnp.zeros(shape, dtype), jnp.zeros(shape, dtype), jnp.zeros((batch,), jnp.int32))


def write_cache(kv, k_new_BxTxKxD, v_new_BxTxKxD):
    """Writes T new keys/values of row b at positions lengths[b] .. lengths[b]+T-1."""
    k_BxSxKxD, v_BxSxKxD, lengths_B = kv

    def write_row(cache_SxKxD, new_TxKxD, start):
        return jax.lax.dynamic_update_slice(
            cache_SxKxD, new_TxKxD.astype(cache_SxKxD.dtype), (start, 0, 0)
        )

    k_BxSxKxD = jax.vmap(write_row)(k_BxSxKxD, k_new_BxTxKxD, lengths_B)
    v_BxSxKxD = jax.vmap(write_row)(v_BxSxKxD, v_new_BxTxKxD, lengths_B)
    return k_BxSxKxD, v_BxSxKxD


def advance(cache: KVCache, num_new_B) -> KVCache:
    """Marks `num_new_B` more positions of each row valid (the real, unpadded new tokens)."""
    return cache._replace(lengths_B=cache.lengths_B + num_new_B.astype(jnp.int32))
