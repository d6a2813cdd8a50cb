"""The data the engine hands out, in JetStream's Engine API layout.

`ResultTokens` packs tokens, validity and lengths of every slot into one [batch, 3 * samples]
int array so one device->host copy fetches a whole step (JetStream's reasoning); `log_prob`
rides beside it as float32. `Prefix` is a prefilled prompt waiting to be inserted into slots;
`DecodeState` is everything `generate` transforms.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from mimojax.engine.forward import LayerCaches


class EngineError(ValueError):
    """A request or setting the engine cannot serve; the message names the setting."""


def bucket_length(n: int, limit: int, minimum: int = 16) -> int:
    """The padded prompt length: the next power of two >= n (at least `minimum`), <= limit."""
    return min(limit, max(minimum, 1 << max(n - 1, 0).bit_length()))


@struct.dataclass
class SlotData:
    """One slot's share of a ResultTokens: tokens/valid [samples, 1], lengths [samples]."""

    tokens: jax.Array | np.ndarray
    valid: jax.Array | np.ndarray
    lengths: jax.Array | np.ndarray
    log_prob: jax.Array | np.ndarray | None = None


@struct.dataclass
class ResultTokens:
    """Tokens of one step for every slot; `lengths` counts tokens generated so far."""

    data: jax.Array | np.ndarray  # [batch * samples_per_slot, 3] int32
    tokens_idx: tuple[int, int] = struct.field(pytree_node=False)
    valid_idx: tuple[int, int] = struct.field(pytree_node=False)
    length_idx: tuple[int, int] = struct.field(pytree_node=False)
    samples_per_slot: int = struct.field(pytree_node=False)
    log_prob: jax.Array | np.ndarray | None = None  # [batch * samples_per_slot, 1] float32

    def copy_to_host_async(self) -> None:
        """Starts the device->host copy so a later convert_to_numpy does not wait."""
        for x in (self.data, self.log_prob):
            if isinstance(x, jax.Array):
                x.copy_to_host_async()

    def convert_to_numpy(self) -> ResultTokens:
        """The same result with host numpy arrays."""
        log_prob = None if self.log_prob is None else np.asarray(self.log_prob)
        return self.replace(data=np.asarray(self.data), log_prob=log_prob)

    def get_result_at_slot(self, slot: int) -> SlotData:
        """The rows of `slot` (one per sample)."""
        rows = slice(slot * self.samples_per_slot, (slot + 1) * self.samples_per_slot)
        cols = lambda idx: slice(idx[0], idx[1])
        return SlotData(
            tokens=self.data[rows, cols(self.tokens_idx)],
            valid=self.data[rows, cols(self.valid_idx)],
            lengths=self.data[rows, cols(self.length_idx)][:, 0],
            log_prob=None if self.log_prob is None else self.log_prob[rows],
        )


def pack_result(tokens_N, valid_N, lengths_N, logp_N, samples_per_slot: int = 1) -> ResultTokens:
    """ResultTokens from per-row tokens, validity, lengths and log-probs (inside jit)."""
    data = jnp.stack([tokens_N, valid_N, lengths_N], axis=1).astype(jnp.int32)
    return ResultTokens(data, (0, 1), (1, 2), (2, 3), samples_per_slot, logp_N[:, None])


class Prefix(NamedTuple):
    """A prefilled prompt: its KV, true length, and the first token of each of its samples."""

    k_L: tuple  # per layer, k_KxPxD
    v_L: tuple
    true_length: jax.Array  # int32 scalar
    first_token_N: jax.Array  # int32, one per sample
    first_logprob_N: jax.Array
    key_Nx2: jax.Array  # each sample's own PRNG key (raw uint32)
    temperature: jax.Array  # float32 scalar
    top_k: jax.Array  # int32 scalar
    top_p: jax.Array  # float32 scalar

    @property
    def num_samples(self) -> int:
        return int(self.first_token_N.shape[0])


class DecodeState(NamedTuple):
    """Per-slot state of the decode batch; `generate` donates and returns it."""

    cache: LayerCaches  # lengths_B = tokens already in the cache
    tokens_B: jax.Array  # the last sampled token, the next step's input
    generated_B: jax.Array  # tokens generated so far (the prefill token counts)
    key_Bx2: jax.Array  # each slot's sample key; token i uses fold_in(key, i)
    temperature_B: jax.Array
    top_k_B: jax.Array
    top_p_B: jax.Array
