"""Runs a target program on an input in the sandbox (target_runner.py) and reads the verdict.

out = run_target(PROGRAMS_BY_NAME["greeter"], "SAY %n\\n", flag=None)
out.crashed, out.flag_leaked, out.returncode
"""

from __future__ import annotations

import dataclasses
import json
import secrets
import signal
from pathlib import Path

from mimojax.envs.cyber.catalog import INPUT_FILE, Program
from mimojax.sandbox.bwrap import SandboxResult, SandboxSession, run_untrusted

RUNNER_SOURCE = Path(__file__).with_name("target_runner.py").read_text()
TARGET_TIMEOUT_S = 2.0
MEMORY_MB = 1024  # gcc's cc1 needs more than a Python test does
_BUILD_AND_SLACK_S = 6.0
FATAL_SIGNALS = frozenset(
    int(s) for s in (signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS, signal.SIGFPE,
                     signal.SIGILL, signal.SIGTRAP)
)  # fmt: skip


class TargetError(RuntimeError):
    """The target could not be built or run: an infra problem, not the input's fault."""


@dataclasses.dataclass(frozen=True)
class TargetOutcome:
    """One run of the target on one input."""

    returncode: int | None  # None: no verdict (the run was cut short); < 0: killed by -code
    timed_out: bool = False
    sanitizer: bool = False  # a sanitizer / glibc fatal-check report on stderr
    flag_leaked: bool = False
    stdout: str = ""
    stderr: str = ""
    note: str = ""

    @property
    def crashed(self) -> bool:
        """Killed by a fatal signal, or stopped by a sanitizer report (a hang is no crash)."""
        if self.returncode is None or self.timed_out:
            return False
        if -self.returncode in FATAL_SIGNALS:
            return True
        return self.sanitizer and self.returncode != 0

    def describe(self) -> str:
        """The outcome as a tool observation."""
        if self.returncode is None:
            head = f"no result: {self.note}"
        elif self.timed_out:
            head = "the program ran out of time and was killed"
        elif self.returncode < 0:
            try:
                name = signal.Signals(-self.returncode).name
            except ValueError:
                name = f"signal {-self.returncode}"
            head = f"the program was killed by {name}"
        else:
            head = f"exit code {self.returncode}"
        lines = [head, f"crashed: {'yes' if self.crashed else 'no'}"]
        lines.append(f"flag leaked: {'yes' if self.flag_leaked else 'no'}")
        lines.append("stdout:\n" + (self.stdout or "(empty)"))
        if self.stderr:
            lines.append("stderr:\n" + self.stderr)
        return "\n".join(lines)


def run_target(
    program: Program,
    input_text: str | None,
    *,
    flag: str | None,
    session: SandboxSession | None = None,
    timeout_s: float = TARGET_TIMEOUT_S,
    memory_mb: int = MEMORY_MB,
    allow_unsandboxed: bool = False,
) -> TargetOutcome:
    """Builds (C) and runs `program` on `input_text`: in a fresh sandbox holding its shipped
    files and `flag`, or in `session` (whose input.txt is used when input_text is None)."""
    nonce = secrets.token_hex(16)
    spec = {
        "language": program.language,
        "source": program.source_file,
        "input": INPUT_FILE,
        "timeout_s": timeout_s,
        "flag": flag,
    }
    stdin = nonce + "\n" + json.dumps(spec)
    clock = timeout_s + _BUILD_AND_SLACK_S
    if session is not None:
        if input_text is not None:
            session.write_file(INPUT_FILE, input_text)
        result = session.run(RUNNER_SOURCE, "python", timeout_s=clock, stdin=stdin)
    else:
        files = {**program.agent_files(flag or ""), INPUT_FILE: input_text or ""}
        result = run_untrusted(
            RUNNER_SOURCE,
            "python",
            timeout_s=clock,
            memory_mb=memory_mb,
            files=files,
            stdin=stdin,
            allow_unsandboxed=allow_unsandboxed,
        )
    return _parse(result, nonce, program)


def _parse(result: SandboxResult, nonce: str, program: Program) -> TargetOutcome:
    """Trusts only nonce-stamped lines (the target may run the model's code)."""
    msgs = []
    prefix = nonce + " "
    for line in result.stdout.splitlines():
        if line.startswith(prefix):
            try:
                msgs.append(json.loads(line[len(prefix) :]))
            except json.JSONDecodeError:
                pass
    if not any(m.get("ready") for m in msgs):
        raise TargetError(
            f"cyber target runner did not start (exit {result.exit_code}, violation "
            f"{result.violation}): {result.stderr[-500:]!r}"
        )
    for m in msgs:
        if "compile_error" in m:
            raise TargetError(f"{program.source_file} did not build: {m['compile_error'][-800:]}")
        if "returncode" in m:
            return TargetOutcome(
                returncode=int(m["returncode"]),
                timed_out=bool(m.get("timed_out")),
                sanitizer=bool(m.get("sanitizer")),
                flag_leaked=bool(m.get("flag_leaked")),
                stdout=str(m.get("stdout", "")),
                stderr=str(m.get("stderr", "")),
            )
    # Started but gave no verdict: the input's run took the sandbox down with it.
    why = result.violation or f"exit {result.exit_code}"
    return TargetOutcome(returncode=None, note=f"the sandbox stopped ({why})")
