"""A plain batched sampling loop over the KV cache (the engine issue builds the real engine)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from mimojax.models.kv_cache import advance, init_cache


def _bucket(n: int, minimum: int = 16) -> int:
    # Powers of two so prompts of similar length share one compiled prefill.
    return max(minimum, 1 << (n - 1).bit_length())


def _sample(logits_BxV, key, temperature: float):
    if temperature == 0.0:
        return jnp.argmax(logits_BxV, axis=-1)
    return jax.random.categorical(key, logits_BxV / temperature, axis=-1)


@partial(jax.jit, static_argnames=("graphdef", "temperature"), donate_argnames=("cache",))
def _prefill(graphdef, state, ids_BxP, lengths_B, cache, key, temperature):
    model = nnx.merge(graphdef, state)
    logits_BxPxV, cache = model(ids_BxP, cache=cache)
    cache = advance(cache, lengths_B)
    last_BxV = jnp.take_along_axis(logits_BxPxV, (lengths_B - 1)[:, None, None], axis=1)[:, 0]
    return _sample(last_BxV, key, temperature), cache


@partial(jax.jit, static_argnames=("graphdef", "temperature"), donate_argnames=("cache",))
def _decode(graphdef, state, tokens_B, cache, key, temperature):
    model = nnx.merge(graphdef, state)
    logits_Bx1xV, cache = model(tokens_B[:, None], cache=cache)
    cache = advance(cache, jnp.ones_like(tokens_B))
    return _sample(logits_Bx1xV[:, 0], key, temperature), cache


def generate_tokens(
    model,
    prompt_ids: Sequence[Sequence[int]],
    max_new_tokens: int = 64,
    temperature: float = 0.0,
    seed: int = 0,
    eos_token_ids: Sequence[int] = (),
) -> list[list[int]]:
    """New token ids for each prompt (greedy when temperature is 0), stopping at an eos id."""
    graphdef, state = nnx.split(model)
    b = len(prompt_ids)
    lengths = [len(p) for p in prompt_ids]
    if min(lengths) == 0:
        raise ValueError("generate_tokens: empty prompt")
    p = _bucket(max(lengths))
    ids_BxP = np.zeros((b, p), np.int32)
    for i, ids in enumerate(prompt_ids):
        ids_BxP[i, : len(ids)] = ids
    cache = init_cache(model.config, b, _bucket(p + max_new_tokens))
    key = jax.random.PRNGKey(seed)
    key, sub = jax.random.split(key)
    tokens_B, cache = _prefill(
        graphdef,
        state,
        jnp.asarray(ids_BxP),
        jnp.asarray(lengths, jnp.int32),
        cache,
        sub,
        temperature,
    )
    eos = set(int(e) for e in eos_token_ids)
    out: list[list[int]] = [[] for _ in range(b)]
    done = [False] * b
    for step in range(max_new_tokens):
        host_tokens = np.asarray(tokens_B)
        for i in range(b):
            if not done[i]:
                out[i].append(int(host_tokens[i]))
                done[i] = int(host_tokens[i]) in eos
        if all(done) or step == max_new_tokens - 1:
            break
        key, sub = jax.random.split(key)
        tokens_B, cache = _decode(graphdef, state, tokens_B, cache, sub, temperature)
    return out
