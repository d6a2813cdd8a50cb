"""The tool-use warm-up: expert traces, their SFT rendering = the tool agent's rendering at RL
time (token for token, mask for mask), and the warm-up's settings and restart rules."""

import asyncio
import json
import os
import sys

import pytest

from mimojax.data.prompts import DataError
from mimojax.engine.sampling import SamplingParams
from mimojax.envs.math.expert import expert_chats, held_out_questions
from mimojax.envs.math.tools import evaluate
from mimojax.models.registry import smollm2_gguf_path
from mimojax.models.tokenizer import qwen_tokenizer, tokenizer_from_gguf
from mimojax.rollout import agent_loop  # noqa: F401  (registers the loops)
from mimojax.rollout.agents import AGENT_LOOPS, AgentContext, AgentSettings
from mimojax.rollout.chat import ChatRenderer
from mimojax.rollout.tool_calls import parse_tool_calls
from mimojax.sft.chat_sft import read_chat_rows, tokenize_chat, tokenize_row, tool_schemas
from mimojax.sft.warmup import WarmupSettings, read_done, restart, write_done, write_expert_rows

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "rollout"))
from scripted_policy import ScriptedClient  # noqa: E402

SAMPLING = SamplingParams(temperature=1.0, seed=1, max_new_tokens=400)


@pytest.fixture(scope="module", params=["smollm2", "qwen2"])
def tok(request):
    """SmolLM2's plain ChatML template (Hermes system text, user-side tool responses) and
    Qwen2's native tool template (its own tool listing and `tool` role)."""
    if request.param == "smollm2":
        return tokenizer_from_gguf(smollm2_gguf_path())
    return qwen_tokenizer("qwen2")


def _agent_trajectory(tok, row):
    """The real tool agent over the real calculator, the policy replaying the trace's assistant
    turns as the ids the warm-up trains on (each turn's text ids + the turn's stop token)."""
    renderer = ChatRenderer(tok)
    end = renderer.turn_end_id()
    turns = [
        list(tok.encode(m["content"], add_special_tokens=False)) + [end]
        for m in row["messages"]
        if m["role"] == "assistant"
    ]
    client = ScriptedClient({(0, 0): turns})
    ctx = AgentContext(client, tok, renderer, SAMPLING, AgentSettings(max_turns=4), 0)
    user = next(m["content"] for m in row["messages"] if m["role"] == "user")
    example = {"prompt": user, "env": "math", "ground_truth": "0", "extra": {}, "prompt_ids": [1]}
    return asyncio.run(AGENT_LOOPS["tool_agent"](ctx, example, 0, 0))


def test_a_trace_renders_to_the_tool_agents_ids_token_for_token(tok):
    rows = expert_chats(40, seed=3)
    with_retry = [r for r in rows if sum(m["role"] == "tool" for m in r["messages"]) == 2]
    assert with_retry, "some traces recover from a rejected expression"
    for row in rows[:6] + with_retry[:2]:
        ids, mask = tokenize_row(tok, row)
        traj = _agent_trajectory(tok, row)
        assert traj.finish_reason == "stop"
        assert ids == traj.prompt_ids + traj.response_ids
        assert mask == [0] * len(traj.prompt_ids) + traj.response_mask
        # The tool turns of the trace are what the calculator returned in the agent loop.
        assert [t for t in traj.turn_texts[:-1] if parse_tool_calls(t)] == traj.turn_texts[:-1]
        assert traj.response_text == row["messages"][-1]["content"]
    # The warm-up's listing is the agent's: the calculator schema, in the prompt once.
    assert tool_schemas("math")[0]["function"]["name"] == "calculator"


def test_the_plain_template_renders_a_smollm2_trace_the_same_way():
    """An independent rendering: the whole chat through the template (system listing + user-
    side tool responses) gives the same ids; only the mask's turn ends differ in one place."""
    tok = tokenizer_from_gguf(smollm2_gguf_path())
    row = expert_chats(1, seed=5)[0]
    schemas = tool_schemas("math")
    from mimojax.rollout.chat import TOOLS_SYSTEM

    listing = TOOLS_SYSTEM.format(tools="\n".join(json.dumps(t) for t in schemas))
    plain = [{"role": "system", "content": listing}]
    for m in row["messages"]:
        if m["role"] == "tool":
            content = f"<tool_response>\n{m['content']}\n</tool_response>"
            plain.append({"role": "user", "content": content})
        else:
            plain.append(dict(m))
    ids_plain, _ = tokenize_chat(tok, plain)
    ids, _ = tokenize_row(tok, row)
    assert ids_plain[: len(ids)] == ids
    assert tok.decode(ids_plain[len(ids) :]).strip() == ""  # the template's trailing newline


def test_expert_traces_are_varied_correct_and_never_held_out():
    rows = expert_chats(300, seed=0)
    held_out = held_out_questions()
    assert len(held_out) >= 400  # both held-out files
    users = [r["messages"][0]["content"] for r in rows]
    assert len(set(users)) == 300 and not set(users) & held_out
    calls = [m["content"] for r in rows for m in r["messages"] if m["role"] == "assistant"][::1]
    answers = {
        r["messages"][-1]["content"].replace(r["messages"][-2]["content"], "V") for r in rows
    }
    assert {"V", "The answer is V.", "Answer: V"} <= answers
    assert any(u.startswith(("What is", "Compute", "Calculate")) for u in users)  # bare
    assert any(" has " in u for u in users)  # word problems
    errors = 0
    for r in rows:
        msgs = r["messages"]
        for call_msg, tool_msg in zip(msgs[1::2], msgs[2::2]):
            (call,) = parse_tool_calls(call_msg["content"])
            assert call.error is None and call.name == "calculator"
            assert tool_msg["content"] == evaluate(call.arguments["expression"])  # real output
            errors += tool_msg["content"].startswith("Error:")
        assert msgs[-1]["role"] == "assistant" and not parse_tool_calls(msgs[-1]["content"])
    assert 0.05 * len(rows) < errors < 0.3 * len(rows)
    assert len({c.split("<tool_call>")[0] for c in calls}) >= 4  # several call phrasings
    assert expert_chats(20, seed=0) == rows[:20]  # deterministic from the seed


def test_the_tool_prompt_is_compact():
    tok = tokenizer_from_gguf(smollm2_gguf_path())
    renderer = ChatRenderer(tok)
    bare = renderer.prompt_ids([{"role": "user", "content": "What is 2+2?"}], [])
    listed = renderer.prompt_ids(
        [{"role": "user", "content": "What is 2+2?"}], tool_schemas("math")
    )
    assert len(listed) - len(bare) < 160  # the code world's schemas cost 430-660


def test_write_expert_rows_and_the_done_marker(tmp_path):
    s = WarmupSettings(expert="math", num_chats=12, seed=1)
    path = str(tmp_path / "t.jsonl")
    assert write_expert_rows(s, path) == 12
    rows = read_chat_rows(path)
    assert [r["env"] for r in rows] == ["math"] * 12
    wdir = str(tmp_path / "warmup")
    restart(wdir)
    assert read_done(wdir) is None
    write_done(wdir, {"warmup_s": 1.5})
    assert read_done(wdir) == {"warmup_s": 1.5}
    (tmp_path / "warmup" / "junk").write_text("x")
    restart(wdir)  # an unfinished (or redone) warm-up starts from an empty directory
    assert os.listdir(wdir) == []


@pytest.mark.parametrize(
    "group, key",
    [
        ({"expert": "math", "steps": 0}, "warmup.steps"),
        ({"expert": "math", "lr": 0.0}, "warmup.lr"),
        ({"expert": "math", "stepz": 3}, "warmup.stepz"),
    ],
)
def test_bad_warmup_settings_name_the_key(group, key):
    with pytest.raises(DataError, match=key.replace(".", r"\.")):
        WarmupSettings.from_dict(group)


def test_a_world_without_an_expert_names_the_key(tmp_path):
    with pytest.raises(DataError, match=r"warmup.expert='general'.*\['code', 'math'\]"):
        write_expert_rows(WarmupSettings(expert="general"), str(tmp_path / "x.jsonl"))


def _bwrap_ok() -> bool:
    from mimojax.sandbox import bwrap

    return bwrap.available()


@pytest.mark.skipif(not _bwrap_ok(), reason="the code world's tools need bubblewrap")
def test_code_expert_traces_come_from_reference_solutions_run_in_the_sandbox():
    from mimojax.envs.code.expert import expert_chats as code_chats
    from mimojax.envs.code.tasks_data import TASKS, TEST_IDS

    refs = {t.reference: t for t in TASKS}
    rows = code_chats(12, seed=0, error_share=0.5)
    recovered = 0
    for row in rows:
        msgs = row["messages"]
        calls = [parse_tool_calls(m["content"]) for m in msgs if m["role"] == "assistant"]
        written = [c[0].arguments["content"] for c in calls if c and c[0].name == "write_file"]
        task = refs[written[-1]]  # the last file written is a reference solution
        assert task.task_id not in TEST_IDS
        reports = [
            m["content"] for m in msgs if m["role"] == "tool" and "visible tests" in m["content"]
        ]
        assert reports[-1].startswith(
            f"{len(task.visible)}/{len(task.visible)} visible tests passed"
        )
        if len(written) == 2:  # a wrong first attempt, caught by the visible tests
            assert written[0] == task.wrong and "FAIL" in reports[0]
            recovered += 1
        assert not calls[-1]  # the last turn answers
    assert recovered >= 1
    # Rendered for the warm-up as the tool agent renders code rows (its three tools listed).
    tok = qwen_tokenizer("qwen2")
    ids, mask = tokenize_row(tok, rows[0])
    assert sum(mask) > 0 and '"name": "run_tests"' in tok.decode(ids)
