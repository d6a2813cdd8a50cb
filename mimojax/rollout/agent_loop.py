"""Agent loops, registered by name and chosen per data row (`agent`) or by the config's default.

`rollout(...)` is what the trainer and evaluation call. A batch whose rows are all `single_turn`
takes the batched offline path (one prefill per prompt feeds its n samples). Otherwise every
sample is its own asyncio task on one AsyncEngineClient: while one waits for a tool, the others
keep decoding. A loop is `async fn(ctx, example, group, sample) -> Trajectory`; the registry and
what loops share live in `mimojax.rollout.agents`. Importing this module registers every loop.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Sequence

from mimojax.engine.client import AsyncEngineClient
from mimojax.engine.sampling import SamplingParams
from mimojax.rollout import tool_agent  # noqa: F401  (registers "tool_agent")
from mimojax.rollout.agents import (
    AGENT_LOOPS,
    AgentContext,
    AgentSettings,
    agent_name,
    register_agent_loop,
)
from mimojax.rollout.chat import ChatRenderer
from mimojax.rollout.single_turn import rollout_single_turn
from mimojax.rollout.trajectory import Trajectory


def rollout(
    engine,
    tokenizer,
    examples: Sequence[dict],
    n: int,
    sampling: SamplingParams,
    settings: AgentSettings | None = None,
    *,
    request_id_base: int = 0,
    prompt_overflow: str = "error",
    stats: dict | None = None,
) -> list[Trajectory]:
    """n trajectories per example, group-major, each from its row's agent loop."""
    settings = settings or AgentSettings()
    names = [agent_name(ex, settings) for ex in examples]
    for name in set(names):
        AGENT_LOOPS[name]  # noqa: B018  (an unknown name fails before any generation)
    if all(name == "single_turn" for name in names):
        return rollout_single_turn(
            engine,
            tokenizer,
            examples,
            n,
            sampling,
            request_id_base=request_id_base,
            prompt_overflow=prompt_overflow,
            stats=stats,
        )

    async def run_all():
        client = AsyncEngineClient(engine, prompt_overflow)
        ctx = AgentContext(
            client, tokenizer, ChatRenderer(tokenizer), sampling, settings, request_id_base
        )
        tasks = [
            AGENT_LOOPS[name](ctx, ex, g, j)
            for g, (ex, name) in enumerate(zip(examples, names))
            for j in range(n)
        ]
        try:
            return await asyncio.gather(*tasks)
        finally:
            await client.aclose()
            if stats is not None:
                stats.update(client.scheduler.stats)

    return list(asyncio.run(run_all()))


@register_agent_loop("single_turn")
async def single_turn(ctx: AgentContext, example: dict, group: int, sample: int) -> Trajectory:
    """One generation: the same tokens as the batched path for the same request id."""
    prompt = list(example["prompt_ids"])
    c = await ctx.client.generate(
        (ctx.request_id(group), sample), prompt, ctx.sampling, keys=[ctx.key(group, sample)]
    )
    return Trajectory.from_completion(c, example, group, sample, ctx.tokenizer)


def tool_use_metrics(trajs: Sequence[Trajectory], scores: Sequence[float] | None = None) -> dict:
    """How the agents used their tools: the share of trajectories that called one, the share of
    calls that ran cleanly, and (with `scores`) the share of correct answers (score >= 1) that
    called a tool. Keys without a prefix; the caller adds `agent_loop/` or `val-aux/<env>/`."""
    pairs = [
        (t, s) for t, s in zip(trajs, scores or [None] * len(trajs)) if t.agent != "single_turn"
    ]
    if not pairs:
        return {}
    calls = sum(t.stats.get("tool_calls", 0) for t, _ in pairs)
    errors = sum(t.stats.get("tool_errors", 0) for t, _ in pairs)
    out = {
        "tool_call_rate": sum(t.stats.get("tool_calls", 0) > 0 for t, _ in pairs) / len(pairs),
        "valid_call_rate": (calls - errors) / calls if calls else 0.0,
    }
    if scores is not None:
        correct = [t for t, s in pairs if s is not None and s >= 1.0]
        out["correct_with_tool"] = (
            sum(t.stats.get("tool_calls", 0) > 0 for t in correct) / len(correct)
            if correct
            else 0.0
        )
    return out


def agent_loop_metrics(
    trajs: Sequence[Trajectory], scores: Sequence[float] | None = None
) -> dict[str, float]:
    """num_turns/*, tool_call_counts/*, agent_loop/* over a step's multi-turn trajectories;
    `scores` (one per trajectory) adds agent_loop/correct_with_tool."""
    agents = [t for t in trajs if t.agent != "single_turn"]
    if not agents:
        return {}
    out: dict[str, float] = {
        f"agent_loop/{k}": v for k, v in tool_use_metrics(trajs, scores).items()
    }

    def stats(prefix, values):
        values = [float(v) for v in values]
        out[f"{prefix}/mean"] = sum(values) / len(values)
        out[f"{prefix}/max"] = max(values)
        out[f"{prefix}/min"] = min(values)

    stats("num_turns", [len(t.turn_ends) for t in agents])
    stats("tool_call_counts", [t.stats.get("tool_calls", 0) for t in agents])
    totals = collections.Counter()
    for t in agents:
        totals.update({k: v for k, v in t.stats.items() if isinstance(v, int | float)})
    per_traj = len(agents)
    for key in ("tool_s", "gen_s", "wall_s"):
        out[f"agent_loop/{key}/mean"] = totals[key] / per_traj
    out["timing_s/tools"] = totals["tool_s"]  # summed over trajectories; inside gen
    out["agent_loop/wall_s/max"] = max(t.stats.get("wall_s", 0.0) for t in agents)
    calls = max(totals["tool_calls"], 1)
    out["agent_loop/tool_errors"] = float(totals["tool_errors"])
    out["agent_loop/tool_error_rate"] = totals["tool_errors"] / calls
    kinds = ("parse", "unknown_tool", "bad_arguments", "tool_exception", "tool_error", "limit")
    for kind in kinds:
        out[f"agent_loop/tool_errors/{kind}"] = float(totals[f"tool_errors/{kind}"])
    reasons = collections.Counter(t.finish_reason for t in agents)
    for reason, count in reasons.items():
        out[f"agent_loop/finish/{reason}"] = count / per_traj
    if totals["history_prefill_tokens"]:
        out["agent_loop/prefill_tokens/mean"] = totals["prefill_tokens"] / per_traj
        out["agent_loop/prefill_saved_ratio"] = 1.0 - (
            totals["prefill_tokens"] / totals["history_prefill_tokens"]
        )
    return out
