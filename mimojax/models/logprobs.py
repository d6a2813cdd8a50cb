"""Per-token log-probabilities and entropy, chunked over time so [B, T, V] never exists in f32."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from mimojax.models.logit_filters import processed_log_softmax


def logprobs_from_hidden(
    hidden_BxTxE,
    lm_head_ExV,
    targets_BxT,
    temperature=1.0,
    chunk=128,
    top_k=0,
    top_p=1.0,
    sum_pi_squared=False,
):
    """log p(targets) and entropy [B, T] from hidden states, `chunk` time steps at a time.

    With `sum_pi_squared` (static) a third [B, T] array is returned: sum over the vocabulary of
    the squared probabilities, the per-token statistic the optimal-token-baseline estimators use.

    With top_k / top_p, both are taken over the filtered distribution the engine sampled from
    (mimojax.models.logit_filters), so they match the engine's returned log-probs.

    Each chunk's logits are recomputed in the backward pass (jax.checkpoint), so peak memory is
    one [B, chunk, V] float32 block in both directions.
    """
    b, t, e = hidden_BxTxE.shape
    chunk = max(1, min(chunk, t))
    n_chunks = -(-t // chunk)
    pad = n_chunks * chunk - t
    hidden_BxTxE = jnp.pad(hidden_BxTxE, ((0, 0), (0, pad), (0, 0)))
    targets_BxT = jnp.pad(targets_BxT, ((0, 0), (0, pad)))
    hidden_NxBxCxE = hidden_BxTxE.reshape(b, n_chunks, chunk, e).swapaxes(0, 1)
    targets_NxBxC = targets_BxT.reshape(b, n_chunks, chunk).swapaxes(0, 1)

    @jax.checkpoint
    def one_chunk(h_BxCxE, y_BxC):
        logits_BxCxV = jax.lax.dot(
            h_BxCxE.reshape(-1, e), lm_head_ExV, preferred_element_type=jnp.float32
        ).reshape(b, h_BxCxE.shape[1], -1)
        if top_k == 0 and top_p >= 1.0:
            logp_BxCxV = jax.nn.log_softmax(logits_BxCxV / temperature, axis=-1)
        else:
            v = logits_BxCxV.shape[-1]
            logp_BxCxV = processed_log_softmax(
                logits_BxCxV.reshape(-1, v), temperature, top_k, top_p
            ).reshape(logits_BxCxV.shape)
        logp_BxC = jnp.take_along_axis(logp_BxCxV, y_BxC[..., None], axis=-1)[..., 0]
        # Filtered tokens have p = 0 and log p = -inf; they add nothing to the entropy.
        plogp_BxCxV = jnp.where(logp_BxCxV > -jnp.inf, jnp.exp(logp_BxCxV) * logp_BxCxV, 0.0)
        entropy_BxC = -jnp.sum(plogp_BxCxV, axis=-1)
        if not sum_pi_squared:
            return logp_BxC, entropy_BxC
        return logp_BxC, entropy_BxC, jnp.sum(jnp.exp(2.0 * logp_BxCxV), axis=-1)

    outs_NxBxC = jax.lax.map(lambda xs: one_chunk(*xs), (hidden_NxBxCxE, targets_NxBxC))
    return tuple(o.swapaxes(0, 1).reshape(b, -1)[:, :t] for o in outs_NxBxC)


def token_logprobs(
    model,
    input_ids_BxT,
    attention_mask=None,
    temperature=1.0,
    chunk=128,
    top_k=0,
    top_p=1.0,
    start=1,
    sum_pi_squared=False,
):
    """logp[b, t] = log p(input_ids[b, t] | input_ids[b, :t]) and the entropy of that
    distribution; columns before `start` (at least column 0, which has no context) are 0.
    Aligned with the ids so `response_mask_BxT` applies directly.

    `start` (static) skips the LM head on the prompt: with prompts left-padded into the first
    `start` columns, only response positions pay for the [*, V] projection. With
    `sum_pi_squared` (static), a third array holds sum_v p(v)^2 per position."""
    start = max(int(start), 1)
    hidden_BxTxE = model.hidden_states(input_ids_BxT, attention_mask)
    outs_BxR = logprobs_from_hidden(
        hidden_BxTxE[:, start - 1 : -1],
        model.lm_head_weight(),
        input_ids_BxT[:, start:],
        temperature,
        chunk,
        top_k,
        top_p,
        sum_pi_squared,
    )
    zeros_BxS = jnp.zeros_like(outs_BxR[0][:, :1]).repeat(start, axis=1)
    return tuple(jnp.concatenate([zeros_BxS, o_BxR], axis=1) for o_BxR in outs_BxR)
