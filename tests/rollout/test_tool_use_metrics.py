"""Tool-use metrics of a step and of an evaluation, against hand-counted trajectories."""

from types import SimpleNamespace

import pytest

from mimojax.rollout.agent_loop import agent_loop_metrics, tool_use_metrics


def _traj(calls, errors=0, agent="tool_agent", tool_s=0.0):
    stats = {"tool_calls": calls, "tool_errors": errors, "tool_s": tool_s, "wall_s": 1.0}
    if errors:
        stats["tool_errors/tool_error"] = errors
    return SimpleNamespace(
        agent=agent, stats=stats, turn_ends=[0] * (calls + 1), finish_reason="stop"
    )


def test_rates_and_the_share_of_correct_answers_that_used_the_tool():
    trajs = [_traj(1), _traj(2, errors=1), _traj(0), _traj(0), _traj(1, tool_s=0.5)]
    scores = [1.0, 1.0, 1.0, 0.0, 0.0]
    m = tool_use_metrics(trajs, scores)
    assert m["tool_call_rate"] == pytest.approx(3 / 5)
    assert m["valid_call_rate"] == pytest.approx(3 / 4)  # 4 calls, 1 rejected
    assert m["correct_with_tool"] == pytest.approx(2 / 3)  # 3 correct, 2 of them called
    step = agent_loop_metrics(trajs, scores)
    assert step["agent_loop/tool_call_rate"] == m["tool_call_rate"]
    assert step["agent_loop/tool_errors/tool_error"] == 1.0
    assert step["timing_s/tools"] == pytest.approx(0.5)
    assert step["tool_call_counts/mean"] == pytest.approx(4 / 5)


def test_single_turn_rows_are_left_out_and_no_calls_is_zero_not_nan():
    assert tool_use_metrics([_traj(0, agent="single_turn")]) == {}
    m = tool_use_metrics([_traj(0)], [0.0])
    assert m == {"tool_call_rate": 0.0, "valid_call_rate": 0.0, "correct_with_tool": 0.0}
    assert "correct_with_tool" not in tool_use_metrics([_traj(1)])  # no scores given
