"""JaxEngine's batched prefill (beyond JetStream's one-prompt API): many prompts prefilled in
one call per length bucket, their samples inserted into slots in one call. The jitted kernels
live in batch_prefill.py; this mixin checks requests and pads them for those kernels.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax.numpy as jnp
import numpy as np

from mimojax.engine.api import DecodeState, EngineError, Prefix, bucket_length
from mimojax.engine.batch_prefill import BatchPrefix, pack_prompts
from mimojax.engine.sampling import SamplingParams


class BatchPrefillMixin:
    """Methods of JaxEngine; they use its settings (_max_prefill, _min_bucket, _slots,
    _max_batch_tokens) and jits (_prefill_batch_jit, _insert_batch_jit, _row_prefix_jit)."""

    def prefill_batch(
        self,
        *,
        params,
        prompts: Sequence[Sequence[int]],
        samplers: Sequence[SamplingParams],
        rng_keys: Sequence[Sequence],
    ) -> tuple[BatchPrefix, list[int]]:
        """Prefills several prompts in one call: (BatchPrefix, offsets).

        Prompt i has len(rng_keys[i]) samples; its sample j is flat sample offsets[i] + j of
        the BatchPrefix. Prompts are right-padded to the bucket of the longest, the batch to a
        power of two (one compile per batch x length bucket); group prompts by
        `bucket_length` to waste no padding. Sample j draws from rng_keys[i][j], as
        prefill_multisampling does, so its tokens equal a one-prompt prefill's.
        """
        if not prompts or not len(prompts) == len(samplers) == len(rng_keys):
            raise EngineError(
                f"prefill_batch: {len(prompts)} prompts, {len(samplers)} samplers and "
                f"{len(rng_keys)} key lists (want equal, >= 1)"
            )
        lengths = [len(p) for p in prompts]
        if min(lengths) < 1 or max(lengths) > self._max_prefill:
            raise EngineError(
                f"prefill_batch: prompt lengths {min(lengths)}..{max(lengths)} outside "
                f"[1, max_prefill_length={self._max_prefill}]"
            )
        p = bucket_length(max(lengths), self._max_prefill, self._min_bucket)
        b = bucket_length(len(prompts), 1 << 30, 1)
        if b * p > self._max_batch_tokens and len(prompts) > 1:
            raise EngineError(
                f"prefill_batch: {b} x {p} padded tokens exceed "
                f"max_prefill_batch_tokens={self._max_batch_tokens}"
            )
        arrays, offsets = pack_prompts(prompts, samplers, rng_keys, b, p)
        prefix, _ = self._prefill_batch_jit(params, *arrays)
        return prefix, offsets

    def insert_batch(
        self,
        prefix: BatchPrefix,
        decode_state: DecodeState,
        slots: Sequence[int],
        samples: Sequence[int],
    ) -> DecodeState:
        """Flat sample samples[m] of a BatchPrefix into slots[m], all in one call."""
        if len(slots) != len(samples) or len(slots) > self._slots:
            raise EngineError(
                f"insert_batch: {len(slots)} slots for {len(samples)} samples "
                f"(max_concurrent_decodes={self._slots})"
            )
        for slot in slots:
            self._check_slot(slot)
        slots_M = np.full((self._slots,), self._slots, np.int32)  # out of range: dropped
        samples_M = np.zeros((self._slots,), np.int32)
        slots_M[: len(slots)] = slots
        samples_M[: len(samples)] = samples
        return self._insert_batch_jit(prefix, decode_state, slots_M, samples_M)

    def prefix_of_row(self, prefix: BatchPrefix, row: int, samples: Sequence[int]) -> Prefix:
        """Row `row` of a BatchPrefix as a Prefix (its flat samples `samples`), e.g. to retain."""
        return self._row_prefix_jit(prefix, jnp.int32(row), np.asarray(samples, np.int32))

    def prefill_bucket(self, length: int) -> int:
        """The padded length a prompt of `length` tokens is prefilled at."""
        return bucket_length(length, self._max_prefill, self._min_bucket)

    def max_prefill_batch(self, length: int) -> int:
        """How many prompts of padded length `length` one prefill_batch call may hold."""
        cap = max(1, self._max_batch_tokens // max(int(length), 1))
        return 1 << (cap.bit_length() - 1)  # the batch pads to a power of two
