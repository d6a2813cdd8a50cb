"""Batched prefill: many prompts in one forward, then their samples scattered into slots.

One prompt per prefill runs its projections as [P, E] GEMMs (P ~ 64 tokens), which XLA:CPU
runs far below the machine's matmul rate, and pays a dispatch per prompt. Here B prompts,
right-padded to one length bucket P, run as one [B * P, E] forward. The N samples of those
prompts (a GRPO group is n samples of one row) are flattened: sample m draws its first token
from row `row_N[m]`'s logits with its own key and settings, so a request's tokens do not
depend on which other prompts shared its batch. Insertion scatters M samples into M slots in
one call (padding entries carry an out-of-range slot and are dropped).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from mimojax.engine.api import DecodeState, Prefix, pack_result
from mimojax.engine.forward import LayerCaches, cached_hidden, init_layer_caches, logits_at
from mimojax.engine.sampling import sample_tokens


class BatchPrefix(NamedTuple):
    """B prefilled prompts and the first token of each of their N samples (flattened)."""

    k_L: tuple  # per layer, k_BxKxPxD
    v_L: tuple
    lengths_B: jax.Array  # each row's true length
    row_N: jax.Array  # the row each sample belongs to
    first_token_N: jax.Array
    first_logprob_N: jax.Array
    key_Nx2: jax.Array
    temperature_N: jax.Array
    top_k_N: jax.Array
    top_p_N: jax.Array


def pack_prompts(prompts: Sequence[Sequence[int]], samplers, rng_keys, b: int, p: int):
    """(prefill_rows' array arguments, offsets): prompts right-padded to [b, p], samples flat.

    Prompt i's sample j is flat sample offsets[i] + j. Padding rows hold one token and are
    never inserted; padding samples are greedy (no noise drawn for them) and read row 0.
    """
    ids_BxP = np.zeros((b, p), np.int32)
    lengths_B = np.ones((b,), np.int32)
    for i, prompt in enumerate(prompts):
        ids_BxP[i, : len(prompt)] = prompt
        lengths_B[i] = len(prompt)
    counts = [len(k) for k in rng_keys]
    offsets = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(int).tolist()
    n = 1 << max(sum(counts) - 1, 0).bit_length()  # a power of two: few compiles
    row_N = np.zeros((n,), np.int32)
    key_Nx2 = np.zeros((n, 2), np.uint32)
    temperature_N = np.zeros((n,), np.float32)
    top_k_N = np.zeros((n,), np.int32)
    top_p_N = np.ones((n,), np.float32)
    for i, (sp, keys) in enumerate(zip(samplers, rng_keys)):
        span = slice(offsets[i], offsets[i] + len(keys))
        row_N[span] = i
        key_Nx2[span] = np.stack([np.asarray(k, np.uint32) for k in keys])
        temperature_N[span] = sp.temperature
        top_k_N[span] = sp.top_k
        top_p_N[span] = sp.top_p
    arrays = (ids_BxP, lengths_B, row_N, key_Nx2, temperature_N, top_k_N, top_p_N)
    return arrays, offsets


def prefill_rows(cfg, params, ids_BxP, lengths_B, row_N, key_Nx2, temperature_N, top_k_N, top_p_N):
    """(BatchPrefix, ResultTokens of the N first tokens) for B right-padded prompts."""
    b, p = ids_BxP.shape
    hidden_BxPxE, caches = cached_hidden(params, cfg, ids_BxP, init_layer_caches(cfg, b, p))
    last_BxE = hidden_BxPxE[jnp.arange(b), lengths_B - 1]
    logits_BxV = logits_at(params, cfg, last_BxE)
    n = row_N.shape[0]
    tokens_N, logp_N = sample_tokens(
        logits_BxV[row_N], key_Nx2, jnp.zeros((n,), jnp.int32), temperature_N, top_k_N, top_p_N
    )
    prefix = BatchPrefix(
        caches.k_L,
        caches.v_L,
        lengths_B,
        row_N,
        tokens_N,
        logp_N,
        key_Nx2,
        temperature_N,
        top_k_N,
        top_p_N,
    )
    ones = jnp.ones_like(tokens_N)
    return prefix, pack_result(tokens_N, ones, ones, logp_N, 1)


def insert_rows(prefix: BatchPrefix, state: DecodeState, slots_M, samples_M) -> DecodeState:
    """Sample samples_M[m] of `prefix` into slot slots_M[m]; out-of-range slots are skipped."""
    rows_M = prefix.row_N[samples_M]
    width = prefix.k_L[0].shape[2]
    cache = state.cache

    def put(buf_BxKxSxD, new_BxKxPxD):
        # Advanced index, then slices: the indexed view is [M, K, P, D].
        new_MxKxPxD = new_BxKxPxD[rows_M].astype(buf_BxKxSxD.dtype)
        return buf_BxKxSxD.at[slots_M, :, :width].set(new_MxKxPxD, mode="drop")

    def set_rows(x_B, v_M):
        return x_B.at[slots_M].set(v_M.astype(x_B.dtype), mode="drop")

    return DecodeState(
        LayerCaches(
            tuple(map(put, cache.k_L, prefix.k_L)),
            tuple(map(put, cache.v_L, prefix.v_L)),
            set_rows(cache.lengths_B, prefix.lengths_B[rows_M]),
        ),
        set_rows(state.tokens_B, prefix.first_token_N[samples_M]),
        set_rows(state.generated_B, jnp.ones_like(samples_M)),
        set_rows(state.key_Bx2, prefix.key_Nx2[samples_M]),
        set_rows(state.temperature_B, prefix.temperature_N[samples_M]),
        set_rows(state.top_k_B, prefix.top_k_N[samples_M]),
        set_rows(state.top_p_B, prefix.top_p_N[samples_M]),
    )


def row_prefix(prefix: BatchPrefix, row, samples_n) -> Prefix:
    """Row `row` of a BatchPrefix as a one-prompt Prefix whose samples are `samples_n`."""
    take = lambda x: x[row]
    return Prefix(
        tuple(map(take, prefix.k_L)),
        tuple(map(take, prefix.v_L)),
        prefix.lengths_B[row],
        prefix.first_token_N[samples_n],
        prefix.first_logprob_N[samples_n],
        prefix.key_Nx2[samples_n],
        prefix.temperature_N[samples_n[0]],
        prefix.top_k_N[samples_n[0]],
        prefix.top_p_N[samples_n[0]],
    )
