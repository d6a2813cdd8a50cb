"""Misbehaving graders for the reward pool and trainer tests ("tests.reward_fixtures:NAME").

Workers import them by module path, so the repo root must be on PYTHONPATH (the tests set it).
"""

import os
import time


def raises(response, ground_truth, extra):
    raise RuntimeError("grader bug")


def hangs(response, ground_truth, extra):
    time.sleep(3600)


def exits(response, ground_truth, extra):
    os._exit(3)  # the worker process dies mid-item


def returns_nan(response, ground_truth, extra):
    return float("nan")


def returns_text(response, ground_truth, extra):
    return "good"


def no_score(response, ground_truth, extra):
    return {"correct": 1.0}


def length_with_dims(response, ground_truth, extra):
    """score = len(response); dims: a numeric `half` and a non-numeric `note` (dropped)."""
    return {"score": len(response), "half": len(response) / 2, "note": "text"}


def echo_extra(response, ground_truth, extra):
    return float(extra["weight"])


def length_mod(response, ground_truth, extra):
    """score = (len(response) mod 5) / 4: varies inside groups, so advantages are non-zero."""
    return (len(response) % 5) / 4.0


def const_or_length_mod(response, ground_truth, extra):
    """1.0 for rows with extra.const (every sample scores the same: a group without signal),
    else `length_mod` (varies inside groups)."""
    return 1.0 if extra.get("const") else length_mod(response, ground_truth, extra)


def flat_score_varied_dims(response, ground_truth, extra):
    """The same score for every response, but two dimensions that vary with its length: only an
    estimator that reads the dimensions (GDPO) sees a signal."""
    return {"score": 0.5, "odd": float(len(response) % 2), "mod3": (len(response) % 3) / 2.0}


def needs_an_extra(response, ground_truth, extra):
    from mimojax.extras import require

    require("mimojax_test_absent_module", "music", "the fixture world")
    return 1.0
