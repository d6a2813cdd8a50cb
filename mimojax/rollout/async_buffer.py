"""Async rollouts: a producer thread fills a staleness-bounded buffer that the trainer consumes.

The unit is one step's sampled batch (`batch_size` complete groups): a group estimator (GRPO,
RLOO) only trains a group whose members are all done, so a group waits for its slowest member
(`queue/group_wait_s`). Every trajectory carries the engine version that generated it; the
staleness of a batch is the trainer's policy version when it trains on it minus that version.

- `wait` (and `one_step_off`): the producer starts batch j (j-th since start) only once the
  trainer has published version base + j - K, so no batch is ever trained more than K versions
  late. `exact=True` (one_step_off) generates batch j with exactly version base + max(0, j - K):
  step t+1's rollout runs during step t's update, staleness exactly 1 after the first step.
  With K = 0 the producer waits for each update: sync mode's order, samples and updates.
- `drop`: the producer runs free (at most K + 1 batches buffered) with the newest weights; the
  trainer discards a batch whose staleness exceeds K (`async/dropped_stale` counts its groups).
- `sync_every = k` (async only): the trainer publishes its weights after every k-th update
  (versions that are multiples of k, and the version it started from); its own version still
  counts every update, so staleness stays exact. It needs K >= k - 1: with a smaller bound the
  producer would wait for weights that are never published.

Weights reach the engine only from the producer thread, between batches (the trainer publishes
copies, so its donated update never frees what the engine still reads) — and, with
`partial=True` (async only), also between two decode steps of a batch in flight
(`scheduler.between_steps`): in-flight trajectories continue under the new weights, their KV
kept, and each token records the version that sampled it. A batch's version stays the one it
started with, which no token is older than, so the bound holds on the oldest token; the
staleness metrics count each trajectory's oldest token.
Checkpoints store the data position of the last batch the trainer *consumed*: batches still
buffered at a kill are regenerated after the resume, never counted twice.
"""

from __future__ import annotations

import collections
import copy
import dataclasses
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from mimojax.engine.scheduler import between_steps


def _nothing() -> None:
    pass


@dataclasses.dataclass
class Produced:
    """One batch from the producer: its sampled groups and where the data iterator stood."""

    index: int  # batch number in data order (request ids derive from it)
    sampled: Any  # dynamic_sampling.SampledStep
    data_state: dict  # iterator state right after this batch was drawn (and recorded)
    version: int  # engine version it started with (partial rollouts mix newer tokens in)
    timing: dict  # the producer's timing_s/* for this batch
    group_wait_s: float  # mean over groups: slowest member's finish - fastest member's
    ready_at: float  # perf_counter when it entered the buffer
    # response lengths of the batches dropped for staleness just before this one (short-task bias)
    dropped_lengths: list[int] = dataclasses.field(default_factory=list)
    # stream flow: samples of batches `index + 1` on already consumed or dropped (checkpointed)
    done: dict | None = None


class AsyncRollouts:
    """The producer thread and its bounded buffer; the trainer calls `get`, `publish`, `close`."""

    def __init__(
        self,
        produce: Callable[[int], tuple[Any, dict, dict]],
        apply_weights: Callable[[Any, int], None],
        params: Any,
        *,
        start_index: int,
        version: int,
        max_off_policy_steps: int,
        policy: str = "wait",
        exact: bool = False,
        sync_every: int = 1,
        partial: bool = False,
    ):
        # produce(index) -> (SampledStep, data state after it, timing); apply_weights(params, v);
        # params: a copy of the weights the engine holds now, as `version`
        self._produce, self._apply = produce, apply_weights
        self.max_off_policy_steps, self.policy, self.exact = max_off_policy_steps, policy, exact
        if sync_every < 1 or (sync_every > 1 and (exact or max_off_policy_steps < sync_every - 1)):
            raise ValueError(
                f"sync_every={sync_every} needs exact=False and max_off_policy_steps >= "
                f"sync_every - 1 (got {max_off_policy_steps}, exact={exact})"
            )
        if partial and exact:
            raise ValueError("partial rollouts need exact=False (one_step_off pins versions)")
        self.sync_every, self.partial, self.partial_swaps = sync_every, partial, 0
        self.next_index = start_index  # the next batch the trainer consumes
        self._base, self.version = version, version  # the newest version published
        self.trainer_version = version  # the trainer's: one more per update (staleness counts it)
        # published copies the producer may still load (exact: from its target on; else newest)
        self._weights: dict[int, Any] = {version: params}
        self._engine_version = version
        self._buffer: collections.deque[Produced] = collections.deque()
        self._cond = threading.Condition()
        self.engine_lock = threading.Lock()  # held while the producer uses the engine
        self._closed, self._error = False, None
        self.dropped_groups, self.producer_wait_s = 0, 0.0
        self._thread = threading.Thread(target=self._run, name="mimojax-rollouts", daemon=True)
        self._thread.start()

    # ---------------------------------------------------------------- producer thread
    def _ready_to_start(self, j: int) -> bool:
        if self.policy == "wait":
            return self.version >= self._base + j - self.max_off_policy_steps
        return len(self._buffer) <= self.max_off_policy_steps  # drop: K + 1 buffered at most

    def _run(self) -> None:
        try:
            j, index = 0, self.next_index
            while True:
                t0 = time.perf_counter()
                with self._cond:
                    self._cond.wait_for(lambda j=j: self._closed or self._ready_to_start(j))
                    if self._closed:
                        return
                    self.producer_wait_s += time.perf_counter() - t0
                    target = self.version
                    if self.exact:
                        target = self._base + max(0, j - self.max_off_policy_steps)
                    params = self._weights[target]
                    for v in [v for v in self._weights if v < target]:
                        del self._weights[v]  # older than anything still to generate
                with self.engine_lock:
                    if target != self._engine_version:
                        self._apply(params, target)
                        self._engine_version = target
                    with between_steps(self._swap_in_flight if self.partial else _nothing):
                        sampled, data_state, timing = self._produce(index)
                # started with `target`: no token is older (partial rollouts only add newer)
                item = Produced(
                    index, sampled, copy.deepcopy(data_state), target, timing,
                    group_wait_s(sampled.trajs, timing.get("timing_s/gen", 0.0)),
                    time.perf_counter(),
                )  # fmt: skip
                with self._cond:
                    self._buffer.append(item)
                    self._cond.notify_all()
                j, index = j + 1, index + 1
        except BaseException as e:  # surfaced in the trainer's next get()
            with self._cond:
                self._error = e
                self._cond.notify_all()

    def _swap_in_flight(self) -> None:
        """Partial rollouts, between two decode steps (producer, engine_lock held): the newest
        published weights, if newer than the engine's, replace them under the batch in flight."""
        with self._cond:
            version = self.version
            params = self._weights.get(version)
        if params is None or version <= self._engine_version or self._closed:
            return
        self._apply(params, version)
        self._engine_version = version
        self.partial_swaps += 1

    # ---------------------------------------------------------------- trainer side
    def get(self, between_waits: Callable[[], None] = lambda: None) -> tuple[Produced, dict]:
        """The next batch within the bound (dropping stale ones) and the queue/async metrics.

        `between_waits()` runs about every 0.2 s while the buffer is empty (a stop check)."""
        t0, dropped_batches, depth, dropped_lengths = time.perf_counter(), 0, 0, []
        while True:
            with self._cond:
                while not self._buffer and self._error is None:
                    self._cond.wait(0.2)
                    if not self._buffer:
                        between_waits()
                if self._error is not None:
                    raise RuntimeError("the rollout producer failed") from self._error
                depth = len(self._buffer)
                item = self._buffer.popleft()
                self._cond.notify_all()
            self.next_index = item.index + 1
            if self.trainer_version - item.version <= self.max_off_policy_steps:
                break
            dropped_batches += 1  # only under `drop`: `wait` never lets a batch get this late
            self.dropped_groups += len({t.group for t in item.sampled.trajs})
            dropped_lengths.extend(item.sampled.drawn_lengths)
        item.dropped_lengths = dropped_lengths
        wait_s = time.perf_counter() - t0
        return item, {
            "queue/depth": float(depth),
            "queue/wait_s": wait_s,
            "queue/age_s": time.perf_counter() - item.ready_at,
            "queue/group_wait_s": item.group_wait_s,
            "queue/producer_wait_s": self.producer_wait_s,
            "async/dropped_stale": float(self.dropped_groups),
            "async/dropped_stale_batches": float(dropped_batches),
            "async/weights_version": float(self.version),  # what the producer may load now
            **({"async/partial/swaps": float(self.partial_swaps)} if self.partial else {}),
        }

    def updated(self, version: int, params_copy: Callable[[], Any]) -> bool:
        """The trainer's update made `version`; on every `sync_every`-th version a copy of its
        weights (`params_copy()`, one the trainer will not donate) is published. Returns whether."""
        self.trainer_version = version
        if version % self.sync_every:
            return False
        self.publish(params_copy(), version)
        return True

    def publish(self, params, version: int) -> None:
        """New trainer weights (a copy the trainer will not donate) as `version`."""
        with self._cond:
            self.trainer_version = max(self.trainer_version, version)
            self._weights[version] = params
            if not self.exact:  # only the newest is ever loaded
                for v in [v for v in self._weights if v < version]:
                    del self._weights[v]
            self.version = version
            self._cond.notify_all()

    def engine_borrowed(self) -> None:
        """Call holding `engine_lock` after loading other weights (evaluation): the producer
        reloads its own before the next batch."""
        self._engine_version = -1

    def close(self, timeout_s: float = 60.0) -> None:
        """Stops the producer after its current batch; buffered batches are discarded."""
        with self._cond:
            self._closed = True
            self._buffer.clear()
            self._cond.notify_all()
        self._thread.join(timeout_s)


def group_wait_s(trajs, gen_s: float) -> float:
    """Mean over groups of how long its first-finished member waited for its last one.

    Agent loops time each trajectory (`stats["wall_s"]`), and the batched single-turn path
    records each sample's submit -> finished seconds there (all are submitted at once), so the
    wait is measured. Trajectories without it get an estimate from their length: continuous
    batching decodes one token per sequence per step, the longest response taking all `gen_s`."""
    groups: dict[int, list] = collections.defaultdict(list)
    for t in trajs:
        groups[t.group].append(t)
    longest = max((len(t.response_ids) for t in trajs), default=0)
    waits = []
    for members in groups.values():
        if all("wall_s" in t.stats for t in members):
            done = [float(t.stats["wall_s"]) for t in members]
        else:
            done = [gen_s * len(t.response_ids) / max(longest, 1) for t in members]
        waits.append(max(done) - min(done))
    return float(np.mean(waits)) if waits else 0.0
