"""envs/general: rubric rules on good and bad answers through the trainer's reward pool, judge
score parsing, a judge that is down is an infra failure, and a real judge (a live
`mimojax serve` on loopback) whose reply, whatever it is, is scored as parse_score reads it."""

import json
import os

import pytest

from mimojax.envs.general.judge import PROMPT, parse_score
from mimojax.envs.general.tasks import DATA_DIR, split_rows
from mimojax.envs.general.tasks_data import TASKS_BY_ID, TEST_IDS
from mimojax.rewards.pool import RewardPool, summarize
from tests.live_server import free_port, live_server

GOOD_BAD = {
    "capital_egypt": ("The capital of Egypt is Cairo.", "Egypt's capital?\nProbably Alexandria."),
    "list_primary": ("- red\n- blue\n- yellow", "Red, green and purple are nice colors."),
    "json_person": (
        '{"name": "Ada", "age": 36, "email": "ada@example.com"}',
        "name: Ada, age: 36",
    ),
    "explain_gravity": (
        "Gravity is the pull between things with mass: the Earth's mass attracts you, so "
        "when you jump you come back down.",
        "As an AI I cannot explain that.",
    ),
}


def _item(task_id, response, judge=None):
    row = {**TASKS_BY_ID[task_id]}
    extra = {"task": row["prompt"], "rubric": row["rubric"]}
    if judge:
        extra["judge"] = judge
    return {"env": "general", "response": response, "ground_truth": task_id, "extra": extra}


def test_shipped_split_is_fixed_and_held_out():
    train, test = split_rows()
    assert len(test) == len(TEST_IDS) == 9 and len(train) == 27
    assert not {r["ground_truth"] for r in train} & TEST_IDS
    on_disk = [json.loads(line) for line in open(DATA_DIR / "general_test.jsonl")]
    assert on_disk == test


def test_good_and_bad_answers_through_the_reward_pool(monkeypatch):
    monkeypatch.setenv("MIMOJAX_JUDGE_URL", "none")  # rule items only (workers inherit it)
    items = [_item(t, ans) for t, pair in GOOD_BAD.items() for ans in pair]
    with RewardPool(num_workers=1, timeout_s=30) as pool:
        results = pool.score(items)
    for i, task in enumerate(GOOD_BAD):
        good, bad = results[2 * i], results[2 * i + 1]
        assert good.valid and bad.valid, (good.error, bad.error)
        assert good.score == 1.0, (task, good.dims)
        assert bad.score < 0.5, (task, bad.dims)
    # weights: capital_egypt's bad answer meets only max_words (1 of 5 weight)
    assert results[1].score == pytest.approx(1 / 5)
    assert results[1].dims["rule_must_mention"] == 0.0 and results[1].dims["rule_format"] == 0.0
    assert results[7].dims["rule_forbidden"] == 0.0
    metrics = summarize(results)
    assert metrics["reward/judge_calls/mean"] == 0.0 and "reward/rule_format/mean" in metrics


@pytest.mark.parametrize(
    "reply, score",
    [
        ("SCORE: 7", 0.7),
        ("score = 10", 1.0),
        ("**Score:** 3/5", 0.6),
        ("I'd give it 8 out of 10.", 0.8),
        ("  9\n", 0.9),
        ("Yes, it does.", 1.0),
        ("no", 0.0),
        ("SCORE: 0", 0.0),
        ("Score: 12", None),  # off the scale
        ("7/5", None),
        ("The answer does not say that Cairo is the capital.", 0.0),
        ("Answer: no.", 0.0),
        ("The answer is fine.", None),
        ("", None),
        ("\n\n\n", None),
    ],
)
def test_parse_score(reply, score):
    got = parse_score(reply)
    assert got == (None if score is None else pytest.approx(score))


def test_judge_down_is_an_infra_failure_not_a_zero(monkeypatch):
    monkeypatch.delenv("MIMOJAX_JUDGE_URL", raising=False)
    dead = {"url": f"http://127.0.0.1:{free_port()}/v1", "retries": 1, "rate_per_s": 0}
    with RewardPool(num_workers=0, timeout_s=30) as pool:
        [r] = pool.score([_item("capital_egypt", GOOD_BAD["capital_egypt"][0], dead)])
    assert not r.valid and r.score == 0.0
    assert "gave no score after 2 calls" in r.error


def test_real_judge_on_a_live_server(monkeypatch):
    """The judge is a live `mimojax serve` (a tiny random model): whatever it replies, the
    grader scores exactly what parse_score reads from that reply, or flags an infra failure."""
    import openai

    monkeypatch.delenv("MIMOJAX_JUDGE_URL", raising=False)
    monkeypatch.delenv("MIMOJAX_JUDGE_MODEL", raising=False)
    task = TASKS_BY_ID["capital_egypt"]
    answer = GOOD_BAD["capital_egypt"][0]
    with live_server("tiny-random-llama", "--max-context", "512", "--max-prompt", "384") as url:
        cfg = {"url": url, "model": "tiny-random-llama", "retries": 0, "rate_per_s": 0}
        with RewardPool(num_workers=1, timeout_s=120) as pool:
            [r] = pool.score([_item("capital_egypt", answer, cfg)])
        criterion = task["rubric"][-1]["criterion"]
        client = openai.OpenAI(base_url=url, api_key="none", max_retries=0)
        reply = client.chat.completions.create(
            model="tiny-random-llama",
            temperature=0,
            max_tokens=24,
            messages=[
                {
                    "role": "user",
                    "content": PROMPT.format(
                        task=task["prompt"], answer=answer, criterion=criterion
                    ),
                }
            ],  # fmt: skip
        )
    expected = parse_score(reply.choices[0].message.content)
    if expected is None:
        assert not r.valid and "unreadable reply" in r.error
    else:
        assert r.valid and r.dims["judge"] == pytest.approx(expected)
        assert r.dims["judge_calls"] == 1 and r.dims["judge_tokens"] == reply.usage.total_tokens
        assert r.dims["judge_s"] > 0
        assert r.score == pytest.approx((4 * 1.0 + expected) / 5)
    assert os.environ.get("MIMOJAX_JUDGE_URL") is None
