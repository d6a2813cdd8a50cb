"""A fake policy for agent-loop tests: replays fixed turns (token ids) through the client API.

It records every call, so a test can check exactly which ids the agent loop fed back.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time

from mimojax.engine.scheduler import Completion
from mimojax.rollout.tools import TOOL_ENVS, Tool, ToolEnv, register_tool_env


@dataclasses.dataclass
class FakeEngine:
    """The engine attributes an agent loop reads."""

    max_prefill_length: int = 4096
    max_cache_length: int = 8192
    policy_version: int = 7

    def fits_continuation(self, prior_length: int, new_length: int) -> bool:
        return 1 <= new_length <= self.max_prefill_length and (
            prior_length + new_length < self.max_cache_length
        )


class ScriptedClient:
    """`generate` returns turn k of the script (one script per (group, sample))."""

    def __init__(self, scripts: dict, engine: FakeEngine | None = None, delay_s: float = 0.0):
        self.scripts = scripts  # (group, sample) -> list of token-id lists, one per turn
        self.engine = engine or FakeEngine()
        self.delay_s = delay_s
        self.calls: list[dict] = []

    async def generate(
        self, request_id, prompt_ids, sampling, n=1, *, keys=None, existing_prefix=None,
        retain_kv=False,
    ):  # fmt: skip
        _, sample, turn = request_id
        group = next(g for g, s in self.scripts if s == sample and self._owner(g, request_id))
        ids = list(self.scripts[(group, sample)][turn])
        ids = ids[: sampling.max_new_tokens]
        prior = 0 if existing_prefix is None else existing_prefix[1]
        self.calls.append(
            dict(request_id=request_id, prompt_ids=list(prompt_ids), prior=prior, keys=keys)
        )
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        cached = prior + len(prompt_ids) + len(ids) - 1
        stopped = len(ids) == len(self.scripts[(group, sample)][turn])
        return Completion(
            token_ids=ids,
            logprobs=[-0.25 - 0.01 * i for i in range(len(ids))],
            finish_reason="stop" if stopped else "length",
            policy_version=self.engine.policy_version + turn,
            policy_version_last=self.engine.policy_version + turn,
            prompt_length=len(prompt_ids),
            kv=("kv", cached) if retain_kv else None,
            cached_length=cached if retain_kv else 0,
        )

    def _owner(self, group, request_id) -> bool:
        return request_id[0] == group  # tests use request_id_base = 0

    async def aclose(self):
        pass


def _echo_env(example, settings):
    notes = []

    def add(a: int, b: int) -> str:
        return str(a + b)

    def remember(text: str) -> str:
        notes.append(text)
        return "ok"

    def slow() -> str:
        time.sleep(0.3)
        return "slept"

    int_arg = {"type": "integer"}
    return ToolEnv(
        [
            Tool(
                "add",
                "Add two integers.",
                {
                    "type": "object",
                    "properties": {"a": int_arg, "b": int_arg},
                    "required": ["a", "b"],
                    "additionalProperties": False,
                },
                add,
            ),  # fmt: skip
            Tool(
                "remember",
                "Keep a note.",
                {
                    "type": "object",
                    "properties": {"text": {"type": "string"}},
                    "required": ["text"],
                },
                remember,
            ),  # fmt: skip
            Tool("slow", "Take a while.", {"type": "object", "properties": {}}, slow),
        ],
        artifacts=lambda: {"notes.txt": "\n".join(notes)},
    )


def register_echo_env() -> None:
    """Registers the "echo_test" tool env (add, remember, slow) once per process."""
    if "echo_test" not in TOOL_ENVS:
        register_tool_env("echo_test")(_echo_env)
