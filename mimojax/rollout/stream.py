"""Streaming async rollouts (`trainer.flow = "stream"`): finished work flows to the trainer one
unit at a time instead of one step's batch of groups.

The producer thread keeps one continuous-batching scheduler busy: it draws data batches (the
same prompts, request ids and sampling keys as batch flow), submits every sample as its own
request and, as each finishes, grades it and hands on a *unit*:

- a value-based estimator (gae + critic: `needs_groups` False) trains on single trajectories:
  each is a unit, and a step takes the first `batch_size * n` to finish, whatever their group;
- a group estimator (grpo, rloo) needs whole groups: a group is a unit once its last member is
  done, and a step takes the first `batch_size` groups.

`queue/group_wait_s` is the mean over a step's units of the last member's finish minus the
first's: how long finished trajectories waited for their group. It is 0 by construction for
trajectory units and grows with the length tail for groups; the price of trajectory flow shows
in `async/long_share/*` (short responses finish, and train, first).

Staleness: a unit's version is its oldest token's. A unit more than `max_off_policy_steps`
versions behind the trainer is dropped at consumption (`async/dropped_stale`, units), whatever
the policy, since units train in finish order, not draw order. `wait` also keeps the producer
at most K + 1 batches' worth of samples ahead of what the trainer consumed or dropped. Weights
reach the engine between scheduler steps: at once with `partial` (in-flight samples continue
under them), otherwise once the samples in flight are done (no new prompts start meanwhile).

Checkpoints: the first data batch with a sample neither consumed nor dropped, the data position
before it, and which samples of it and later batches are done (`Produced.done`); a resume
regenerates only the others. Single-turn rows only (multi-turn loops run as batches).
"""

from __future__ import annotations

import collections
import copy
import dataclasses
import threading
import time
from collections.abc import Callable
from typing import Any

from mimojax.engine.sampling import sample_key
from mimojax.engine.scheduler import Scheduler
from mimojax.rollout.async_buffer import AsyncRollouts, Produced
from mimojax.rollout.dynamic_sampling import SampledStep
from mimojax.rollout.trajectory import Trajectory


@dataclasses.dataclass
class _Unit:
    """What the trainer takes: one trajectory, or one whole group."""

    key: tuple[int, int]  # (data batch index, group in it)
    example: dict
    trajs: list
    results: list
    finished_at: list[float]  # perf_counter when each member finished
    ready_at: float

    @property
    def version(self) -> int:
        return min(t.policy_version for t in self.trajs)


class StreamRollouts:
    """Producer thread + unit buffer; the trainer-side API of `AsyncRollouts`."""

    def __init__(
        self,
        *,
        engine,
        tokenizer,
        sampling,
        apply_weights: Callable[[Any, int], None],
        params: Any,
        score: Callable[[list], list],
        data_iter,
        batch_size: int,
        n: int,
        by_group: bool,
        start_index: int,
        version: int,
        max_off_policy_steps: int,
        policy: str = "wait",
        sync_every: int = 1,
        partial: bool = False,
        prompt_overflow: str = "error",
        done: dict | None = None,
        sampling_for: Callable[[dict, int], Any] | None = None,
    ):
        self._engine, self._tok, self._sampling = engine, tokenizer, sampling
        self._apply, self._score, self._data = apply_weights, score, data_iter
        self.batch_size, self.n, self.by_group = batch_size, n, by_group
        self.max_off_policy_steps, self.policy = max_off_policy_steps, policy
        self.sync_every, self.partial, self.exact = sync_every, partial, False
        self._overflow = prompt_overflow
        self._sampling_for = sampling_for or (lambda example, sample: sampling)
        self.per_step = batch_size * n  # samples per step
        self.next_index = start_index  # the next data batch to draw
        self.version = self.trainer_version = version
        self._weights = {version: params}
        self._loaded = (params, version)  # what the producer's engine holds
        self._engine_version = version
        # done (consumed or dropped) samples per data batch from `first_open` on
        self._done: dict[int, set] = {
            int(i): {tuple(x) for x in v} for i, v in (done or {}).items()
        }
        self.first_open = start_index
        self._state_before = {start_index: copy.deepcopy(data_iter.get_state())}
        self._buffer: collections.deque[_Unit] = collections.deque()
        self._cond = threading.Condition()
        self.engine_lock = threading.Lock()
        self._closed, self._error = False, None
        self._in_flight = 0
        self._timing = collections.Counter()
        self._finished_lengths: list[int] = []
        self.dropped_units, self.producer_wait_s, self.partial_swaps = 0, 0.0, 0
        self._done_samples = 0  # consumed + dropped since start (the `wait` gate)
        self._thread = threading.Thread(target=self._run, name="mimojax-stream", daemon=True)
        self._thread.start()

    # ---------------------------------------------------------------- producer thread
    def _may_draw(self, drawn: int) -> bool:
        if self._in_flight >= self.per_step:  # one step's worth in flight keeps slots full
            return False
        if not self.partial and self.version != self._loaded[1]:
            return False  # let the samples in flight finish, then load the new weights
        buffered = sum(len(u.trajs) for u in self._buffer)
        if buffered + self._in_flight >= (self.max_off_policy_steps + 1) * self.per_step:
            return False
        if self.policy == "wait":
            return (
                drawn * self.per_step
                < self._done_samples + (self.max_off_policy_steps + 1) * self.per_step
            )
        return True

    def _run(self) -> None:
        try:
            sched = Scheduler(self._engine, self._overflow)
            live: dict[tuple, Any] = {}  # (index, group, sample) -> (request, example)
            groups: dict[tuple, list] = {}  # (index, group) -> members still to finish
            partial_groups: dict[tuple, list] = collections.defaultdict(list)
            drawn = 0
            while True:
                t0 = time.perf_counter()
                with self._cond:
                    self._cond.wait_for(
                        lambda d=drawn: self._closed or sched.busy or self._may_draw(d)
                        or (self.version > self._loaded[1] and not live)
                    )  # fmt: skip
                    if self._closed:
                        return
                    self.producer_wait_s += time.perf_counter() - t0
                    draw = self._may_draw(drawn)
                    newest = self.version, self._weights.get(self.version)
                if draw:
                    self._draw(sched, live, groups)
                    drawn += 1
                with self.engine_lock:
                    self._load(newest, busy=bool(live))
                    if not sched.busy:
                        continue
                    t0 = time.perf_counter()
                    sched.step()
                    self._timing["timing_s/gen"] += time.perf_counter() - t0
                self._collect(live, groups, partial_groups)
        except BaseException as e:  # surfaced in the trainer's next get()
            with self._cond:
                self._error = e
                self._cond.notify_all()

    def _load(self, newest, busy: bool) -> None:
        """Before a scheduler step: the newest weights when allowed, else the loaded ones back
        (after evaluation borrowed the engine)."""
        version, params = newest
        if params is not None and version > self._loaded[1] and (self.partial or not busy):
            self._loaded = (params, version)
            self.partial_swaps += bool(busy)
        if self._engine_version != self._loaded[1]:
            self._apply(*self._loaded)
            self._engine_version = self._loaded[1]

    def _draw(self, sched: Scheduler, live: dict, groups: dict) -> None:
        index, examples = self.next_index, next(self._data)
        done = self._done.get(index, set())
        for g, ex in enumerate(examples):
            rid = index * self.batch_size + g
            todo = [s for s in range(self.n) if (g, s) not in done]
            if todo:
                groups[(index, g)] = list(todo)
            for s in todo:
                sp = self._sampling_for(ex, s)
                req = sched.submit((index, g, s), ex["prompt_ids"], sp, 1,
                                   [sample_key(sp.seed, rid, s)])  # fmt: skip
                live[(index, g, s)] = (req, ex)
        with self._cond:
            self._in_flight = len(live)
            self.next_index = index + 1
            self._state_before[index + 1] = copy.deepcopy(self._data.get_state())

    def _collect(self, live: dict, groups: dict, partial_groups: dict) -> None:
        """Finished samples: graded, then handed on as units."""
        finished = [(k, req, ex) for k, (req, ex) in live.items() if req.outputs[0] is not None]
        if not finished:
            return
        now = time.perf_counter()
        trajs = []
        for (index, g, s), req, ex in finished:
            del live[(index, g, s)]
            trajs.append(Trajectory.from_completion(req.outputs[0], ex, g, s, self._tok))
            trajs[-1].stats["source"] = (index, g, s)  # data batch, group, sample
        t0 = time.perf_counter()
        results = self._score(trajs)
        self._data.record(trajs, results)
        self._timing["timing_s/reward"] += time.perf_counter() - t0
        units = []
        for ((index, g, _s), _, ex), t, r in zip(finished, trajs, results, strict=True):
            if not self.by_group:
                units.append(_Unit((index, g), ex, [t], [r], [now], 0.0))
                continue
            members = partial_groups[(index, g)]
            members.append((t, r, now))
            if len(members) == len(groups[(index, g)]):
                del partial_groups[(index, g)], groups[(index, g)]
                members.sort(key=lambda m: m[0].sample)
                ts, rs, at = (list(x) for x in zip(*members, strict=True))
                units.append(_Unit((index, g), ex, ts, rs, at, 0.0))
        with self._cond:
            self._in_flight = len(live)
            self._finished_lengths.extend(len(t.response_ids) for t in trajs)
            for u in units:
                u.ready_at = time.perf_counter()
                self._buffer.append(u)
            self._cond.notify_all()

    # ---------------------------------------------------------------- trainer side
    def get(self, between_waits: Callable[[], None] = lambda: None) -> tuple[Produced, dict]:
        """The first units within the bound to make a step (stale ones dropped), as a batch."""
        t0, need = time.perf_counter(), self.batch_size if self.by_group else self.per_step
        taken, dropped, dropped_lengths, depth = [], 0, [], 0
        while len(taken) < need:
            with self._cond:
                while not self._buffer and self._error is None:
                    self._cond.wait(0.2)
                    if not self._buffer:
                        between_waits()
                if self._error is not None:
                    raise RuntimeError("the rollout producer failed") from self._error
                depth = max(depth, len(self._buffer))
                unit = self._buffer.popleft()
                self._mark_done(unit)
                self._cond.notify_all()
            if self.trainer_version - unit.version > self.max_off_policy_steps:
                dropped += 1
                dropped_lengths.extend(len(t.response_ids) for t in unit.trajs)
                continue
            taken.append(unit)
        self.dropped_units += dropped
        with self._cond:
            timing, self._timing = dict(self._timing), collections.Counter()
            lengths, self._finished_lengths = self._finished_lengths, []
            produced = self._produced(taken, timing, lengths, dropped_lengths)
        waits = [max(u.finished_at) - min(u.finished_at) for u in taken]
        return produced, {
            "queue/depth": float(depth),
            "queue/wait_s": time.perf_counter() - t0,
            "queue/age_s": time.perf_counter() - max(u.ready_at for u in taken),
            "queue/group_wait_s": sum(waits) / len(waits),
            "queue/producer_wait_s": self.producer_wait_s,
            "queue/in_flight": float(self._in_flight),
            "async/dropped_stale": float(self.dropped_units),
            "async/dropped_stale_batches": float(dropped),
            "async/weights_version": float(self.version),
            "async/stream/batches_open": float(len(self._done)),
            "async/stream/groups_per_step": float(len({u.key for u in taken})),
            **({"async/partial/swaps": float(self.partial_swaps)} if self.partial else {}),
        }

    def _mark_done(self, unit: _Unit) -> None:
        """Holding the lock: the unit's samples are accounted for; closed batches retire."""
        index, g = unit.key
        self._done.setdefault(index, set()).update((g, t.sample) for t in unit.trajs)
        self._done_samples += len(unit.trajs)
        while len(self._done.get(self.first_open, ())) == self.per_step:
            del self._done[self.first_open]
            self._state_before.pop(self.first_open, None)
            self.first_open += 1

    def _produced(self, taken, timing, lengths, dropped_lengths) -> Produced:
        """Holding the lock: the step's units as one batch (groups renumbered in take order)."""
        ids: dict[tuple, int] = {}
        examples, trajs, results = [], [], []
        for u in taken:
            if u.key not in ids:
                ids[u.key] = len(ids)
                examples.append(u.example)
            trajs.extend(dataclasses.replace(t, group=ids[u.key]) for t in u.trajs)
            results.extend(u.results)
        order = sorted(range(len(trajs)), key=lambda i: (trajs[i].group, trajs[i].sample))
        trajs, results = [trajs[i] for i in order], [results[i] for i in order]
        done = {str(i): sorted(v) for i, v in self._done.items() if i >= self.first_open}
        return Produced(
            index=self.first_open - 1,  # the trainer checkpoints (index + 1, data_state, done)
            sampled=SampledStep(examples, trajs, results, {}, lengths),
            data_state=copy.deepcopy(self._state_before[self.first_open]),
            version=min(u.version for u in taken),
            timing=timing,
            group_wait_s=0.0,
            ready_at=max(u.ready_at for u in taken),
            dropped_lengths=dropped_lengths,
            done=done,
        )

    updated = AsyncRollouts.updated  # every `sync_every`-th version is published

    def publish(self, params, version: int) -> None:
        """New trainer weights (a copy the trainer will not donate) as `version`."""
        with self._cond:
            self.trainer_version = max(self.trainer_version, version)
            self._weights = {version: params}
            self.version = version
            self._cond.notify_all()

    def engine_borrowed(self) -> None:
        """Holding `engine_lock` after loading other weights: the producer reloads its own."""
        self._engine_version = -1

    def close(self, timeout_s: float = 60.0) -> None:
        """Stops the producer after its current scheduler step; buffered units are discarded."""
        with self._cond:
            self._closed = True
            self._buffer.clear()
            self._cond.notify_all()
        self._thread.join(timeout_s)


def stream_rollouts(
    trainer, params, version: int, done: dict | None, sampling_for=None
) -> StreamRollouts:
    """The trainer's stream producer, from the trainer's roles, data and spec
    (`sampling_for(example, sample)`: per-sample SamplingParams, e.g. scripted lengths)."""
    spec, rollout = trainer.spec, trainer.roles.rollout
    return StreamRollouts(
        engine=trainer.engine, tokenizer=trainer.tokenizer, sampling=rollout.sampling,
        apply_weights=lambda p, v: rollout.sync(p, version=v), params=params,
        score=lambda trajs: trainer.pool.score([t.grader_item() for t in trajs]),
        data_iter=trainer.data_iter, batch_size=spec.batch_size, n=spec.n,
        by_group=trainer.traits.needs_groups, start_index=trainer.step if not trainer._consumed
        else trainer._consumed[0], version=version,
        max_off_policy_steps=spec.max_off_policy_steps, policy=spec.staleness_policy,
        sync_every=spec.sync_every_steps, partial=spec.partial_rollouts,
        prompt_overflow=rollout.prompt_overflow, done=done, sampling_for=sampling_for,
    )  # fmt: skip
