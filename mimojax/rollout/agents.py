"""The registry of agent loops and what every loop of one rollout shares (settings, context).

Loops register here by name (`register_agent_loop`); `mimojax.rollout.agent_loop` imports every
loop module and runs them.
"""

from __future__ import annotations

import dataclasses

from mimojax.engine.client import AsyncEngineClient
from mimojax.engine.sampling import SamplingParams, sample_key
from mimojax.registry import Registry
from mimojax.rollout.chat import ChatRenderer
from mimojax.rollout.tools import ToolSettings

AGENT_LOOPS = Registry("agent loop")


def register_agent_loop(name: str, *aliases: str):
    """Decorator registering `async fn(ctx, example, group, sample) -> Trajectory`."""
    return AGENT_LOOPS.register(name, *aliases)


@dataclasses.dataclass(frozen=True)
class AgentSettings:
    """Per-trajectory limits of multi-turn loops (config `rollout.agent.*`)."""

    default: str = "single_turn"  # the loop of rows without an `agent` field
    max_turns: int = 4  # model turns per trajectory
    max_tool_calls: int = 8  # tool calls per trajectory
    max_response_tokens: int = 512  # model + observation tokens after the prompt
    max_wall_s: float = 120.0  # wall-clock seconds per trajectory
    reuse_kv: bool = True  # later turns continue the earlier turns' KV (prefill new tokens only)
    tools: ToolSettings = ToolSettings()


@dataclasses.dataclass
class AgentContext:
    """What every loop of one rollout shares."""

    client: AsyncEngineClient
    tokenizer: object
    renderer: ChatRenderer
    sampling: SamplingParams
    settings: AgentSettings
    request_id_base: int

    @property
    def engine(self):
        return self.client.engine

    def request_id(self, group: int) -> int:
        """The same id the batched single-turn path gives prompt `group` (same samples)."""
        return self.request_id_base + group

    def key(self, group: int, sample: int, turn: int = 0):
        """Turn 0 draws like the batched path; later turns from their own fold of the key."""
        path = (self.request_id(group), sample) + ((turn,) if turn else ())
        return sample_key(self.sampling.seed, *path)


def agent_name(example: dict, settings: AgentSettings) -> str:
    """The loop that runs `example`: its `agent` field, else the config's default."""
    return example.get("agent") or settings.default
