"""Tools of the code world: write_file, run_python, run_tests, over one SandboxSession per
trajectory (created at the first call), whose files are the trajectory's artifacts."""

from __future__ import annotations

import threading
from collections.abc import Mapping

from mimojax.envs.code.harness import run_tests
from mimojax.rollout.tools import Tool, ToolEnv, ToolSettings, register_tool_env
from mimojax.sandbox.bwrap import SandboxSession

MAX_FILE_CHARS = 100_000
MAX_STREAM_CHARS = 1500  # of stdout and of stderr, in one observation


class LazySession:
    """A SandboxSession made at first use (a model that never calls a tool costs nothing)."""

    def __init__(self, settings: ToolSettings, files: Mapping[str, str] | None = None):
        self.settings = settings
        self._files = dict(files or {})
        self._session: SandboxSession | None = None
        self._closed = False
        self._lock = threading.Lock()

    def get(self) -> SandboxSession:
        """The session, created on the first call."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the trajectory's sandbox is closed")
            if self._session is None:
                s = self.settings
                self._session = SandboxSession(
                    timeout_s=s.timeout_s,
                    memory_mb=s.memory_mb,
                    allow_unsandboxed=s.allow_unsandboxed,
                    files=self._files,
                )
            return self._session

    def files(self) -> dict[str, str]:
        """The work dir's text files; before the first call, the files it would start with."""
        with self._lock:
            if self._session is None:
                return {} if self._closed else dict(self._files)
            return self._session.list_files()

    def close(self) -> None:
        """Removes the work dir (idempotent)."""
        with self._lock:
            self._closed = True
            session, self._session = self._session, None
        if session is not None:
            session.close()


def clip(text: str, limit: int = MAX_STREAM_CHARS) -> str:
    """text, cut to its last `limit` characters (tracebacks end with the useful line)."""
    if len(text) <= limit:
        return text
    return f"[... {len(text) - limit} chars cut]\n" + text[-limit:]


def run_report(result) -> str:
    """A sandbox result as an observation: exit code, stop reason, stdout, stderr."""
    head = f"exit code: {result.exit_code}"
    if result.violation:
        head += f" (stopped: {result.violation})"
    parts = [head]
    if result.stdout:
        parts.append("stdout:\n" + clip(result.stdout))
    if result.stderr:
        parts.append("stderr:\n" + clip(result.stderr))
    if not result.stdout and not result.stderr:
        parts.append("(no output)")
    return "\n".join(parts)


def write_file_tool(session: LazySession) -> Tool:
    """write_file(path, content): creates or replaces a file in the work dir."""

    def write_file(path: str, content: str) -> str:
        if len(content) > MAX_FILE_CHARS:
            return f"Error: content is {len(content)} chars; the limit is {MAX_FILE_CHARS}"
        session.get().write_file(path, content)
        return f"wrote {len(content)} chars to {path}"

    return Tool(
        "write_file",
        "Create or overwrite a text file in your working directory.",
        {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "relative path, e.g. solution.py"},
                "content": {"type": "string", "description": "the whole file"},
            },
            "required": ["path", "content"],
            "additionalProperties": False,
        },
        write_file,
    )


def make_tools(example: Mapping, session: LazySession) -> list[Tool]:
    """The code world's tools over one trajectory's session."""
    visible = [str(t) for t in (example.get("extra") or {}).get("visible_tests") or []]

    def run_python(code: str) -> str:
        return run_report(session.get().run(code, "python"))

    def run_visible_tests() -> str:
        if not visible:
            return "This task has no visible tests."
        s = session.get()
        if "solution.py" not in s.list_files():
            return "No solution.py yet: write it with write_file first."
        outcomes = run_tests(visible, session=s)
        passed = sum(o.ok for o in outcomes)
        lines = [f"{passed}/{len(outcomes)} visible tests passed"]
        for o in outcomes:
            lines.append(f"PASS {o.test}" if o.ok else f"FAIL {o.test}\n  {o.error}")
        return "\n".join(lines)

    return [
        write_file_tool(session),
        Tool(
            "run_python",
            "Run Python code in your working directory (it can import solution.py); returns "
            "the exit code, stdout and stderr.",
            {
                "type": "object",
                "properties": {"code": {"type": "string", "description": "Python source"}},
                "required": ["code"],
                "additionalProperties": False,
            },
            run_python,
        ),
        Tool(
            "run_tests",
            "Run the task's visible tests against solution.py; reports which passed.",
            {"type": "object", "properties": {}, "additionalProperties": False},
            run_visible_tests,
        ),
    ]


@register_tool_env("code")
def make(example: Mapping, settings: ToolSettings) -> ToolEnv:
    """The code world's ToolEnv for one trajectory."""
    session = LazySession(settings)
    return ToolEnv(
        make_tools(example, session),
        artifacts=session.files,
        close=session.close,
        max_observation_chars=settings.max_observation_chars,
    )
