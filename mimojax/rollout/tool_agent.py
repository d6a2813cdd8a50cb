"""The multi-turn tool agent: generate -> parse tool calls -> run tools -> append observations ->
generate ... until the model answers without a call or a limit ends the trajectory.

Token-in/token-out: the model's ids are appended as sampled (mask 1, with their log-probs);
observations are template-rendered ids between turns (mask 0). With `reuse_kv`, each turn
continues the previous turn's KV and prefills only the ids it has not seen.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import time

from mimojax.rollout.agents import AgentContext, register_agent_loop
from mimojax.rollout.tool_calls import parse_tool_calls
from mimojax.rollout.tools import make_tool_env
from mimojax.rollout.trajectory import Trajectory


@dataclasses.dataclass
class _State:
    """One trajectory in progress."""

    prompt: list[int]
    response: list[int] = dataclasses.field(default_factory=list)
    mask: list[int] = dataclasses.field(default_factory=list)
    logps: list[float] = dataclasses.field(default_factory=list)
    turn_ends: list[int] = dataclasses.field(default_factory=list)
    versions: list[int] = dataclasses.field(default_factory=list)
    token_versions: list[int] = dataclasses.field(default_factory=list)
    texts: list[str] = dataclasses.field(default_factory=list)
    stats: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    kv: object = None
    cached: int = 0

    def append(self, ids, mask: int, logps=None, versions=None):
        last = self.token_versions[-1] if self.token_versions else 0
        self.token_versions += list(versions) if versions is not None else [last] * len(ids)
        self.response += ids
        self.mask += [mask] * len(ids)
        self.logps += list(logps) if logps is not None else [0.0] * len(ids)

    @property
    def history(self) -> list[int]:
        return self.prompt + self.response


def _messages(example: dict) -> list[dict]:
    if example.get("messages"):
        return [dict(m) for m in example["messages"]]
    return [{"role": "user", "content": example["prompt"]}]


def _next_input(ctx: AgentContext, st: _State) -> list[int] | None:
    """Ids the next turn must prefill (only the new ones when the KV carries over); None when
    the history no longer fits the engine."""
    engine, history = ctx.engine, st.history
    if st.kv is not None and engine.fits_continuation(st.cached, len(history) - st.cached):
        return history[st.cached :]
    st.kv, st.cached = None, 0
    return history if len(history) <= engine.max_prefill_length else None


async def _run_calls(env, calls, st: _State, limit: int) -> tuple[list[str], bool]:
    """Observations of one turn's calls; True when the tool-call limit was hit."""
    observations, hit_limit = [], False
    for call in calls:
        if st.stats["tool_calls"] >= limit:
            observations.append(f"Error: tool call limit ({limit}) reached")
            st.stats["tool_errors"] += 1
            st.stats["tool_errors/limit"] += 1
            hit_limit = True
            continue
        st.stats["tool_calls"] += 1
        if call.error is not None:
            observations.append(f"Error: {call.error}")
            st.stats["tool_errors"] += 1
            st.stats["tool_errors/parse"] += 1
            continue
        outcome = await env.call(call.name, call.arguments)
        st.stats["tool_s"] += outcome.seconds
        if outcome.error is not None:
            st.stats["tool_errors"] += 1
            st.stats[f"tool_errors/{outcome.error}"] += 1
        observations.append(outcome.text)
    return observations, hit_limit


@register_agent_loop("tool_agent")
async def tool_agent(ctx: AgentContext, example: dict, group: int, sample: int) -> Trajectory:
    """One multi-turn trajectory with the tools of `example["env"]`."""
    settings, tok = ctx.settings, ctx.tokenizer
    start = time.perf_counter()
    env = await asyncio.to_thread(make_tool_env, example, settings.tools)
    try:
        st = _State(ctx.renderer.prompt_ids(_messages(example), env.schemas()))
        finish = "max_turns"
        for turn in range(settings.max_turns):
            budget = settings.max_response_tokens - len(st.response)
            new_ids = _next_input(ctx, st)
            if new_ids is None:
                finish = "max_context"
                break
            sampling = dataclasses.replace(
                ctx.sampling, max_new_tokens=min(ctx.sampling.max_new_tokens, budget)
            )
            st.stats["prefill_tokens"] += len(new_ids)
            st.stats["history_prefill_tokens"] += len(st.history)
            t_gen = time.perf_counter()
            c = await ctx.client.generate(
                (ctx.request_id(group), sample, turn),
                new_ids,
                sampling,
                keys=[ctx.key(group, sample, turn)],
                existing_prefix=st.kv,
                retain_kv=settings.reuse_kv,
            )
            st.stats["gen_s"] += time.perf_counter() - t_gen
            st.kv, st.cached = c.kv, c.cached_length
            versions = c.token_versions or [c.policy_version] * len(c.token_ids)
            st.append(list(c.token_ids), 1, c.logprobs, versions)
            st.versions.append(c.policy_version)
            st.turn_ends.append(len(st.response) - 1)
            text = tok.decode(c.token_ids, skip_special_tokens=True)
            st.texts.append(text)
            if c.finish_reason != "stop":  # "length" (turn or cache budget) or "abort"
                budget_hit = len(st.response) >= settings.max_response_tokens
                finish = "max_tokens" if c.finish_reason == "length" and budget_hit else (
                    c.finish_reason
                )  # fmt: skip
                break
            calls = parse_tool_calls(text)
            if not calls:
                finish = "stop"
                break
            observations, hit_limit = await _run_calls(env, calls, st, settings.max_tool_calls)
            if hit_limit:
                finish = "max_tool_calls"
                break
            if time.perf_counter() - start > settings.max_wall_s:
                finish = "timeout"
                break
            if turn == settings.max_turns - 1:
                break  # the calls ran (their effects count), but no turn is left to read them
            stop_text = tok.decode(c.token_ids[-1:]) if c.token_ids else None
            obs_ids = ctx.renderer.observation_ids(observations, stop_text)
            if len(st.response) + len(obs_ids) >= settings.max_response_tokens:
                finish = "max_tokens"
                break
            st.append(obs_ids, 0)
        artifacts = await asyncio.to_thread(env.artifacts)
    finally:
        await asyncio.to_thread(env.close)
    st.kv = None  # frees the device KV of this trajectory
    st.stats["wall_s"] = time.perf_counter() - start
    return Trajectory(
        prompt_ids=st.prompt,
        response_ids=st.response,
        rollout_logprobs=st.logps,
        response_mask=st.mask,
        policy_version=min(
            [v for v, m in zip(st.token_versions, st.mask) if m]
            or st.versions[:1]
            or [ctx.engine.policy_version]
        ),
        finish_reason=finish,
        group=group,
        sample=sample,
        example=example,
        response_text=st.texts[-1] if st.texts else "",
        turn_ends=st.turn_ends,
        turn_versions=st.versions,
        turn_texts=st.texts,
        artifacts=artifacts,
        agent="tool_agent",
        stats=dict(st.stats),
        token_versions=st.token_versions,
    )
