"""Continuous batching over a JaxEngine: requests queue, slots refill as soon as one finishes.

One `step()` inserts waiting samples into free slots (one prefill per request feeds all of its
samples; fresh requests that all fit the free slots are prefilled together, one call per
prompt-length bucket, and inserted in one call), runs one `generate` for every slot over the
used part of the cache, and retires samples that hit a stop id, a stop sequence,
max_new_tokens or the cache length. `submit` and `abort` only enqueue, so they are
safe to call from another thread while a step runs (the async client relies on that).

Partial rollouts: `between_steps(fn)` makes every scheduler step run `fn()` first, in the
context that set it (asyncio tasks and `to_thread` copy it). The async producer swaps in newly
published weights there, so in-flight samples continue under them; each token records the
weights version that sampled it (`Completion.token_versions`).

Pipelined decoding (default: the engine's `pipeline_decode`): each step dispatches the next
decode step before reading the previous one's tokens, so the host's bookkeeping overlaps the
device; same tokens, log-probs, versions and KV (decode_pipeline.py says what holds and why).
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import dataclasses
import queue
import time
from collections.abc import Callable, Sequence

import numpy as np

from mimojax.engine.decode_pipeline import DecodeSteps
from mimojax.engine.engine import EngineError, JaxEngine
from mimojax.engine.sampling import SamplingParams, sample_key

PROMPT_OVERFLOW = ("error", "truncate_left")
_STEP_HOOK: contextvars.ContextVar[Callable[[], None] | None] = contextvars.ContextVar(
    "mimojax_scheduler_step_hook", default=None
)


@contextlib.contextmanager
def between_steps(fn: Callable[[], None]):
    """Within this context, every `Scheduler.step` first runs `fn()` (e.g. a weight swap)."""
    token = _STEP_HOOK.set(fn)
    try:
        yield
    finally:
        _STEP_HOOK.reset(token)


@dataclasses.dataclass
class Completion:
    """One sampled continuation: exact token ids, their processed log-probs and provenance."""

    token_ids: list[int]
    logprobs: list[float]
    finish_reason: str  # "stop" (stop id / sequence), "length" (max_new_tokens / cache), "abort"
    policy_version: int  # engine weights version when its first token was sampled
    policy_version_last: int  # ... and when its last token was (differs if weights changed)
    prompt_length: int
    prompt_truncated: int = 0  # prompt tokens dropped by prompt_overflow="truncate_left"
    queue_s: float = 0.0  # submit -> prefill start
    ttft_s: float = 0.0  # submit -> first token
    latency_s: float = 0.0  # submit -> finished
    # With retain_kv: the KV of prompt + tokens[:-1] (the last sampled token is never fed), a
    # Prefix the next turn passes as existing_prefix so it prefills only its new tokens.
    kv: object = None
    cached_length: int = 0  # tokens in `kv` (0 without it)
    token_versions: list[int] = dataclasses.field(default_factory=list)  # per token_ids entry


@dataclasses.dataclass
class _Request:
    request_id: object
    prompt_ids: list[int]
    sampling: SamplingParams
    keys: list
    stop_ids: frozenset[int]
    truncated: int
    submitted: float
    on_done: Callable | None
    existing_prefix: object = None  # KV of an earlier turn this prompt continues
    prior_length: int = 0  # tokens in existing_prefix
    retain_kv: bool = False
    outputs: list = dataclasses.field(default_factory=list)
    prefix: object = None
    batch: tuple | None = None  # (BatchPrefix, row, first flat sample) when batch-prefilled
    first: tuple | None = None
    next_sample: int = 0
    remaining: int = 0
    aborted: bool = False
    t_prefill: float = 0.0
    t_first: float = 0.0
    first_version: int = 0  # weights version of the prefill that sampled the first tokens


@dataclasses.dataclass
class _Live:
    request: _Request
    sample: int
    tokens: list[int]
    logprobs: list[float]
    version: int
    versions: list[int] = dataclasses.field(default_factory=list)  # per token


class Scheduler(DecodeSteps):
    """Slot bookkeeping and stopping rules around an engine's prefill/insert/generate.

    `pipeline` (None: `engine.pipeline_decode`) dispatches decode step t+1 before reading
    step t's tokens; False reads each step's tokens before the next is dispatched.
    """

    def __init__(
        self, engine: JaxEngine, prompt_overflow: str = "error", pipeline: bool | None = None
    ):
        if prompt_overflow not in PROMPT_OVERFLOW:
            raise EngineError(f"prompt_overflow={prompt_overflow!r}; choose from {PROMPT_OVERFLOW}")
        self.engine = engine
        self.prompt_overflow = prompt_overflow
        self._inbox: queue.SimpleQueue = queue.SimpleQueue()
        self._pending: collections.deque[_Request] = collections.deque()
        self._by_id: dict[object, _Request] = {}
        self._live: dict[int, _Live] = {}
        self._state = engine.init_decode_state()
        self.pipeline = getattr(engine, "pipeline_decode", True) if pipeline is None else pipeline
        self._inflight = None  # the decode step dispatched and not read yet (pipelined)
        self._unfinished = 0
        self.stats = collections.Counter()

    # ------------------------------------------------------------ thread-safe entry points
    def submit(
        self,
        request_id,
        prompt_ids: Sequence[int],
        sampling: SamplingParams,
        n: int = 1,
        keys: Sequence | None = None,
        on_done: Callable | None = None,
        *,
        existing_prefix=None,
        retain_kv: bool = False,
    ) -> _Request:
        """Queues `n` samples of one prompt; `on_done(request)` runs when all have finished.

        `existing_prefix` (a Completion's `kv`) continues an earlier turn: `prompt_ids` are then
        only the new tokens. `retain_kv` hands each sample's KV back on its Completion.
        """
        prompt = [int(t) for t in prompt_ids]
        if not prompt:
            raise EngineError(f"request {request_id!r}: empty prompt")
        if n < 1:
            raise EngineError(f"request {request_id!r}: n={n} must be >= 1")
        limit = self.engine.max_prefill_length
        truncated = 0
        prior = 0 if existing_prefix is None else int(existing_prefix.true_length)
        if existing_prefix is not None and not self.engine.fits_continuation(prior, len(prompt)):
            raise EngineError(
                f"request {request_id!r}: {len(prompt)} new tokens do not fit behind "
                f"{prior} cached ones (max_prefill_length={limit}, "
                f"max_cache_length={self.engine.max_cache_length})"
            )
        if len(prompt) > limit:
            if self.prompt_overflow == "error":
                raise EngineError(
                    f"request {request_id!r}: prompt of {len(prompt)} tokens exceeds "
                    f"max_prefill_length={limit} (or set prompt_overflow='truncate_left')"
                )
            truncated = len(prompt) - limit
            prompt = prompt[-limit:]
        keys = list(keys) if keys is not None else [sample_key(sampling.seed, j) for j in range(n)]
        req = _Request(
            request_id,
            prompt,
            sampling,
            keys,
            sampling.stop_ids(self.engine.eos_token_ids),
            truncated,
            time.perf_counter(),
            on_done,
            existing_prefix=existing_prefix,
            prior_length=prior,
            retain_kv=retain_kv,
            outputs=[None] * n,
            remaining=n,
        )
        self._inbox.put(("submit", req))
        return req

    def abort(self, request_id) -> None:
        """Ends a request's samples at the next step with finish_reason "abort"."""
        self._inbox.put(("abort", request_id))

    # ------------------------------------------------------------ the loop (one thread)
    @property
    def busy(self) -> bool:
        return bool(self._pending or self._live or not self._inbox.empty())

    def step(self) -> list[_Request]:
        """One scheduling round and one decode step; returns the requests that finished."""
        hook = _STEP_HOOK.get()
        if hook is not None:
            hook()
        done: list[_Request] = []
        self._drain_inbox(done)
        self._fill_slots(done)
        if self._live:
            self._decode(done)
        else:
            self._inflight = None
        return done

    def _drain_inbox(self, done):
        while not self._inbox.empty():
            kind, item = self._inbox.get()
            if kind == "submit":
                self._pending.append(item)
                self._by_id[item.request_id] = item
                self.stats["requests"] += 1
                self.stats["prompt_truncated"] += bool(item.truncated)
                continue
            req = self._by_id.get(item)
            if req is None or req.aborted:
                continue
            self._flush(done)  # its tokens in flight first: it ends where it would unpipelined
            req.aborted = True
            for slot, live in list(self._live.items()):
                if live.request is req:
                    del self._live[slot]
                    self._finish(live, "abort", done)
            while req.next_sample < len(req.outputs):
                self._finish(self._new_live(req, req.next_sample, []), "abort", done)
                req.next_sample += 1

    def _new_live(self, req, j, tokens, logprobs=None):
        version = req.first_version if tokens else self.engine.policy_version
        return _Live(req, j, tokens, logprobs or [], version, [version] * len(tokens))

    def _fill_slots(self, done):
        free = [s for s in range(self.engine.max_concurrent_decodes) if s not in self._live]
        self._prefill_together(len(free))
        batched: dict[int, tuple] = {}  # id(BatchPrefix) -> (prefix, slots, flat samples)
        while free and self._pending:
            req = self._pending[0]
            if req.aborted or req.next_sample >= len(req.outputs):
                self._pending.popleft()
                continue
            if req.prefix is None and req.batch is None:
                self._prefill(req)
            while free and req.next_sample < len(req.outputs):
                j = req.next_sample
                req.next_sample += 1
                live = self._new_live(req, j, [int(req.first[0][j])], [float(req.first[1][j])])
                reason = self._stop_reason(live)
                if reason:
                    self._finish(live, reason, done, kv=self._prefix_kv(req))
                    continue
                slot = free.pop(0)
                if req.batch is not None:
                    bp, _, offset = req.batch
                    entry = batched.setdefault(id(bp), (bp, [], []))
                    entry[1].append(slot)
                    entry[2].append(offset + j)
                else:
                    self._state = self.engine.insert(req.prefix, self._state, slot, sample=j)
                self._live[slot] = live
            if req.next_sample >= len(req.outputs):
                self._pending.popleft()
                req.prefix = req.batch = None  # its KV now lives in the slots
        for bp, slots, samples in batched.values():
            self._state = self.engine.insert_batch(bp, self._state, slots, samples)

    def _prefix_kv(self, req: _Request):
        """The request's prompt KV as a Prefix, for retain_kv when a first token stops."""
        if not req.retain_kv:
            return None
        if req.batch is None:
            return req.prefix
        bp, row, offset = req.batch
        return self.engine.prefix_of_row(bp, row, range(offset, offset + len(req.outputs)))

    def _prefill_together(self, free: int):
        """Prefills, in few calls, the fresh requests at the queue's head whose samples fit.

        FIFO holds: requests already prefilled take their slots first, and the run of fresh
        requests stops at the first that would not fit (or that continues an earlier turn;
        those take the one-prompt path). A lone request takes the one-prompt path too.
        """
        group = []
        for req in self._pending:
            if req.aborted:
                continue
            left = len(req.outputs) - req.next_sample
            if req.prefix is not None or req.batch is not None:
                free -= left
                continue
            if req.existing_prefix is not None or left > free:
                break
            group.append(req)
            free -= left
        if len(group) < 2:
            return
        by_bucket: dict[int, list[_Request]] = collections.defaultdict(list)
        for req in group:
            by_bucket[self.engine.prefill_bucket(len(req.prompt_ids))].append(req)
        for bucket, reqs in sorted(by_bucket.items()):
            cap = self.engine.max_prefill_batch(bucket)
            for i in range(0, len(reqs), cap):
                self._prefill_batch(reqs[i : i + cap])

    def _prefill_batch(self, reqs: list[_Request]):
        engine = self.engine
        t0 = time.perf_counter()
        bp, offsets = engine.prefill_batch(
            params=engine.load_params(),
            prompts=[r.prompt_ids for r in reqs],
            samplers=[r.sampling for r in reqs],
            rng_keys=[r.keys for r in reqs],
        )
        first_N = np.asarray(bp.first_token_N)
        logp_N = np.asarray(bp.first_logprob_N)
        t1 = time.perf_counter()
        for row, (req, offset) in enumerate(zip(reqs, offsets)):
            span = slice(offset, offset + len(req.outputs))
            req.batch, req.first = (bp, row, offset), (first_N[span], logp_N[span])
            req.t_prefill, req.t_first = t0, t1
            req.first_version = engine.policy_version
            self.stats["prompt_tokens"] += len(req.prompt_ids)
        self.stats["prefill_s"] += t1 - t0
        self.stats["prefills"] += len(reqs)
        self.stats["prefill_batches"] += 1

    def _prefill(self, req: _Request):
        engine = self.engine
        req.t_prefill = time.perf_counter()
        prefix, first = engine.prefill_multisampling(
            params=engine.load_params(),
            existing_prefix=req.existing_prefix,
            padded_tokens=np.asarray(req.prompt_ids, np.int32),
            true_length=len(req.prompt_ids),
            sampler=req.sampling,
            num_samples=len(req.outputs),
            rng_keys=req.keys,
        )
        req.prefix, req.existing_prefix = prefix, None  # the new prefix holds the old KV
        req.first = (np.asarray(prefix.first_token_N), np.asarray(prefix.first_logprob_N))
        req.t_first = time.perf_counter()
        req.first_version = engine.policy_version
        self.stats["prefill_s"] += req.t_first - req.t_prefill
        self.stats["prefills"] += 1
        self.stats["prompt_tokens"] += len(req.prompt_ids)

    def _stop_reason(self, live: _Live) -> str | None:
        req, tokens = live.request, live.tokens
        if tokens[-1] in req.stop_ids:
            return "stop"
        for seq in req.sampling.stop_sequences or ():
            if len(tokens) >= len(seq) and tokens[-len(seq) :] == list(seq):
                return "stop"
        if len(tokens) >= req.sampling.max_new_tokens:
            return "length"
        # The next step must write the last token into the cache: is there room?
        if req.prior_length + len(req.prompt_ids) + len(tokens) > self.engine.max_cache_length:
            return "length"
        return None

    def _finish(self, live: _Live, reason: str, done: list, kv=None, version=None):
        """Records a sample's Completion; `version`: of the decode step that ended it."""
        req = live.request
        now = time.perf_counter()
        # The cache holds the prompt and every sampled token but the last (never fed back).
        cached = req.prior_length + len(req.prompt_ids) + max(len(live.tokens) - 1, 0)
        req.outputs[live.sample] = Completion(
            token_ids=live.tokens,
            logprobs=live.logprobs,
            finish_reason=reason,
            policy_version=live.version,
            policy_version_last=self.engine.policy_version if version is None else version,
            prompt_length=len(req.prompt_ids),
            prompt_truncated=req.truncated,
            queue_s=(req.t_prefill or now) - req.submitted,
            ttft_s=(req.t_first or now) - req.submitted,
            latency_s=now - req.submitted,
            kv=kv,
            cached_length=cached if kv is not None else 0,
            token_versions=live.versions,
        )
        self.stats["completion_tokens"] += len(live.tokens)
        self.stats[f"finish_{reason}"] += 1
        req.remaining -= 1
        if req.remaining == 0:
            self._by_id.pop(req.request_id, None)
            done.append(req)
            if req.on_done is not None:
                req.on_done(req)
