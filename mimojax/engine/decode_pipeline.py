"""The Scheduler's decode steps: dispatch one, read one; pipelined, step t+1 goes out first.

`generate` returns device arrays without waiting (JAX's async dispatch), and the decode state
already holds every slot's next input token, so step t+1 can be queued before step t's tokens
reach the host. Pipelined, each `Scheduler.step` runs its hook, admits requests (inserting
into the state the step in flight will return), dispatches the next decode step and only then
fetches and processes the previous one: the host's bookkeeping overlaps the device's step.

What stays exactly as without pipelining (tests/engine/test_decode_pipeline.py):
- tokens and log-probs: a slot's tokens depend only on its own key, count and KV, so a step
  dispatched for a slot whose previous token turns out to end it is simply discarded; a slot
  certain to end at the step in flight (max_new_tokens, cache room) gets no further step, and
  nothing is dispatched when every live slot is.
- versions: a step decodes with the weights loaded when it is dispatched, which is after the
  call's `between_steps` hook, as without pipelining; nothing is dispatched across a hook, and
  each token records the version of the step that sampled it (`_InFlight.version`).
- retain_kv: the step dispatched ahead fed a finished slot its last token, so its KV is
  extracted with the sample's own cached length (`extract_prefix(state, slot, true_length)`).
- abort: the step in flight is read before an abort applies, so an aborted sample ends at the
  same token.
What differs: a slot freed by step t is refilled one call later (its step t+1 was already
out), so with more samples than slots the same samples are served in a different order of
calls, and a weight swap at a given call lands at other tokens of the refilled samples.
"""

from __future__ import annotations

import dataclasses
import time


@dataclasses.dataclass
class _InFlight:
    """A dispatched decode step whose tokens are not read yet."""

    result: object  # ResultTokens on device
    slots: dict  # slot -> the _Live it decodes for (ignored if that slot moved on since)
    version: int  # weights version it decodes with


class DecodeSteps:
    """Mixin for the Scheduler: `_decode(done)` issues decode steps and reads their tokens."""

    def _decode(self, done) -> None:
        prev, self._inflight = self._inflight, None
        step = self._dispatch(prev)
        if not self.pipeline:
            self._collect(step, done)
            return
        if prev is not None:
            self._collect(prev, done)
            self.stats["decode_ahead"] += step is not None
        # Nothing live any more: the step just dispatched only holds discarded rows.
        self._inflight = step if self._live else None

    def _flush(self, done) -> None:
        """Reads the step in flight now (before an abort, so samples end where unpipelined)."""
        prev, self._inflight = self._inflight, None
        if prev is not None:
            self._collect(prev, done)

    def _dispatch(self, prev: _InFlight | None) -> _InFlight | None:
        """One generate over every slot; None when no live sample needs another token."""
        t0 = time.perf_counter()
        slots, longest = {}, -1
        for slot, live in self._live.items():
            req = live.request
            ahead = prev is not None and prev.slots.get(slot) is live  # its token is in flight
            n = len(live.tokens) + ahead
            cached = req.prior_length + len(req.prompt_ids) + n - 1  # before this step
            if ahead and (
                n >= req.sampling.max_new_tokens or cached + 1 > self.engine.max_cache_length
            ):
                continue  # the step in flight gives its last token
            slots[slot] = live
            longest = max(longest, cached)
        if not slots:
            return None
        engine = self.engine
        version = engine.policy_version  # of the weights this step decodes with
        # Attention needs no cache position beyond the longest (rows left out may read garbage).
        self._state, result = engine.generate(engine.load_params(), self._state, max_length=longest)
        if self.pipeline:
            result.copy_to_host_async()
        self.stats["decode_s"] += time.perf_counter() - t0
        self.stats["decode_steps"] += 1
        return _InFlight(result, slots, version)

    def _collect(self, step: _InFlight | None, done) -> None:
        """Appends a step's tokens to the samples it decoded and retires those that end."""
        if step is None:
            return
        t0 = time.perf_counter()
        result = step.result.convert_to_numpy()
        self.stats["decode_s"] += time.perf_counter() - t0
        for slot, live in step.slots.items():
            if self._live.get(slot) is not live:  # ended (or aborted) at the step before
                self.stats["slot_steps_discarded"] += 1
                continue
            self.stats["slot_steps_used"] += 1
            row = result.get_result_at_slot(slot)
            if not row.valid[0, 0]:
                del self._live[slot]
                self._finish(live, "length", done, version=step.version)
                continue
            live.tokens.append(int(row.tokens[0, 0]))
            live.logprobs.append(float(row.log_prob[0, 0]))
            live.versions.append(step.version)
            reason = self._stop_reason(live)
            if reason:
                del self._live[slot]
                kv = None
                if live.request.retain_kv:  # before the slot is reused by the next insert
                    req = live.request
                    cached = req.prior_length + len(req.prompt_ids) + len(live.tokens) - 1
                    kv = self.engine.extract_prefix(self._state, slot, cached)
                self._finish(live, reason, done, kv=kv, version=step.version)
