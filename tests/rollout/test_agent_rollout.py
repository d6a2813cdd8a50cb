"""agent_loop.rollout on a real engine: rows pick their loop; single-turn rows give the same
samples on the async path as on the batched one; carrying the KV across turns changes nothing."""

import pytest
from scripted_policy import register_echo_env

from mimojax.engine import JaxEngine
from mimojax.engine.sampling import SamplingParams
from mimojax.models.loader import load_model
from mimojax.models.tokenizer import encode_chat
from mimojax.registry import UnknownNameError
from mimojax.rollout.agent_loop import agent_loop_metrics, rollout
from mimojax.rollout.agents import AgentSettings
from mimojax.rollout.single_turn import rollout_single_turn

register_echo_env()
SAMPLED = SamplingParams(temperature=1.0, seed=5, max_new_tokens=12)


@pytest.fixture(scope="module")
def engine_and_tok():
    model, tok = load_model("tiny-random-qwen2")
    engine = JaxEngine(
        model, tok, max_concurrent_decodes=4, max_prefill_length=256, max_cache_length=512
    )
    return engine, tok


def _row(tok, prompt, env, agent=None):
    messages = [{"role": "user", "content": prompt}]
    return {
        "prompt_ids": encode_chat(tok, messages), "messages": messages, "env": env,
        "ground_truth": "5", "extra": {}, "agent": agent, "prompt": prompt,
    }  # fmt: skip


def test_mixed_batch_runs_each_rows_loop(engine_and_tok):
    engine, tok = engine_and_tok
    rows = [
        _row(tok, "What is 2 + 3?", "math"),
        _row(tok, "Add 2 and 3.", "echo_test", "tool_agent"),
    ]
    trajs = rollout(engine, tok, rows, 2, SAMPLED, request_id_base=40)
    assert [(t.group, t.sample, t.agent) for t in trajs] == [
        (0, 0, "single_turn"), (0, 1, "single_turn"), (1, 0, "tool_agent"), (1, 1, "tool_agent"),
    ]  # fmt: skip
    batched = rollout_single_turn(engine, tok, rows[:1], 2, SAMPLED, request_id_base=40)
    for a, b in zip(trajs[:2], batched):
        assert a.response_ids == b.response_ids
        assert a.stats["wall_s"] > 0 and b.stats["wall_s"] > 0  # measured finish (group wait)
        assert a.rollout_logprobs == pytest.approx(b.rollout_logprobs, abs=1e-5)
    for t in trajs[2:]:
        assert t.turn_ends and sum(t.response_mask) >= len(t.turn_ends)
        assert '"name": "add"' in tok.decode(t.prompt_ids)  # tools listed in its prompt
    metrics = agent_loop_metrics(trajs)
    assert metrics["num_turns/mean"] >= 1 and "agent_loop/wall_s/mean" in metrics


def test_kv_reuse_gives_the_same_trajectories(engine_and_tok):
    engine, tok = engine_and_tok
    rows = [_row(tok, f"Add {i} and 3.", "echo_test", "tool_agent") for i in range(2)]
    greedy = SamplingParams(temperature=0.0, max_new_tokens=10)
    on = rollout(engine, tok, rows, 1, greedy, AgentSettings(reuse_kv=True))
    off = rollout(engine, tok, rows, 1, greedy, AgentSettings(reuse_kv=False))
    assert [t.response_ids for t in on] == [t.response_ids for t in off]


def test_unknown_agent_loop_fails_before_generating(engine_and_tok):
    engine, tok = engine_and_tok
    with pytest.raises(UnknownNameError, match="agent loop 'tool_agnet'.*tool_agent"):
        rollout(engine, tok, [_row(tok, "hi", "math", "tool_agnet")], 1, SAMPLED)
