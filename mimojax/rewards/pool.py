"""The reward pool: graders run in worker processes with per-item timeouts.

A grader is `fn(response, ground_truth, extra) -> float | dict`; a dict holds "score" plus
extra numeric dimensions that get logged ("format", "correct"). Graders never crash the run:
one that raises, hangs, returns garbage or kills its process yields `valid=False` (an infra
failure, excluded from training and counted), never a zero reward and never an exception.
Two exceptions: an unknown env (ValueError) and a grader that needs an extra not installed here
(`mimojax.extras.MissingExtraError`, naming the pip command): `score` raises those, since
every item of that env would fail the same way.

    with RewardPool(num_workers=2, timeout_s=10.0) as pool:
        results = pool.score([{"env": "math", "response": r, "ground_truth": "42"}])
"""

from __future__ import annotations

import importlib
import math
import multiprocessing
import os
import signal
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import wait

import numpy as np

from mimojax.extras import MissingExtraError
from mimojax.registry import Registry, UnknownNameError

REWARD_FUNCTIONS = Registry("reward function")

# A worker that has not said "ready" after this long is broken (spawn + imports take ~2 s).
_STARTUP_TIMEOUT_S = 120.0
# Consecutive workers dying before "ready" after which the pool gives up (not a grader's fault).
_MAX_START_FAILURES = 3
_MAX_ERROR_CHARS = 300


def register_reward(name: str, *aliases: str):
    """Decorator registering a grader `fn(response, ground_truth, extra)` under `name`."""
    return REWARD_FUNCTIONS.register(name, *aliases)


def get_reward_fn(env: str):
    """The grader for `env`: a registered name (importing `mimojax.envs.<env>` if needed)
    or "module.path:function"."""
    if ":" in env:
        module_name, _, attr = env.partition(":")
        fn = getattr(importlib.import_module(module_name), attr, None)
        if not callable(fn):
            raise UnknownNameError(
                f"reward function {env!r}: {module_name} has no function {attr!r}"
            )
        return fn
    if env not in REWARD_FUNCTIONS and env.isidentifier():
        try:
            importlib.import_module(f"mimojax.envs.{env}")
        except ModuleNotFoundError as e:
            # Only "no such env" falls through to the registry's error; a missing dependency
            # inside the env is a real error and propagates.
            if e.name != f"mimojax.envs.{env}":
                raise
    return REWARD_FUNCTIONS[env]


@dataclass
class RewardResult:
    """One graded item; `valid=False` marks an infra failure (score is then 0.0)."""

    score: float
    valid: bool
    dims: dict[str, float] = field(default_factory=dict)
    error: str | None = None
    seconds: float = 0.0  # grader wall time
    cpu_seconds: float = 0.0  # grader CPU time, its subprocesses (sandboxes) included
    turn_scores: list[float] | None = None  # per model turn, when the grader gives them
    missing_extra: str | None = None  # the grader needs this extra (error: the pip command)


def _short(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= _MAX_ERROR_CHARS else text[: _MAX_ERROR_CHARS - 3] + "..."


def _as_number(value) -> float | None:
    """float(value) for ints, floats, bools and numpy scalars; None for anything else."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__float__"):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _to_result(out, seconds: float) -> RewardResult:
    """Check a grader's return value; anything malformed or non-finite is an infra failure."""
    if isinstance(out, Mapping):
        if "score" not in out:
            return RewardResult(0.0, False, error="grader returned a dict without 'score'")
        score = _as_number(out["score"])
        turns = out.get("turn_scores")
        if turns is not None:
            turns = [_as_number(v) for v in turns] if isinstance(turns, Sequence) else [None]
            if any(v is None or not math.isfinite(v) for v in turns):
                return RewardResult(0.0, False, error="turn_scores must be a list of numbers")
        # Non-numeric entries (an extracted answer string, say) are for humans, not metrics.
        skip = ("score", "turn_scores")
        dims = {str(k): _as_number(v) for k, v in out.items() if k not in skip}
        dims = {k: v for k, v in dims.items() if v is not None}
    else:
        score, dims, turns = _as_number(out), {}, None
    if score is None:
        return RewardResult(0.0, False, error=f"grader returned {type(out).__name__}, not a score")
    bad = [k for k, v in {"score": score, **dims}.items() if not math.isfinite(v)]
    if bad:
        return RewardResult(0.0, False, error=f"non-finite {', '.join(bad)}", seconds=seconds)
    return RewardResult(score, True, dims, None, seconds, turn_scores=turns)


def _cpu_s() -> float:
    t = os.times()  # children: the sandboxes a grader ran and waited for
    return t.user + t.system + t.children_user + t.children_system


def failed(exc: BaseException, seconds: float = 0.0) -> RewardResult:
    """The invalid result of a grader (or its import) that raised `exc`."""
    if isinstance(exc, MissingExtraError):
        return RewardResult(0.0, False, error=str(exc), seconds=seconds, missing_extra=exc.extra)
    return RewardResult(0.0, False, error=_short(exc), seconds=seconds)


def raise_missing_extra(results: Sequence[RewardResult]) -> None:
    """Raise the MissingExtraError that a result carries back from its grader, if any."""
    for r in results:
        if r is not None and r.missing_extra is not None:
            raise MissingExtraError(r.error or "", r.missing_extra)


def _run(fn, item) -> RewardResult:
    start, cpu = time.perf_counter(), _cpu_s()
    try:
        out = fn(item["response"], item["ground_truth"], item["extra"])
    except BaseException as e:  # noqa: BLE001 - SystemExit from a grader is its failure too
        result = failed(e, time.perf_counter() - start)
    else:
        result = _to_result(out, time.perf_counter() - start)
    result.cpu_seconds = _cpu_s() - cpu
    return result


def _worker_main(conn) -> None:
    """Worker loop: receive (index, item), send ("result", index, RewardResult)."""
    # Ctrl-C reaches the whole process group; the parent decides when workers stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    fns = {}
    conn.send(("ready",))
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return  # the parent is gone
        if msg is None:
            return
        index, item = msg
        env = item["env"]
        if env not in fns:
            try:
                fns[env] = get_reward_fn(env)
            except UnknownNameError as e:
                conn.send(("unknown", index, str(e)))
                continue
            except BaseException as e:  # noqa: BLE001 - a grader module that fails to import
                conn.send(("result", index, failed(e)))
                continue
            # The import took its own time; the grader call gets a fresh deadline.
            conn.send(("begin", index))
        conn.send(("result", index, _run(fns[env], item)))


class _Worker:
    """One worker process, its pipe, and the item it is grading."""

    def __init__(self, ctx):
        self.conn, child = ctx.Pipe(duplex=True)
        # daemon: a parent that exits without close() takes its workers with it.
        self.proc = ctx.Process(
            target=_worker_main, args=(child,), daemon=True, name="mimojax-reward"
        )
        self.proc.start()
        child.close()
        self.started = time.monotonic()
        self.ready = False
        self.index: int | None = None
        self.sent_at = 0.0
        self.deadline = 0.0
        self.loaded: set[str] = set()  # envs whose grader this process has imported

    def kill(self) -> None:
        # SIGKILL: a hung grader may ignore SIGTERM.
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(timeout=5)
        self.conn.close()

    def death_reason(self) -> str:
        self.proc.join(timeout=1)
        code = self.proc.exitcode
        if code is not None and code < 0:
            try:
                return f"grader worker died ({signal.Signals(-code).name})"
            except ValueError:
                pass
        return f"grader worker died (exit code {code})"


def _check_items(items) -> list[dict]:
    checked = []
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise TypeError(f"reward item {i}: expected a dict, got {type(item).__name__}")
        for key in ("env", "response", "ground_truth"):
            if key not in item:
                raise ValueError(f"reward item {i}: missing key {key!r} (has {sorted(item)})")
        if not isinstance(item["env"], str):
            raise TypeError(f"reward item {i}: 'env' must be a str, got {item['env']!r}")
        extra = item.get("extra") or {}
        checked.append(
            {
                "env": item["env"],
                "response": item["response"],
                "ground_truth": item["ground_truth"],
                "extra": extra,
            }
        )
    return checked


class RewardPool:
    """Scores items with graders in worker processes; a bad grader only marks its item invalid."""

    def __init__(self, num_workers: int = 2, timeout_s: float = 10.0, mp_context: str = "spawn"):
        if num_workers < 0:
            raise ValueError(f"reward num_workers must be >= 0, got {num_workers}")
        if timeout_s <= 0:
            raise ValueError(f"reward timeout_s must be > 0, got {timeout_s}")
        if mp_context not in ("spawn", "forkserver"):
            # fork would copy the parent's JAX runtime threads and locks into the child.
            raise ValueError(
                f"reward mp_context must be 'spawn' or 'forkserver', got {mp_context!r}"
            )
        self.num_workers = num_workers
        self.timeout_s = float(timeout_s)
        self._ctx = multiprocessing.get_context(mp_context)
        self._lock = threading.Lock()
        self._fns: dict = {}
        self._start_failures = 0
        self._workers = [_Worker(self._ctx) for _ in range(num_workers)]
        self._closed = False

    def score(self, items: Sequence[dict]) -> list[RewardResult]:
        """Grade items ({"env", "response", "ground_truth", "extra"}); results in input order."""
        items = _check_items(items)
        with self._lock:
            if self._closed:
                raise RuntimeError("RewardPool.score() after close()")
            unknown: dict[str, str] = {}
            if self.num_workers == 0:
                results = [self._score_here(item, unknown) for item in items]
            else:
                results = self._score_in_workers(items, unknown)
        if unknown:
            env, message = next(iter(unknown.items()))
            raise ValueError(f"reward env {env!r}: {message}")
        raise_missing_extra(results)
        return results

    def _score_here(self, item, unknown) -> RewardResult:
        env = item["env"]
        if env not in self._fns:
            try:
                self._fns[env] = get_reward_fn(env)
            except UnknownNameError as e:
                unknown[env] = str(e)
                return RewardResult(0.0, False, error=str(e))
            except Exception as e:  # noqa: BLE001
                return failed(e)
        return _run(self._fns[env], item)

    def _score_in_workers(self, items, unknown) -> list[RewardResult]:
        results: list[RewardResult | None] = [None] * len(items)
        pending = deque(range(len(items)))
        while pending or any(w.index is not None for w in self._workers):
            for w in self._workers:
                if pending and w.ready and w.index is None:
                    self._dispatch(w, pending, items, results)
            busy = [w.deadline for w in self._workers if w.index is not None]
            starting = [w.started + _STARTUP_TIMEOUT_S for w in self._workers if not w.ready]
            until = min(busy + starting, default=time.monotonic() + 1.0)
            handles = [w.conn for w in self._workers] + [w.proc.sentinel for w in self._workers]
            wait(handles, timeout=max(0.0, until - time.monotonic()))
            for slot, w in enumerate(self._workers):
                self._poll(slot, w, items, results, unknown)
        return results  # type: ignore[return-value]

    def _dispatch(self, w, pending, items, results) -> None:
        index = pending.popleft()
        try:
            w.conn.send((index, items[index]))
        except (BrokenPipeError, ConnectionResetError, EOFError):
            pending.appendleft(index)  # died while idle; _poll replaces it
            return
        except Exception as e:  # noqa: BLE001 - an unpicklable `extra`
            results[index] = RewardResult(0.0, False, error=f"cannot send item: {_short(e)}")
            return
        w.index, w.sent_at = index, time.monotonic()
        # A first item of an env makes the worker import its grader (sympy, say: seconds on a
        # busy box); that import gets the startup allowance, and the grader call its own
        # timeout_s from the worker's "begin".
        env = items[index]["env"]
        w.deadline = w.sent_at + (self.timeout_s if env in w.loaded else _STARTUP_TIMEOUT_S)
        w.loaded.add(env)

    def _poll(self, slot, w, items, results, unknown) -> None:
        """Read w's messages; replace it if it died, hung past its deadline or never started."""
        try:
            while w.conn.poll():
                msg = w.conn.recv()
                if msg[0] == "ready":
                    w.ready = True
                    self._start_failures = 0
                elif msg[0] == "begin":
                    w.sent_at = time.monotonic()
                    w.deadline = w.sent_at + self.timeout_s
                else:
                    kind, index, payload = msg
                    if kind == "unknown":
                        unknown[items[index]["env"]] = payload
                        payload = RewardResult(0.0, False, error=payload)
                    results[index] = payload
                    w.index = None
        except (EOFError, OSError):
            pass  # the process is dead; handled below
        now = time.monotonic()
        if not w.proc.is_alive():
            if w.index is not None:
                results[w.index] = RewardResult(
                    0.0, False, error=w.death_reason(), seconds=now - w.sent_at
                )
            elif not w.ready:
                self._start_failures += 1
                if self._start_failures >= _MAX_START_FAILURES:
                    raise RuntimeError(f"reward workers fail to start: {w.death_reason()}")
            self._replace(slot)
        elif w.index is not None and now >= w.deadline:
            results[w.index] = RewardResult(
                0.0, False, error=f"timeout after {self.timeout_s:g}s", seconds=now - w.sent_at
            )
            self._replace(slot)
        elif not w.ready and now >= w.started + _STARTUP_TIMEOUT_S:
            raise RuntimeError(f"reward worker not ready after {_STARTUP_TIMEOUT_S:g}s")

    def _replace(self, slot: int) -> None:
        self._workers[slot].kill()
        self._workers[slot] = _Worker(self._ctx)

    def close(self) -> None:
        """Stop the workers (idempotent)."""
        if self._closed:
            return
        self._closed = True
        for w in self._workers:
            try:
                w.conn.send(None)
            except (OSError, EOFError):
                pass
        for w in self._workers:
            w.proc.join(timeout=2)
            w.kill()

    def __enter__(self) -> RewardPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


def summarize(results: Sequence[RewardResult]) -> dict[str, float]:
    """Reward-pool metrics: infra failures, timeouts, grader time, and each extra dim's mean."""
    seconds = [r.seconds for r in results]
    cpu = [r.cpu_seconds for r in results]
    metrics = {
        "reward/infra_failures": float(sum(not r.valid for r in results)),
        "reward/timeouts": float(sum((r.error or "").startswith("timeout") for r in results)),
        "reward/grader_s/mean": sum(seconds) / len(seconds) if seconds else 0.0,
        "reward/grader_s/max": max(seconds, default=0.0),
        "reward/grader_cpu_s/mean": sum(cpu) / len(cpu) if cpu else 0.0,
        "reward/grader_cpu_s/sum": sum(cpu),
    }
    dims: dict[str, list[float]] = {}
    for r in results:
        if r.valid:
            for k, v in r.dims.items():
                dims.setdefault(k, []).append(v)
    for k, values in sorted(dims.items()):
        metrics[f"reward/{k}/mean"] = sum(values) / len(values)
    return metrics


def dims_BxK(results: Sequence[RewardResult]) -> np.ndarray | None:
    """[B, K] per-dimension rewards (K = every dimension a valid result reported, sorted by
    name; a row without one scores 0 on it), for estimators that take them (GDPO); None when
    no grader reported dimensions."""
    keys = sorted({k for r in results if r.valid for k in r.dims})
    if not keys:
        return None
    return np.asarray([[r.dims.get(k, 0.0) if r.valid else 0.0 for k in keys] for r in results],
                      np.float32)  # fmt: skip
