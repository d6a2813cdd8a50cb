"""Stop requests: SIGTERM / SIGINT turn into "stop at the next safe point", not a dead process.

What a spot preemption, a cluster scheduler or `docker stop` sends is SIGTERM, followed by
SIGKILL after a grace period. While `StopRequest` is active, the first SIGTERM or SIGINT only
sets a flag; the trainer polls it between phases, abandons a step that has not started its
update (it re-runs identically after the resume) or finishes one that has, saves a checkpoint
and exits 0. A second signal exits at once (exit code 128 + signal number).

With several JAX processes, JAX's own preemption notifier catches SIGTERM on each host and
`reached_preemption_sync_point(step)` makes every process agree on the same step to stop at, so
all of them save the same checkpoint.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

import jax

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopRequest:
    """Context manager that turns SIGTERM / SIGINT into a polled stop flag (main thread only)."""

    def __init__(self, grace_s: float = 30.0):
        self.grace_s = float(grace_s)
        self.signal_name: str | None = None  # e.g. "SIGTERM" once one arrived
        self._t_signal: float | None = None
        self._previous: dict[int, object] = {}
        self._multihost = False  # set on entry: several JAX processes agree on the stop step

    def __enter__(self) -> StopRequest:
        self._multihost = jax.process_count() > 1
        if threading.current_thread() is threading.main_thread():
            for sig in SIGNALS:
                if sig == signal.SIGTERM and self._multihost:
                    continue  # JAX's preemption notifier owns SIGTERM on every host
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def _handle(self, signum, frame) -> None:
        name = signal.Signals(signum).name
        if self.signal_name is not None:
            print(f"mimojax: second {name}: exiting now without saving", file=sys.stderr)
            os._exit(128 + signum)
        self.signal_name, self._t_signal = name, time.monotonic()
        print(
            f"mimojax: {name}: stopping at the next safe point and saving a checkpoint "
            f"(grace {self.grace_s:.0f} s; send it again to exit at once)",
            file=sys.stderr,
            flush=True,
        )

    @property
    def signalled(self) -> bool:
        """A signal arrived in this process (polled between the phases of a step)."""
        return self.signal_name is not None

    def stop_after(self, step: int) -> bool:
        """Whether to stop after `step`; with several processes, all agree on the same step."""
        if self._multihost:
            from jax.experimental import multihost_utils

            try:
                if multihost_utils.reached_preemption_sync_point(step):
                    self.signal_name = self.signal_name or "preemption"
                    self._t_signal = self._t_signal or time.monotonic()
                    return True
            except RuntimeError:  # jax.distributed started without the preemption service
                pass
            return False
        return self.signalled

    def seconds_since(self) -> float:
        """Seconds since the signal (0 before one arrived)."""
        return 0.0 if self._t_signal is None else time.monotonic() - self._t_signal

    def report(self, step: int, directory: str) -> None:
        """The one line on stderr after a stopped run has saved: what happened, how to resume."""
        took = self.seconds_since()
        late = f" (past the {self.grace_s:.0f} s grace period)" if took > self.grace_s else ""
        print(
            f"mimojax: stopped by {self.signal_name} after step {step}; checkpoint saved "
            f"{took:.1f} s after the signal{late}; run the same command to resume from {directory}",
            file=sys.stderr,
            flush=True,
        )


class StepAbandoned(Exception):
    """Raised at a phase boundary before the update: the step re-runs after the resume."""
