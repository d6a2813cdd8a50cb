"""The multi-turn tool agent against a scripted policy: token-in/token-out, masks, limits,
tool errors, and a code-world trajectory graded end to end in the real sandbox."""

import asyncio
import json
import shutil
import time

import pytest
from scripted_policy import ScriptedClient, register_echo_env

from mimojax.engine.sampling import SamplingParams
from mimojax.models.tokenizer import qwen_tokenizer
from mimojax.rollout import agent_loop  # noqa: F401  (registers the loops)
from mimojax.rollout.agents import AGENT_LOOPS, AgentContext, AgentSettings
from mimojax.rollout.chat import ChatRenderer
from mimojax.rollout.tool_calls import format_tool_call, parse_tool_calls
from mimojax.rollout.tools import ToolSettings

register_echo_env()
SAMPLING = SamplingParams(temperature=1.0, seed=1, max_new_tokens=400)


@pytest.fixture(scope="module")
def tok():
    return qwen_tokenizer("qwen2")


def _char_ids(tok, text: str) -> list[int]:
    """One token per character: ids a decode-then-encode round trip would merge."""
    return [i for ch in text for i in tok.encode(ch, add_special_tokens=False)]


def _turn(tok, text: str, stop: bool = True) -> list[int]:
    return _char_ids(tok, text) + ([tok.convert_tokens_to_ids("<|im_end|>")] if stop else [])


def _run(tok, scripts, example, settings=None, delay_s=0.0, reuse=True):
    settings = AgentSettings(**{**(settings or AgentSettings()).__dict__, "reuse_kv": reuse})
    client = ScriptedClient(scripts, delay_s=delay_s)
    ctx = AgentContext(client, tok, ChatRenderer(tok), SAMPLING, settings, 0)
    loop = AGENT_LOOPS["tool_agent"]

    async def main():
        return await asyncio.gather(*(loop(ctx, example, g, s) for g, s in scripts))

    return asyncio.run(main()), client


EXAMPLE = {
    "prompt": "What is 2 + 3?", "env": "echo_test", "ground_truth": "5", "extra": {},
    "prompt_ids": [1],
}  # fmt: skip


def test_ids_fed_back_are_the_ids_generated(tok):
    call = format_tool_call("add", {"a": 2, "b": 3})
    scripts = {(0, 0): [_turn(tok, "Let me add.\n" + call), _turn(tok, "The answer is 5.")]}
    # The scripted ids are not what the tokenizer would produce from their text.
    text = tok.decode(scripts[(0, 0)][0])
    assert tok.encode(text, add_special_tokens=False) != scripts[(0, 0)][0]

    for reuse in (False, True):
        (traj,), client = _run(tok, scripts, EXAMPLE, reuse=reuse)
        turn0, turn1 = scripts[(0, 0)]
        obs = traj.response_ids[len(turn0) : len(traj.response_ids) - len(turn1)]
        assert traj.response_ids == turn0 + obs + turn1
        assert "<tool_response>\n5\n</tool_response>" in tok.decode(obs)
        assert tok.decode(obs).endswith("<|im_start|>assistant\n")
        # response_mask is 1 exactly on model tokens; log-probs ride on them only.
        assert traj.response_mask == [1] * len(turn0) + [0] * len(obs) + [1] * len(turn1)
        assert traj.rollout_logprobs[: len(turn0)] == pytest.approx(
            [-0.25 - 0.01 * i for i in range(len(turn0))]
        )
        assert set(traj.rollout_logprobs[len(turn0) : len(turn0) + len(obs)]) == {0.0}
        assert traj.turn_ends == [len(turn0) - 1, len(traj.response_ids) - 1]
        assert traj.turn_versions == [7, 8] and traj.policy_version == 7
        assert traj.finish_reason == "stop" and traj.response_text == "The answer is 5."
        # What turn 2 was fed: exactly the history (or, with the KV kept, its unseen tail).
        history = traj.prompt_ids + turn0 + obs
        second = client.calls[1]
        if reuse:
            assert second["prior"] == len(traj.prompt_ids) + len(turn0) - 1
            assert second["prompt_ids"] == history[second["prior"] :]
            assert traj.stats["prefill_tokens"] < traj.stats["history_prefill_tokens"]
        else:
            assert second["prompt_ids"] == history and second["prior"] == 0
        assert client.calls[0]["prompt_ids"] == traj.prompt_ids
        # The tools were listed to the model in the prompt.
        assert '"name": "add"' in tok.decode(traj.prompt_ids)


def test_bad_calls_become_counted_error_observations(tok):
    bad_json = "<tool_call>{not json}</tool_call>"
    unknown = format_tool_call("multiply", {"a": 1})
    bad_args = format_tool_call("add", {"a": "two", "b": 3})
    unclosed = '<tool_call>{"name": "add"'
    scripts = {(0, 0): [
        _turn(tok, bad_json + unknown + bad_args), _turn(tok, unclosed), _turn(tok, "5"),
    ]}  # fmt: skip
    (traj,), _ = _run(tok, scripts, EXAMPLE)
    obs_text = tok.decode([t for t, m in zip(traj.response_ids, traj.response_mask) if m == 0])
    assert "not valid JSON" in obs_text and "unknown tool 'multiply'" in obs_text
    assert "bad arguments for add" in obs_text and "unterminated" in obs_text
    s = traj.stats
    assert s["tool_calls"] == 4 and s["tool_errors"] == 4
    assert s["tool_errors/parse"] == 2 and s["tool_errors/unknown_tool"] == 1
    assert s["tool_errors/bad_arguments"] == 1
    assert traj.finish_reason == "stop" and len(traj.turn_ends) == 3


@pytest.mark.parametrize(
    "settings, finish",
    [
        (AgentSettings(max_turns=2), "max_turns"),
        (AgentSettings(max_tool_calls=2), "max_tool_calls"),
        (AgentSettings(max_response_tokens=150), "max_tokens"),
        (AgentSettings(max_wall_s=0.2), "timeout"),
    ],
    ids=["turns", "tool_calls", "tokens", "wall"],
)
def test_each_limit_ends_with_its_own_finish_reason(tok, settings, finish):
    note = format_tool_call("remember", {"text": "x"})
    slow = format_tool_call("slow", {})
    script = [_turn(tok, note), _turn(tok, note + slow), _turn(tok, note), _turn(tok, "done")]
    (traj,), _ = _run(tok, {(0, 0): script}, EXAMPLE, settings)
    assert traj.finish_reason == finish
    # The model's ids are the script's turns, the last one cut where the token budget ended.
    model_ids = [t for t, m in zip(traj.response_ids, traj.response_mask) if m == 1]
    played = [i for turn in script[: len(traj.turn_ends)] for i in turn]
    assert model_ids == played[: len(model_ids)]
    assert len(model_ids) == len(played) or finish == "max_tokens"
    assert len(traj.response_ids) <= settings.max_response_tokens
    # The tools' effects are what the grader sees, whatever ended the trajectory.
    assert traj.artifacts["notes.txt"].startswith("x")
    assert traj.grader_item()["extra"]["artifacts"] == traj.artifacts


def test_a_slow_tool_does_not_block_other_samples(tok):
    slow = format_tool_call("slow", {})
    scripts = {(0, s): [_turn(tok, slow), _turn(tok, "done")] for s in range(4)}
    t0 = time.perf_counter()
    trajs, _ = _run(tok, scripts, EXAMPLE)
    # Four 0.3 s tool calls run in threads side by side, not one after another.
    assert time.perf_counter() - t0 < 1.0
    assert [t.finish_reason for t in trajs] == ["stop"] * 4
    assert all(t.stats["tool_s"] >= 0.3 for t in trajs)


def test_parse_tool_calls_reads_hermes_blocks():
    text = 'a <tool_call>\n{"name": "f", "arguments": "{\\"x\\": 1}"}\n</tool_call> b'
    (call,) = parse_tool_calls(text)
    assert call.name == "f" and call.arguments == {"x": 1} and call.error is None
    assert parse_tool_calls("no calls") == []
    assert json.loads(format_tool_call("g", {"y": [1]}).split("\n")[1])["arguments"] == {"y": [1]}


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bwrap: apt-get install bubblewrap")
@pytest.mark.parametrize("which, expected", [("reference", 1.0), ("wrong", None)])
def test_scripted_code_trajectory_graded_end_to_end(tok, which, expected):
    from mimojax.envs.code.tasks import task_row
    from mimojax.envs.code.tasks_data import TASKS
    from mimojax.rewards.pool import RewardPool

    task = next(t for t in TASKS if t.task_id == "add")
    row = {**task_row(task), "prompt_ids": [1]}
    code = getattr(task, which)
    script = [
        _turn(tok, format_tool_call("write_file", {"path": "solution.py", "content": code})),
        _turn(tok, format_tool_call("run_tests", {})),
        _turn(tok, "I wrote solution.py."),
    ]
    settings = AgentSettings(tools=ToolSettings(timeout_s=5.0))
    (traj,), _ = _run(tok, {(0, 0): script}, row, settings)
    assert traj.finish_reason == "stop" and len(traj.turn_ends) == 3
    assert traj.artifacts["solution.py"] == code
    obs_text = tok.decode([t for t, m in zip(traj.response_ids, traj.response_mask) if m == 0])
    assert "pass" in obs_text.lower()
    with RewardPool(num_workers=0) as pool:
        (result,) = pool.score([traj.grader_item()])
    assert result.valid, result.error
    if expected is not None:
        assert result.score == expected
    else:
        assert result.score < 1.0
    assert result.cpu_seconds > 0.0
