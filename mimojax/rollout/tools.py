"""Tools an agent can call: a name, a JSON schema, and a blocking function; one ToolEnv per sample.

A task world registers a factory `make(example, settings) -> ToolEnv` under its env name
(`@register_tool_env("code")`). The agent loop builds one ToolEnv per trajectory, so tools can
share per-trajectory state (a sandbox session and its files), lists the tools to the model
through the chat template (`schemas()`), and runs each call in a worker thread: a slow tool of
one sample never blocks another sample's decoding. A bad call (unknown tool, arguments that do
not match the schema, a tool that raises) becomes an error observation, never an exception.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import time
from collections.abc import Callable, Mapping, Sequence

import jsonschema

from mimojax.extras import MissingExtraError
from mimojax.registry import Registry

TOOL_ENVS = Registry("tool env")
_MAX_OBSERVATION_CHARS = 4000


def register_tool_env(name: str, *aliases: str):
    """Decorator registering `make(example, settings) -> ToolEnv` for an env name."""
    return TOOL_ENVS.register(name, *aliases)


@dataclasses.dataclass(frozen=True)
class ToolSettings:
    """Limits every world's tools share (from the run config's `sandbox.*` keys)."""

    timeout_s: float = 5.0  # wall-clock limit of one tool call's sandboxed process
    memory_mb: int = 512
    allow_unsandboxed: bool = False  # run model code without bubblewrap (logged on every call)
    max_observation_chars: int = _MAX_OBSERVATION_CHARS


@dataclasses.dataclass(frozen=True)
class Tool:
    """One callable tool: `fn(**arguments) -> str` (blocking; runs in a worker thread)."""

    name: str
    description: str
    parameters: Mapping  # JSON schema of the arguments object
    fn: Callable[..., str]

    def schema(self) -> dict:
        """The OpenAI/Hermes function schema the chat template lists to the model."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": dict(self.parameters),
            },
        }


@dataclasses.dataclass
class ToolOutcome:
    """What one call produced: the observation text, and the error kind if it failed."""

    text: str
    # None | "unknown_tool" | "bad_arguments" | "tool_exception" | "tool_error" (the tool
    # rejected its input with an "Error: ..." observation, e.g. a bad calculator expression)
    error: str | None = None
    seconds: float = 0.0


class ToolEnv:
    """The tools of one trajectory and the state they share; close() releases it."""

    def __init__(
        self,
        tools: Sequence[Tool],
        *,
        artifacts: Callable[[], dict[str, str]] | None = None,
        close: Callable[[], None] | None = None,
        max_observation_chars: int = _MAX_OBSERVATION_CHARS,
    ):
        names = [t.name for t in tools]
        if len(set(names)) != len(names):
            raise ValueError(f"ToolEnv: duplicate tool names in {names}")
        self.tools = {t.name: t for t in tools}
        self._artifacts = artifacts
        self._close = close
        self._max_chars = max_observation_chars

    def schemas(self) -> list[dict]:
        """Every tool's schema, in registration order."""
        return [t.schema() for t in self.tools.values()]

    def call_sync(self, name: str, arguments) -> ToolOutcome:
        """Runs one call in this thread; errors become error observations."""
        start = time.perf_counter()
        tool = self.tools.get(name)
        if tool is None:
            known = ", ".join(self.tools) or "none"
            return ToolOutcome(f"Error: unknown tool {name!r}; tools: {known}", "unknown_tool")
        if not isinstance(arguments, Mapping):
            return ToolOutcome(f"Error: arguments of {name} must be a JSON object", "bad_arguments")
        try:
            jsonschema.validate(dict(arguments), dict(tool.parameters))
        except jsonschema.ValidationError as err:
            return ToolOutcome(f"Error: bad arguments for {name}: {err.message}", "bad_arguments")
        try:
            text = str(tool.fn(**arguments))
            error = "tool_error" if text.startswith("Error:") else None
        except MissingExtraError:  # the world's extra is not installed: the run's problem
            raise
        except Exception as err:  # a tool bug is the sample's problem, not the run's
            text, error = f"Error: {name} failed: {type(err).__name__}: {err}", "tool_exception"
        if len(text) > self._max_chars:
            text = (
                text[: self._max_chars] + f"\n... [truncated {len(text) - self._max_chars} chars]"
            )
        return ToolOutcome(text, error, time.perf_counter() - start)

    async def call(self, name: str, arguments) -> ToolOutcome:
        """Runs one call in a worker thread, so the event loop keeps decoding other samples."""
        return await asyncio.to_thread(self.call_sync, name, arguments)

    def artifacts(self) -> dict[str, str]:
        """Files the trajectory produced (e.g. the sandbox work dir), for the grader."""
        return dict(self._artifacts()) if self._artifacts is not None else {}

    def close(self) -> None:
        """Releases per-trajectory state (idempotent)."""
        close, self._close = self._close, None
        if close is not None:
            close()


def make_tool_env(example: Mapping, settings: ToolSettings) -> ToolEnv:
    """The ToolEnv of `example["env"]` (importing `mimojax.envs.<env>` to register it)."""
    env = example["env"]
    if env not in TOOL_ENVS and str(env).isidentifier():
        try:
            importlib.import_module(f"mimojax.envs.{env}")
        except ModuleNotFoundError as e:
            if e.name != f"mimojax.envs.{env}":
                raise
    return TOOL_ENVS[env](example, settings)
