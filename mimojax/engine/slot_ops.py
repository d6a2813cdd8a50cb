"""JaxEngine's jitted kernels on the decode state (the engine class holds the API around them).

prefill: one prompt (or a continuation of an existing Prefix) -> its KV and the first token of
each of its samples; insert: a Prefix's sample -> one decode slot; extract: a slot's KV -> a
Prefix for the next turn; generate: one token for every slot over the first `width` cache
positions. All are pure functions of (params, state) so JaxEngine jits them once per shape with
the parameters as an argument: `update_params` swaps weights without recompiling.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from mimojax.engine.api import DecodeState, Prefix, pack_result
from mimojax.engine.forward import LayerCaches, cached_hidden, init_layer_caches, logits_at
from mimojax.engine.sampling import sample_tokens


def prefill_one(cfg, params, ids_1xP, true_length, key_Nx2, temperature, top_k, top_p, prior):
    """A Prefix for one prompt, continuing from `prior` (an existing Prefix) when given."""
    p = ids_1xP.shape[1]
    if prior is None:
        caches = init_layer_caches(cfg, 1, p)
        start = jnp.int32(0)
    else:
        p0 = prior.k_L[0].shape[1]
        caches = init_layer_caches(cfg, 1, p0 + p)
        put = lambda buf, old: buf.at[0, :, :p0].set(old.astype(buf.dtype))
        start = prior.true_length
        caches = LayerCaches(
            tuple(map(put, caches.k_L, prior.k_L)),
            tuple(map(put, caches.v_L, prior.v_L)),
            jnp.reshape(start, (1,)),
        )
    hidden_1xPxE, caches = cached_hidden(params, cfg, ids_1xP, caches)
    last_1xE = jax.lax.dynamic_index_in_dim(hidden_1xPxE[0], true_length - 1, keepdims=True)
    logits_1xV = logits_at(params, cfg, last_1xE)
    n = key_Nx2.shape[0]
    full = lambda x: jnp.full((n,), x)
    tokens_N, logp_N = sample_tokens(
        jnp.broadcast_to(logits_1xV, (n, logits_1xV.shape[-1])),
        key_Nx2,
        jnp.zeros((n,), jnp.int32),
        full(temperature),
        full(top_k),
        full(top_p),
    )
    prefix = Prefix(
        tuple(k[0] for k in caches.k_L),
        tuple(v[0] for v in caches.v_L),
        (start + true_length).astype(jnp.int32),
        tokens_N,
        logp_N,
        key_Nx2,
        temperature,
        top_k,
        top_p,
    )
    result = pack_result(tokens_N, jnp.ones_like(tokens_N), jnp.ones_like(tokens_N), logp_N, n)
    return prefix, result


def insert_slot(prefix: Prefix, state: DecodeState, slot, sample) -> DecodeState:
    """Copies sample `sample` of `prefix` into decode slot `slot` (both traced: one compile)."""
    cache = state.cache
    put = lambda buf, new: jax.lax.dynamic_update_slice(
        buf, new[None].astype(buf.dtype), (slot, 0, 0, 0)
    )
    return DecodeState(
        LayerCaches(
            tuple(map(put, cache.k_L, prefix.k_L)),
            tuple(map(put, cache.v_L, prefix.v_L)),
            cache.lengths_B.at[slot].set(prefix.true_length),
        ),
        state.tokens_B.at[slot].set(prefix.first_token_N[sample]),
        state.generated_B.at[slot].set(1),
        state.key_Bx2.at[slot].set(prefix.key_Nx2[sample]),
        state.temperature_B.at[slot].set(prefix.temperature),
        state.top_k_B.at[slot].set(prefix.top_k),
        state.top_p_B.at[slot].set(prefix.top_p),
    )


def extract_slot(state: DecodeState, slot, true_length, width: int) -> Prefix:
    """Slot `slot`'s first `width` cache positions as a Prefix (the next turn's existing_prefix),
    holding `true_length` tokens."""
    take = lambda buf: jax.lax.dynamic_slice_in_dim(buf[slot], 0, width, axis=1)
    zero = jnp.zeros((1,), jnp.int32)
    return Prefix(
        tuple(map(take, state.cache.k_L)),
        tuple(map(take, state.cache.v_L)),
        true_length,
        zero,
        zero.astype(jnp.float32),
        jnp.zeros((1, 2), jnp.uint32),
        jnp.float32(0),
        jnp.int32(0),
        jnp.float32(1),
    )


def decode_widths(max_cache: int, minimum: int = 64) -> tuple[int, ...]:
    """Cache widths generate compiles for: powers of two from `minimum`, then max_cache."""
    widths, w = [], minimum
    while w < max_cache:
        widths.append(w)
        w *= 2
    return (*widths, max_cache)


def generate_step(cfg, width, params, state: DecodeState):
    """One decode step for every slot: feed each slot's last token, sample the next one.

    Attention reads only the first `width` cache positions; the caller guarantees that every
    live slot's new token lands below `width` (free slots may read garbage: nobody uses it).
    """
    cache = state.cache
    s = cache.k_L[0].shape[2]
    # A full slot cannot take its last token into the cache: its output is marked invalid.
    valid_B = cache.lengths_B < s
    hidden_Bx1xE, cache = cached_hidden(params, cfg, state.tokens_B[:, None], cache, width=width)
    logits_BxV = logits_at(params, cfg, hidden_Bx1xE[:, 0])
    cache = cache._replace(lengths_B=jnp.minimum(cache.lengths_B + 1, s))
    tokens_B, logp_B = sample_tokens(
        logits_BxV,
        state.key_Bx2,
        state.generated_B,
        state.temperature_B,
        state.top_k_B,
        state.top_p_B,
    )
    tokens_B = jnp.where(valid_B, tokens_B, state.tokens_B)
    generated_B = state.generated_B + valid_B.astype(jnp.int32)
    new_state = state._replace(cache=cache, tokens_B=tokens_B, generated_B=generated_B)
    return new_state, pack_result(tokens_B, valid_B.astype(jnp.int32), generated_B, logp_B)
