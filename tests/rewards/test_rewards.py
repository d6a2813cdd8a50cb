"""The reward pool: correct scores in order, and every grader failure is an infra flag."""

import math
import os

import pytest

from mimojax.rewards.pool import RewardPool, RewardResult, get_reward_fn, summarize

FIX = "tests.reward_fixtures"


@pytest.fixture(autouse=True)
def _repo_on_path(monkeypatch):
    # spawned workers import tests.reward_fixtures by module path
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    monkeypatch.setenv("PYTHONPATH", root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    monkeypatch.syspath_prepend(root)


def item(env, response="x", truth="1", **extra):
    return {"env": env, "response": response, "ground_truth": truth, "extra": extra}


@pytest.mark.parametrize("workers", [0, 2])
def test_scores_in_input_order_with_dims(workers):
    items = [item(f"{FIX}:length_with_dims", "a" * n) for n in (3, 1, 4, 1, 5)]
    items.append(item("math", "So the answer is 12.", "12"))
    with RewardPool(num_workers=workers, timeout_s=30) as pool:
        results = pool.score(items)
    assert [r.score for r in results] == [3.0, 1.0, 4.0, 1.0, 5.0, 1.0]
    assert all(r.valid for r in results)
    assert results[0].dims == {"half": 1.5}  # the string "note" is dropped
    assert results[-1].dims == {"correct": 1.0, "format": 1.0}


def test_extra_reaches_the_grader():
    with RewardPool(num_workers=0) as pool:
        (r,) = pool.score([item(f"{FIX}:echo_extra", weight=0.25)])
    assert r.score == 0.25 and r.valid


@pytest.mark.parametrize(
    "name, error",
    [
        ("raises", "RuntimeError: grader bug"),
        ("returns_nan", "non-finite score"),
        ("returns_text", "returned str, not a score"),
        ("no_score", "without 'score'"),
    ],
)
@pytest.mark.parametrize("workers", [0, 1])
def test_bad_grader_output_is_invalid_not_zero_reward(name, error, workers):
    with RewardPool(num_workers=workers, timeout_s=30) as pool:
        good, bad = pool.score([item("math", "7", "7"), item(f"{FIX}:{name}")])
    assert good.valid and good.score == 1.0
    assert not bad.valid and bad.score == 0.0 and error in bad.error


def test_hang_and_crash_are_infra_failures_and_the_pool_recovers():
    items = [
        item(f"{FIX}:hangs"),
        item(f"{FIX}:exits"),
        item("math", "3", "3"),
        item("math", "4", "5"),
    ]
    with RewardPool(num_workers=2, timeout_s=2.0) as pool:
        results = pool.score(items)
        assert [r.valid for r in results] == [False, False, True, True]
        assert results[0].error.startswith("timeout after 2s") and results[0].seconds >= 2.0
        assert "died (exit code 3)" in results[1].error
        assert [r.score for r in results[2:]] == [1.0, 0.0]
        # replaced workers grade the next batch normally
        again = pool.score([item("math", "10", "10")] * 3)
    assert [r.score for r in again] == [1.0] * 3
    metrics = summarize(results)
    assert metrics["reward/infra_failures"] == 2.0 and metrics["reward/timeouts"] == 1.0
    assert metrics["reward/correct/mean"] == 0.5  # over the valid items only


def test_unknown_env_is_one_clear_error():
    with RewardPool(num_workers=0) as pool, pytest.raises(ValueError, match="reward env 'nosuch'"):
        pool.score([item("nosuch")])


@pytest.mark.parametrize(
    "bad, match",
    [
        ({"response": "x", "ground_truth": "1"}, "reward item 0: missing key 'env'"),
        ({"env": 3, "response": "x", "ground_truth": "1"}, "'env' must be a str"),
        ("text", "expected a dict"),
    ],
)
def test_malformed_items_name_the_row(bad, match):
    with RewardPool(num_workers=0) as pool, pytest.raises((ValueError, TypeError), match=match):
        pool.score([bad])


def test_pool_arguments_are_checked():
    with pytest.raises(ValueError, match="num_workers"):
        RewardPool(num_workers=-1)
    with pytest.raises(ValueError, match="timeout_s"):
        RewardPool(num_workers=0, timeout_s=0)
    with pytest.raises(ValueError, match="spawn"):
        RewardPool(num_workers=0, mp_context="fork")


def test_module_path_lookup_and_summarize_hand_case():
    assert get_reward_fn("math")("12", "12")["score"] == 1.0
    with pytest.raises(Exception, match="has no function 'nope'"):
        get_reward_fn(f"{FIX}:nope")
    results = [
        RewardResult(1.0, True, {"format": 1.0}, seconds=0.5),
        RewardResult(0.0, True, {"format": 0.0}, seconds=1.5),
        RewardResult(0.0, False, error="timeout after 1s", seconds=1.0),
    ]
    m = summarize(results)
    assert m["reward/infra_failures"] == 1.0 and m["reward/timeouts"] == 1.0
    assert math.isclose(m["reward/grader_s/mean"], 1.0) and m["reward/grader_s/max"] == 1.5
    assert m["reward/format/mean"] == 0.5
