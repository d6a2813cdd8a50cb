"""Sandboxed execution of untrusted, model-written code under bubblewrap (`bwrap`).

    from mimojax.sandbox.bwrap import run_untrusted
    r = run_untrusted("print(input())", stdin="hi", timeout_s=5, memory_mb=512)
    r.exit_code, r.stdout, r.stderr, r.timed_out, r.violation

Each run is a fresh `bwrap` process with its own user, pid, network, ipc, uts, cgroup and mount
namespaces, as uid 65534: no network (only its own loopback); a read-only root holding /usr,
/bin, /lib*, the dynamic linker's /etc files and a made-up /etc/passwd; its own /proc and a
read-only /dev; size-capped tmpfs /tmp and /dev/shm; the work dir read-write at /sandbox (the
only host path it can write, or see beyond those system dirs); a scrubbed environment; no
nested user namespaces. Its pid 1 is a small sh that runs the program; when it exits, the
kernel kills everything left in the pid namespace, so nothing the program starts outlives it.
Limits (prlimit inside): CPU time, address space, processes (RLIMIT_NPROC, counted per user
namespace, so per run), file size, no core files; plus a wall-clock kill and capped output.
As root, bwrap itself runs as uid 65534 so that the process limit binds (uid 0 is exempt).
RAM the program can hold: memory_mb of address space + memory_mb in /tmp + 64 MiB in /dev/shm.

`violation` is None when the program ended on its own (whatever its exit code), else one of:
    "timeout"             the wall clock passed timeout_s; the sandbox was killed (timed_out)
    "cpu limit"           CPU time passed cpu_s (SIGXCPU, or SIGKILL at the hard limit)
    "memory limit"        an allocation was refused under memory_mb (MemoryError, ENOMEM)
    "process limit"       a fork was refused under max_processes (EAGAIN)
    "file size limit"     a file grew past max_file_bytes (SIGXFSZ or EFBIG)
    "output limit"        stdout or stderr passed max_output_bytes: truncated, sandbox killed
    "killed by signal N"  any other death by signal N
The memory, process and file-size cases are read from stderr (after a failure), so a program
that hides the error is not flagged; if it then runs out the clock the violation is "timeout".
exit_code < 0 is death by signal -exit_code (an exit status 129-192 from the sandbox reads so).

Not contained: disk use of the work dir (each file is capped, their number is not), the CPU
share of a run, the kernel's attack surface (no seccomp filter). cpu_s is ~0 after a kill.

Without bwrap, `run_untrusted` raises SandboxUnavailable unless allow_unsandboxed=True (config
key `sandbox.allow_unsandboxed`), which runs with only rlimits (no process limit), the timeout,
a temp dir and a scrubbed environment, and logs a warning on every call.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import threading

from mimojax.sandbox.files import SANDBOX_UID, WORK, Box, checked_rel, inside, snapshot, write
from mimojax.sandbox.processes import Limits, SandboxResult, supervise

__all__ = [
    "SandboxResult",
    "SandboxSession",
    "SandboxUnavailable",
    "available",
    "check_available",
    "run_untrusted",
]

log = logging.getLogger(__name__)

BWRAP: str | None = shutil.which("bwrap")  # read at call time; tests point it elsewhere
# Set by the trainer from `sandbox.allow_unsandboxed`, so graders in reward-pool workers (which
# call run_untrusted with the default) follow the run's choice.
ALLOW_UNSANDBOXED_ENV = "MIMOJAX_ALLOW_UNSANDBOXED"


def _allowed(allow_unsandboxed: bool) -> bool:
    return allow_unsandboxed or os.environ.get(ALLOW_UNSANDBOXED_ENV) == "1"


PRLIMIT: str | None = shutil.which("prlimit")  # util-linux; inside the sandbox via /usr or /bin
PROG = "/run/prog"  # the program's dir inside: read-only, outside the work dir
LANGUAGES = {"python": ".py", "bash": ".sh", "sh": ".sh"}
INSTALL_HINT = (
    "install it with `apt-get install bubblewrap` (`sudo apt-get install bubblewrap` when not "
    "root), or set sandbox.allow_unsandboxed=True to run model-written code WITHOUT isolation"
)
_ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "localtime")
_probe_lock = threading.Lock()
_probed: dict[str, tuple[str, bool]] = {}  # bwrap path -> (mode, modern)


class SandboxUnavailable(RuntimeError):
    """bubblewrap is missing or cannot create namespaces here."""


def _bwrap_path(bwrap_path: str | None) -> str:
    path = bwrap_path or BWRAP
    if not path or not os.access(path, os.X_OK):
        raise SandboxUnavailable(f"bubblewrap (bwrap) not found at {path!r}: {INSTALL_HINT}")
    return path


def _interpreter() -> tuple[str, list[str]]:
    """The system python3 and any host dir it needs bound (never the venv: 65534 may not see it)."""
    if os.path.exists("/usr/bin/python3"):
        return "/usr/bin/python3", []
    base = os.path.realpath(sys.base_prefix)
    return os.path.join(base, "bin", "python3"), ([] if base.startswith("/usr/") else [base])


def _base_args(modern: bool, tmp_bytes: int) -> list[str]:
    """bwrap's flags shared by every run; modern: bwrap >= 0.8 (--disable-userns, --size)."""
    args = ["--unshare-all", "--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID)]
    args += ["--disable-userns"] if modern else []
    args += ["--die-with-parent", "--new-session", "--hostname", "sandbox", "--clearenv"]
    # No bwrap init: pid 1 is our sh wrapper (see _run_in_box), which the program cannot kill
    # (the kernel drops its signals to its namespace's init) and bwrap itself waits for, so
    # the program's CPU time reaches us through bwrap's rusage.
    args += ["--as-pid-1"]
    args += ["--ro-bind", "/usr", "/usr", "--proc", "/proc", "--dev", "/dev"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = "/" + name
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    for name in _ETC:
        args += ["--ro-bind-try", "/etc/" + name, "/etc/" + name]
    # tmpfs pages are outside the address-space limit, so /tmp and /dev/shm get their own caps
    # where bwrap can set them; the rest of /dev (a tmpfs the sandbox user owns) is read-only.
    if modern:
        args += ["--size", str(tmp_bytes), "--tmpfs", "/tmp"]
        args += ["--size", str(min(tmp_bytes, 64 << 20)), "--tmpfs", "/dev/shm"]
    else:
        args += ["--tmpfs", "/tmp"]
    return [*args, "--remount-ro", "/dev"]


def _popen_user(mode: str) -> dict:
    if mode == "drop":
        return {"user": SANDBOX_UID, "group": SANDBOX_UID, "extra_groups": []}
    return {}


def check_available(bwrap_path: str | None = None) -> None:
    """Raises SandboxUnavailable unless bwrap runs here (probed once per bwrap path)."""
    bwrap = _bwrap_path(bwrap_path)
    with _probe_lock:
        if bwrap in _probed:
            return
        # As root, bwrap runs as uid 65534 ("drop") so that RLIMIT_NPROC binds the sandbox (the
        # kernel exempts real uid 0); "root" is the fallback where unprivileged user namespaces
        # are forbidden. Older bwrap (Ubuntu 22.04: 0.6) lacks --disable-userns and --size.
        modes = ["drop", "root"] if os.geteuid() == 0 else ["user"]
        prlimit = Limits().prlimit_args(PRLIMIT or "/usr/bin/prlimit", True)
        errors = []
        for mode in modes:
            for modern in (True, False):
                try:
                    r = subprocess.run(
                        [bwrap, *_base_args(modern, 1 << 20), "--", *prlimit, "/bin/sh", "-c", ":"],
                        capture_output=True,
                        timeout=30,
                        env={"PATH": "/usr/bin:/bin"},
                        **_popen_user(mode),
                    )
                except (OSError, subprocess.SubprocessError) as e:  # e.g. 65534 may not exec it
                    errors.append(f"{type(e).__name__}: {e}")
                    continue
                if r.returncode == 0:
                    if mode == "root":
                        log.warning(
                            "sandbox: bwrap cannot run as uid %d here, so it runs as root and "
                            "the process limit is not enforced (bwrap: %s)",
                            SANDBOX_UID,
                            errors[-1],
                        )
                    _probed[bwrap] = (mode, modern)
                    return
                errors.append(r.stderr.decode(errors="replace").strip())
        raise SandboxUnavailable(
            f"bubblewrap at {bwrap} cannot start a sandbox here (bwrap: {errors[-1]!r}); "
            f"containers often forbid namespaces. Alternatively, {INSTALL_HINT}"
        )


def available(bwrap_path: str | None = None) -> bool:
    """True when bwrap is installed and works here."""
    try:
        check_available(bwrap_path)
    except SandboxUnavailable:
        return False
    return True


def _run_in_box(
    box: Box,
    code: str | None,
    language: str,
    limits: Limits,
    *,
    stdin: str | bytes | None,
    argv: list[str] | None,
    env: dict[str, str] | None,
    entry: str | None,
    allow_unsandboxed: bool,
    bwrap_path: str | None,
) -> SandboxResult:
    if language not in LANGUAGES:
        raise ValueError(f"sandbox language {language!r} is not one of {sorted(LANGUAGES)}")
    if (code is None) == (entry is None):
        raise ValueError("give the sandbox either code or entry (a file from files), not both")
    if entry is not None and not os.path.isfile(inside(box.work, entry)):
        raise ValueError(f"sandbox entry {entry!r} is not a file in the work dir")
    for key in env or {}:
        if not isinstance(key, str) or not key or "=" in key or "\0" in key:
            raise ValueError(f"sandbox env name {key!r} is not valid")
    try:
        bwrap = _bwrap_path(bwrap_path)
        check_available(bwrap)
    except SandboxUnavailable:
        if not _allowed(allow_unsandboxed):
            raise
        bwrap = None
    for name in os.listdir(box.prog):
        os.remove(os.path.join(box.prog, name))
    prog_name = "main" + LANGUAGES[language]
    if code is not None:
        write(box.prog, prog_name, code)
    interp, interp_binds = _interpreter()
    runner = {"python": interp, "bash": "/bin/bash", "sh": "/bin/sh"}[language]
    stdin_b = stdin.encode() if isinstance(stdin, str) else stdin
    args = [str(a) for a in (argv or [])]
    sandbox_env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "TMPDIR": "/tmp",
        "USER": "sandbox",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",  # output written before a kill still reaches us
    }
    if bwrap is None:
        log.warning(
            "sandbox: bubblewrap unavailable; running model-written code NOT SANDBOXED "
            "(allow_unsandboxed=True): it can read host files and use the network"
        )
        prog = os.path.join(box.prog, prog_name) if code is not None else "./" + entry
        sandbox_env.update(HOME=box.work, TMPDIR=box.work, PYTHONPATH=box.work)
        sandbox_env.update(env or {})
        # No RLIMIT_NPROC: outside a user namespace it counts every process of this user.
        wrap = limits.prlimit_args(PRLIMIT, False) if PRLIMIT else []
        return supervise(
            [*wrap, runner, prog, *args],
            env=sandbox_env,
            cwd=box.work,
            stdin=stdin_b,
            limits=limits,
            signal_in_exit_code=False,
            preexec_rlimits=None if PRLIMIT else limits.rlimits(False),
        )
    mode, modern = _probed[bwrap]
    if mode == "drop":
        box.hand_to(SANDBOX_UID)
    sandbox_env.update(HOME=WORK, PYTHONPATH=WORK)
    sandbox_env.update(env or {})
    cmd = [bwrap, *_base_args(modern, int(limits.memory_mb) << 20)]
    for path in interp_binds:
        cmd += ["--ro-bind", path, path]
    cmd += ["--ro-bind", os.path.join(box.etc, "passwd"), "/etc/passwd"]
    cmd += ["--ro-bind", os.path.join(box.etc, "group"), "/etc/group"]
    cmd += ["--bind", box.work, WORK, "--ro-bind", box.prog, PROG, "--chdir", WORK]
    cmd += ["--remount-ro", "/"]  # bwrap's root tmpfs; the mounts on it keep their own flags
    for key, value in sandbox_env.items():
        cmd += ["--setenv", key, str(value)]
    prog = f"{PROG}/{prog_name}" if code is not None else "./" + entry  # "-c" is a file too
    # NPROC is set inside the new user namespace, where it counts this run's processes only.
    # sh stays pid 1 (not exec-ing the program: a command follows it) and reaps orphans while
    # it waits; when it exits the kernel kills whatever is left in the pid namespace.
    cmd += ["--", *limits.prlimit_args(PRLIMIT or "/usr/bin/prlimit", True)]
    cmd += ["/bin/sh", "-c", '"$@"; exit $?', "sh", runner, prog, *args]
    # bwrap gets a scrubbed environment too: with a bwrap init, /proc/1/environ would show it.
    return supervise(
        cmd,
        env={"PATH": "/usr/bin:/bin"},
        cwd="/",
        stdin=stdin_b,
        limits=limits,
        signal_in_exit_code=True,
        popen_kw=_popen_user(mode),
    )


def run_untrusted(
    code: str | None,
    language: str = "python",
    timeout_s: float = 5,
    memory_mb: int = 512,
    files: dict[str, str | bytes] | None = None,
    *,
    stdin: str | bytes | None = None,
    argv: list[str] | None = None,
    cpu_s: float | None = None,
    max_processes: int = 32,
    max_output_bytes: int = 64 * 1024,
    max_file_bytes: int = 64 * 1024 * 1024,
    allow_unsandboxed: bool = False,
    env: dict[str, str] | None = None,
    entry: str | None = None,
    bwrap_path: str | None = None,
) -> SandboxResult:
    """Runs code (or files[entry]) once in a fresh sandbox with its own work dir; see module doc."""
    limits = Limits(timeout_s, cpu_s, memory_mb, max_processes, max_output_bytes, max_file_bytes)
    for path in files or {}:
        checked_rel(path)
    box = Box()
    try:
        for path, content in (files or {}).items():
            write(box.work, path, content)
        return _run_in_box(
            box,
            code,
            language,
            limits,
            stdin=stdin,
            argv=argv,
            env=env,
            entry=entry,
            allow_unsandboxed=allow_unsandboxed,
            bwrap_path=bwrap_path,
        )
    finally:
        box.close()


class SandboxSession:
    """A work dir that persists across sandboxed runs (one per agent trajectory)."""

    def __init__(
        self,
        timeout_s: float = 5,
        memory_mb: int = 512,
        allow_unsandboxed: bool = False,
        files: dict[str, str | bytes] | None = None,
        *,
        cpu_s: float | None = None,
        max_processes: int = 32,
        max_output_bytes: int = 64 * 1024,
        max_file_bytes: int = 64 * 1024 * 1024,
        bwrap_path: str | None = None,
    ) -> None:
        self.limits = Limits(
            timeout_s, cpu_s, memory_mb, max_processes, max_output_bytes, max_file_bytes
        )
        self.allow_unsandboxed = _allowed(allow_unsandboxed)
        self.bwrap_path = bwrap_path
        if not self.allow_unsandboxed:
            check_available(bwrap_path)  # fail at construction, not at the first tool call
        for path in files or {}:
            checked_rel(path)
        self._box: Box | None = Box()
        for path, content in (files or {}).items():
            self.write_file(path, content)

    def _open(self) -> Box:
        if self._box is None:
            raise RuntimeError("SandboxSession is closed")
        return self._box

    @property
    def work_dir(self) -> str:
        """The host path of the work dir (/sandbox inside)."""
        return self._open().work

    def write_file(self, path: str, content: str | bytes) -> None:
        """Writes a file (relative path) into the work dir."""
        write(self._open().work, path, content)

    def read_file(self, path: str) -> str:
        """Reads a work-dir file as text (undecodable bytes replaced)."""
        with open(inside(self._open().work, path), "rb") as f:
            return f.read().decode("utf-8", errors="replace")

    def list_files(self, max_file_bytes: int = 64 * 1024, max_total_bytes: int = 1 << 20) -> dict:
        """{relative path: text} of the work dir's small UTF-8 files (for graders)."""
        return snapshot(self._open().work, max_file_bytes, max_total_bytes)

    def run(
        self,
        code: str | None = None,
        language: str = "python",
        *,
        timeout_s: float | None = None,
        stdin: str | bytes | None = None,
        argv: list[str] | None = None,
        env: dict[str, str] | None = None,
        entry: str | None = None,
    ) -> SandboxResult:
        """Runs code (or entry) in a fresh sandboxed process over this session's work dir."""
        limits = self.limits
        if timeout_s is not None:
            limits = Limits(**{**vars(limits), "timeout_s": timeout_s})
        return _run_in_box(
            self._open(),
            code,
            language,
            limits,
            stdin=stdin,
            argv=argv,
            env=env,
            entry=entry,
            allow_unsandboxed=self.allow_unsandboxed,
            bwrap_path=self.bwrap_path,
        )

    def close(self) -> None:
        """Removes the work dir; later calls raise."""
        if self._box is not None:
            self._box.close()
            self._box = None

    def __enter__(self) -> SandboxSession:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass
