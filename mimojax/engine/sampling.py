"""Sampling settings of a request and the per-slot sampler the engine runs inside jit."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import jax
import jax.numpy as jnp

from mimojax.models.logit_filters import process_logits


class SamplingError(ValueError):
    """A sampling setting that cannot work; the message names the field."""


@dataclasses.dataclass(frozen=True)
class SamplingParams:
    """How to sample one request. `temperature=0.0` is greedy; top_k 0 / top_p 1 are off.

    `stop_token_ids` end a completion in addition to the tokenizer's eos ids (unless
    `ignore_eos`); `stop_sequences` are token-id sequences that end it when they appear at the
    end of the output. The stopping token(s) stay in the output: they were sampled and their
    log-probs matter to the trainer.
    """

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int = 0
    max_new_tokens: int = 64
    stop_token_ids: Sequence[int] | None = None
    stop_sequences: Sequence[Sequence[int]] | None = None
    ignore_eos: bool = False

    def __post_init__(self):
        problems = []
        if not self.temperature >= 0.0:
            problems.append(f"temperature={self.temperature!r} must be >= 0 (0 is greedy)")
        if not 0.0 < self.top_p <= 1.0:
            problems.append(f"top_p={self.top_p!r} must be in (0, 1]")
        if not (isinstance(self.top_k, int) and self.top_k >= 0):
            problems.append(f"top_k={self.top_k!r} must be an int >= 0 (0 is off)")
        if not (isinstance(self.max_new_tokens, int) and self.max_new_tokens >= 1):
            problems.append(f"max_new_tokens={self.max_new_tokens!r} must be an int >= 1")
        if not isinstance(self.seed, int):
            problems.append(f"seed={self.seed!r} must be an int")
        for seq in self.stop_sequences or ():
            if len(seq) == 0:
                problems.append("stop_sequences holds an empty sequence")
        if problems:
            raise SamplingError("SamplingParams: " + "; ".join(problems))

    def stop_ids(self, eos_token_ids: Sequence[int]) -> frozenset[int]:
        """Single tokens that end a completion."""
        ids = set(self.stop_token_ids or ())
        if not self.ignore_eos:
            ids.update(eos_token_ids)
        return frozenset(int(i) for i in ids)


def sample_key(seed: int, *path: int) -> jax.Array:
    """The raw PRNG key of a request (and of its sample) from the seed and its indices."""
    key = jax.random.PRNGKey(seed)
    for i in path:
        key = jax.random.fold_in(key, i)
    return key


def sample_tokens(logits_BxV, key_Bx2, step_B, temperature_B, top_k_B, top_p_B):
    """(token_B, logprob_B): each row sampled with its own settings and key.

    Row b uses fold_in(key_b, step_b), so a request's tokens depend only on its own key and
    position, never on which slot or batch it ran in. The log-prob is taken under the
    processed distribution (see logit_filters); greedy rows take the argmax.
    """
    x_BxV = process_logits(logits_BxV, temperature_B, top_k_B, top_p_B)
    greedy_B = jnp.argmax(logits_BxV, axis=-1).astype(jnp.int32)

    def draw(_):
        keys = jax.vmap(jax.random.fold_in)(key_Bx2, step_B)
        sampled_B = jax.vmap(lambda k, row: jax.random.categorical(k, row))(keys, x_BxV)
        return jnp.where(temperature_B > 0, sampled_B, greedy_B).astype(jnp.int32)

    # An all-greedy batch (evaluation) skips drawing B x V Gumbel noise.
    token_B = jax.lax.cond(jnp.any(temperature_B > 0), draw, lambda _: greedy_B, None)
    # log softmax at the chosen token only (no second B x V array).
    chosen_B = jnp.take_along_axis(x_BxV, token_B[:, None], axis=-1)[:, 0]
    logprob_B = chosen_B - jax.nn.logsumexp(x_BxV, axis=-1)
    return token_B, logprob_B
