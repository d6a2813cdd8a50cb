"""Grader of the general world: a weighted rubric. Rule items are checked in code
(rubric.py); "judge" items go to the judge endpoint (judge.py), whose failure raises (an infra
failure for the reward pool, not a zero).

Returns {"score": weighted mean in [0, 1], "rule_<kind>": mean of that kind's items,
"judge": mean judge score, "judge_calls", "judge_tokens", "judge_s", "format"}; the pool logs
every numeric entry as reward/<name>/mean, so judge cost shows up as reward/judge_*.
"""

from __future__ import annotations

from collections import defaultdict

from mimojax.envs.general import judge as judge_lib
from mimojax.envs.general.rubric import check
from mimojax.envs.general.tasks_data import TASKS_BY_ID
from mimojax.rewards.pool import register_reward


def rubric_of(ground_truth: str, extra: dict) -> tuple[list[dict], str]:
    """(rubric items, task text) of a row: its extra, else the shipped task `ground_truth`."""
    rubric, task = extra.get("rubric"), extra.get("task")
    if not rubric and ground_truth in TASKS_BY_ID:
        rubric, task = TASKS_BY_ID[ground_truth]["rubric"], TASKS_BY_ID[ground_truth]["prompt"]
    if not rubric:
        raise ValueError(f"general grader: no rubric for task {ground_truth!r}")  # a data bug
    return list(rubric), str(task or "")


@register_reward("general")
def grade(response: str, ground_truth: str, extra: dict | None = None) -> dict:
    """The rubric's weighted score; per-kind dimensions; the judge's calls, tokens, seconds."""
    extra = dict(extra or {})
    rubric, task = rubric_of(str(ground_truth), extra)
    response = str(response).strip()
    cfg = judge_lib.settings(extra.get("judge"))
    judge_off = str(cfg["url"]).lower() == "none"
    by_kind: dict[str, list[float]] = defaultdict(list)
    total = weight_sum = 0.0
    calls = tokens = 0
    seconds = 0.0
    for item in rubric:
        weight = float(item.get("weight", 1.0))
        if item["kind"] == "judge":
            if judge_off:
                continue
            if not response:
                score = 0.0  # nothing to judge: no call
            else:
                verdict = judge_lib.judge(task, response, item["criterion"], cfg)
                score = verdict["score"]
                calls += verdict["calls"]
                tokens += verdict["tokens"]
                seconds += verdict["seconds"]
            by_kind["judge"].append(score)
        else:
            score = check(item, response) if response else 0.0
            by_kind[f"rule_{item['kind']}"].append(score)
        total += weight * score
        weight_sum += weight
    out = {"score": total / weight_sum if weight_sum else 0.0}
    out.update({k: sum(v) / len(v) for k, v in sorted(by_kind.items())})
    out.update(
        judge_calls=float(calls),
        judge_tokens=float(tokens),
        judge_s=seconds,
        format=float(bool(response)),
    )
    return out
