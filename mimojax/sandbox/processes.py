"""Runs one sandbox command: resource limits, capped output, wall-clock kill, and the verdict.

`mimojax.sandbox.bwrap` builds the command (bubblewrap or not); this module only supervises it.
"""

from __future__ import annotations

import dataclasses
import math
import os
import resource
import selectors
import signal
import subprocess
import tempfile
import time

# The fixed vocabulary of SandboxResult.violation (documented in mimojax/sandbox/bwrap.py).
TIMEOUT = "timeout"
CPU_LIMIT = "cpu limit"
MEMORY_LIMIT = "memory limit"
PROCESS_LIMIT = "process limit"
FILE_SIZE_LIMIT = "file size limit"
OUTPUT_LIMIT = "output limit"

# stderr evidence that a limit refused something; only read when the program failed or was
# stopped, so a program that prints these words and exits 0 is not flagged.
_MEMORY_SIGNS = (b"MemoryError", b"Cannot allocate", b"cannot allocate", b"std::bad_alloc",
                 b"out of memory")  # fmt: skip
_FILE_SIZE_SIGNS = (b"File too large",)  # EFBIG where SIGXFSZ is ignored (Python ignores it)
_PROCESS_SIGNS = (b"Resource temporarily unavailable", b"fork: retry", b"can't fork",
                  b"Cannot fork")  # fmt: skip

# After the program ends (or is killed), how long a pipe still held open by a straggler may
# keep us reading. Inside bubblewrap the pid namespace dies with the program, so this is only
# reached unsandboxed.
_DRAIN_GRACE_S = 0.5


@dataclasses.dataclass
class Limits:
    """Per-run resource limits (seconds, MiB, counts, bytes)."""

    timeout_s: float = 5.0
    cpu_s: float | None = None  # None: timeout_s
    memory_mb: int = 512
    max_processes: int = 32
    max_output_bytes: int = 64 * 1024
    max_file_bytes: int = 64 * 1024 * 1024

    def cpu_limit_s(self) -> int:
        """The RLIMIT_CPU soft limit in whole seconds (at least 1)."""
        return max(1, math.ceil(self.timeout_s if self.cpu_s is None else self.cpu_s))

    def rlimits(self, with_nproc: bool) -> list[tuple[int, int, int]]:
        """(resource, soft, hard) triples; the hard CPU limit is 1 s past the soft (SIGXCPU)."""
        cpu = self.cpu_limit_s()
        mem = int(self.memory_mb) << 20
        out = [
            (resource.RLIMIT_CPU, cpu, cpu + 1),
            (resource.RLIMIT_AS, mem, mem),
            (resource.RLIMIT_FSIZE, self.max_file_bytes, self.max_file_bytes),
            (resource.RLIMIT_CORE, 0, 0),  # SIGXCPU would otherwise dump a core in the work dir
        ]
        if with_nproc:
            out.append((resource.RLIMIT_NPROC, self.max_processes, self.max_processes))
        return out

    def prlimit_args(self, prlimit: str, with_nproc: bool) -> list[str]:
        """`prlimit --cpu=S:H ... --` applying `rlimits` to the command after it."""
        names = {
            resource.RLIMIT_CPU: "cpu",
            resource.RLIMIT_AS: "as",
            resource.RLIMIT_FSIZE: "fsize",
            resource.RLIMIT_CORE: "core",
            resource.RLIMIT_NPROC: "nproc",
        }
        flags = [f"--{names[r]}={s}:{h}" for r, s, h in self.rlimits(with_nproc)]
        return [prlimit, *flags, "--"]


@dataclasses.dataclass
class SandboxResult:
    """What one sandboxed run did; exit_code < 0 means killed by signal -exit_code."""

    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool
    violation: str | None
    wall_s: float
    cpu_s: float
    stdout_bytes: bytes = b""
    stderr_bytes: bytes = b""

    @property
    def ok(self) -> bool:
        """Exit code 0 and no violation."""
        return self.exit_code == 0 and self.violation is None


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def supervise(
    argv: list[str],
    *,
    env: dict[str, str],
    cwd: str,
    stdin: bytes | None,
    limits: Limits,
    signal_in_exit_code: bool,
    preexec_rlimits: list[tuple[int, int, int]] | None = None,
    popen_kw: dict | None = None,
) -> SandboxResult:
    """Runs argv to its end or a limit and classifies why it stopped.

    signal_in_exit_code: the launcher reports a child's death by signal N as exit 128+N
    (bubblewrap does); it is turned back into -N.
    """
    preexec = None
    if preexec_rlimits:

        def preexec() -> None:
            for res, soft, hard in preexec_rlimits:
                resource.setrlimit(res, (soft, hard))

    with tempfile.TemporaryFile() as stdin_f:
        # A file, not a pipe: no writer thread, and a program that never reads cannot block us.
        stdin_f.write(stdin or b"")
        stdin_f.seek(0)
        t0 = time.monotonic()
        proc = subprocess.Popen(
            argv,
            stdin=stdin_f,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=cwd,
            start_new_session=True,  # one group to kill, away from the caller's terminal
            preexec_fn=preexec,
            **(popen_kw or {}),
        )
    bufs = {proc.stdout.fileno(): bytearray(), proc.stderr.fileno(): bytearray()}
    stopped: str | None = None  # why we killed it: TIMEOUT or OUTPUT_LIMIT
    status = rusage = None
    end_t = None  # when the program ended or was killed
    sel = selectors.DefaultSelector()
    try:
        for fd in bufs:
            os.set_blocking(fd, False)
            sel.register(fd, selectors.EVENT_READ)
        deadline = t0 + limits.timeout_s
        # Until it has exited and both pipes are closed: a program may close its stdout and
        # carry on, and a straggler may hold a pipe after the program has gone.
        while sel.get_map() or status is None:
            now = time.monotonic()
            if stopped is None and status is None and now >= deadline:
                stopped, end_t = TIMEOUT, now
                _kill_group(proc.pid)
            if end_t is not None and now - end_t > _DRAIN_GRACE_S:
                break
            wait_s = 0.05 if end_t is not None else max(0.0, min(deadline - now, 0.1))
            for key, _ in sel.select(timeout=wait_s):
                try:
                    data = os.read(key.fd, 65536)
                except BlockingIOError:
                    continue
                if not data:
                    sel.unregister(key.fd)
                    continue
                buf = bufs[key.fd]
                room = limits.max_output_bytes - len(buf)
                buf += data[: max(room, 0)]
                if len(data) > room and stopped is None:
                    stopped = OUTPUT_LIMIT
                    end_t = end_t or time.monotonic()
                    _kill_group(proc.pid)
            if status is None:
                # WNOWAIT: the leader stays a zombie, so its group id cannot be reused before
                # we kill whatever the program left in that group.
                info = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
                if info is not None:
                    end_t = end_t or time.monotonic()
                    _kill_group(proc.pid)
                    _, status, rusage = os.wait4(proc.pid, 0)
    finally:
        sel.close()
        if status is None:
            _kill_group(proc.pid)
            _, status, rusage = os.wait4(proc.pid, 0)
            end_t = end_t or time.monotonic()
        proc.returncode = os.waitstatus_to_exitcode(status)
        proc.stdout.close()
        proc.stderr.close()
    code = proc.returncode
    if signal_in_exit_code and 128 < code <= 128 + 64:
        code = -(code - 128)
    cpu_used = rusage.ru_utime + rusage.ru_stime
    out_b, err_b = (bytes(b) for b in bufs.values())
    return SandboxResult(
        exit_code=code,
        stdout=out_b.decode("utf-8", errors="replace"),
        stderr=err_b.decode("utf-8", errors="replace"),
        timed_out=stopped == TIMEOUT,
        violation=classify(code, stopped, err_b, cpu_used, limits.cpu_limit_s()),
        wall_s=end_t - t0,
        cpu_s=cpu_used,
        stdout_bytes=out_b,
        stderr_bytes=err_b,
    )


def classify(
    exit_code: int, stopped: str | None, stderr: bytes, cpu_used: float, cpu_limit: int
) -> str | None:
    """The one violation that best explains how a run ended (None: it ended on its own)."""
    sig = -exit_code if exit_code < 0 else None
    if sig == signal.SIGXCPU or (
        stopped is None and sig == signal.SIGKILL and cpu_used >= cpu_limit - 0.05
    ):
        return CPU_LIMIT
    if sig == signal.SIGXFSZ:
        return FILE_SIZE_LIMIT
    if exit_code != 0 or stopped is not None:
        tail = stderr[-8192:]
        if any(s in tail for s in _FILE_SIZE_SIGNS):
            return FILE_SIZE_LIMIT
        if any(s in tail for s in _MEMORY_SIGNS):
            return MEMORY_LIMIT
        if any(s in tail for s in _PROCESS_SIGNS):
            return PROCESS_LIMIT
    if stopped is not None:
        return stopped
    if sig is not None:
        return f"killed by signal {sig}"
    return None
