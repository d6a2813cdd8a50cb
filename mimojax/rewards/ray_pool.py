"""The reward pool on a Ray cluster: each item is one Ray task, with the local pool's semantics.

`RayRewardPool` scores like `mimojax.rewards.pool.RewardPool` (same `score(items)`, same
`RewardResult`s) but runs graders, and the sandboxes they start, as Ray tasks anywhere on a
cluster. A grader that raises, returns garbage, hangs past `timeout_s` or kills its worker yields
`valid=False`, never an exception (but an unknown env or a missing extra raises, as in the
local pool); a hung task is force-cancelled (its worker process killed).
Ray is imported here only, on first use: `pip install 'mimojax[ray]'`.

    with RayRewardPool(address="auto", timeout_s=10.0) as pool:  # joins `ray start --head`
        results = pool.score([{"env": "math", "response": r, "ground_truth": "42"}])
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from mimojax.extras import install_command, require
from mimojax.registry import UnknownNameError
from mimojax.rewards.pool import (
    _STARTUP_TIMEOUT_S,
    RewardResult,
    _check_items,
    _run,
    _short,
    failed,
    get_reward_fn,
    raise_missing_extra,
)
from mimojax.sandbox.bwrap import ALLOW_UNSANDBOXED_ENV

INSTALL_HINT = install_command("ray")


def import_ray():
    """The `ray` module, or a MissingExtraError that says how to install it."""
    return require("ray", "ray", "reward.backend = 'ray'")


def _grade_task(item):
    """Ray task body: yields ("begin",) once the grader is loaded, then ("result", RewardResult)
    or ("unknown", message)."""
    try:
        fn = get_reward_fn(item["env"])
    except UnknownNameError as e:
        yield ("unknown", str(e))
        return
    except BaseException as e:  # noqa: BLE001 - a grader module that fails to import
        yield ("result", failed(e))
        return
    # Worker start and the grader's import took their own time; the call gets a fresh deadline.
    yield ("begin",)
    yield ("result", _run(fn, item))


@dataclass
class _Task:
    index: int
    sent_at: float
    deadline: float
    begun_at: float | None = None


class RayRewardPool:
    """Scores items with graders as Ray tasks; a bad grader only marks its item invalid.

    `address`: "auto" joins a running cluster (`ray start --head`, or RAY_ADDRESS), "local" starts
    one in this process, "host:port" joins that one; ignored when Ray is already initialised here.
    `max_in_flight`: tasks submitted at once (default: the cluster's CPUs, one per task), so a
    queued task's wait does not count against its startup allowance.
    """

    def __init__(
        self, address: str = "auto", timeout_s: float = 10.0, max_in_flight: int | None = None
    ):
        self._closed = True  # until connected: close() then has nothing to undo
        if timeout_s <= 0:
            raise ValueError(f"reward timeout_s must be > 0, got {timeout_s}")
        if max_in_flight is not None and max_in_flight < 1:
            raise ValueError(f"reward max_in_flight must be >= 1, got {max_in_flight}")
        ray = self._ray = import_ray()
        self.timeout_s = float(timeout_s)
        self._lock = threading.Lock()
        self._owns_ray = not ray.is_initialized()
        if self._owns_ray:
            kwargs = {"address": address, "logging_level": logging.WARNING}
            if address == "local":
                kwargs["include_dashboard"] = False
            try:
                ray.init(**kwargs)
            except ConnectionError as e:
                raise RuntimeError(
                    f"reward.ray_address={address!r}: no Ray cluster to join ({e}). Start one "
                    "with `ray start --head`, or set reward.ray_address='local'"
                ) from e
        self._closed = False
        cpus = int(ray.cluster_resources().get("CPU", 1))
        self.max_in_flight = int(max_in_flight or max(1, cpus))
        options = {"num_cpus": 1, "max_retries": 0, "num_returns": "streaming"}
        if os.environ.get(ALLOW_UNSANDBOXED_ENV) == "1":
            # Set by roles from sandbox.allow_unsandboxed; workers do not share our environment.
            options["runtime_env"] = {"env_vars": {ALLOW_UNSANDBOXED_ENV: "1"}}
        self._remote = ray.remote(_grade_task).options(**options)

    def score(self, items: Sequence[dict]) -> list[RewardResult]:
        """Grade items ({"env", "response", "ground_truth", "extra"}); results in input order."""
        items = _check_items(items)
        with self._lock:
            if self._closed:
                raise RuntimeError("RayRewardPool.score() after close()")
            unknown: dict[str, str] = {}
            results = self._score_in_tasks(items, unknown)
        if unknown:
            env, message = next(iter(unknown.items()))
            raise ValueError(f"reward env {env!r}: {message}")
        raise_missing_extra(results)
        return results

    def _score_in_tasks(self, items, unknown) -> list[RewardResult]:
        ray = self._ray
        results: list[RewardResult | None] = [None] * len(items)
        pending = deque(range(len(items)))
        running: dict = {}  # ObjectRefGenerator -> _Task
        try:
            while pending or running:
                while pending and len(running) < self.max_in_flight:
                    self._submit(pending.popleft(), items, results, running)
                if not running:
                    continue
                until = min(t.deadline for t in running.values())
                ready, _ = ray.wait(
                    list(running), num_returns=1, timeout=max(0.0, until - time.monotonic())
                )
                for gen in ready:
                    self._receive(gen, running, items, results, unknown)
                now = time.monotonic()
                for gen, t in list(running.items()):
                    if now >= t.deadline:
                        if t.begun_at is None:
                            error = f"timeout after {_STARTUP_TIMEOUT_S:g}s before the grader began"
                        else:
                            error = f"timeout after {self.timeout_s:g}s"
                        started = t.sent_at if t.begun_at is None else t.begun_at
                        results[t.index] = RewardResult(
                            0.0, False, error=error, seconds=now - started
                        )
                        self._cancel(gen, running)
        finally:
            for gen in list(running):  # an interrupt mid-batch leaves no task behind
                self._cancel(gen, running)
        return results  # type: ignore[return-value]

    def _submit(self, index, items, results, running) -> None:
        try:
            gen = self._remote.remote(items[index])
        except Exception as e:  # noqa: BLE001 - an unpicklable `extra`
            results[index] = RewardResult(0.0, False, error=f"cannot send item: {_short(e)}")
            return
        now = time.monotonic()
        # Until "begin": Ray starts (or reuses) a worker and the grader imports (sympy: seconds).
        running[gen] = _Task(index, now, now + _STARTUP_TIMEOUT_S)

    def _receive(self, gen, running, items, results, unknown) -> None:
        """Read gen's next message; a crashed or lost task is its item's infra failure."""
        t = running[gen]
        try:
            msg = self._ray.get(next(gen))
        except Exception as e:  # noqa: BLE001 - WorkerCrashedError, ObjectLostError, ...
            now = time.monotonic()
            error = _short(e).split("\n", 1)[0]
            results[t.index] = RewardResult(
                0.0,
                False,
                error=f"grader worker died ({error})",
                seconds=now - (t.begun_at or t.sent_at),
            )
            self._cancel(gen, running)
            return
        if msg[0] == "begin":
            t.begun_at = time.monotonic()
            t.deadline = t.begun_at + self.timeout_s
            return
        kind, payload = msg
        if kind == "unknown":
            unknown[items[t.index]["env"]] = payload
            payload = RewardResult(0.0, False, error=payload)
        results[t.index] = payload
        del running[gen]

    def _cancel(self, gen, running) -> None:
        del running[gen]
        try:
            # force: kill the worker process (and with it the grader's sandboxes) mid-call.
            self._ray.cancel(gen, force=True)
        except Exception:  # noqa: BLE001 - already finished or gone
            pass

    def close(self) -> None:
        """Disconnect from Ray, stopping a cluster this pool started (idempotent)."""
        if self._closed:
            return
        self._closed = True
        if self._owns_ray and self._ray.is_initialized():
            self._ray.shutdown()

    def __enter__(self) -> RayRewardPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass
