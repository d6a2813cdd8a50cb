"""A run's headline numbers from WORKDIR/metrics.jsonl: what its compute bought.

No plotting here (report.py renders): this imports without matplotlib, for notebooks, scripts
and the dashboard. The rows come from `mimojax.observe.metrics`, which owns the file's format.
Metric names follow verl. `perf/total_num_tokens` is cumulative, as the trainer logs it.
Held-out accuracy is `val-core/<env>/acc/greedy`; with several envs the headline uses their mean.
"""

from __future__ import annotations

import json
import math
import os
import re

from mimojax.observe.metrics import METRICS_FILE, read_metrics, rows_by_step

GREEDY_RE = re.compile(r"^val-core/(?P<env>.+)/acc/greedy$")
PASSK_RE = re.compile(r"^val-core/(?P<env>.+)/pass@(?P<k>\d+)$")
THRESHOLDS_POINTS = (10, 20, 30)
# Stack order of the timing panel: the trainer's timer phases, in their order within one step.
PHASE_ORDER = ("gen", "reward", "gen_max", "old_log_prob", "ref", "values", "adv")
PHASE_ORDER += ("update_critic", "update_actor", "sync", "save_checkpoint")
# Keys an eval-only row carries besides val-*: the trainer logs its step-0 eval with the wall
# time, and evaluation times itself (outside timing_s/step, so not a phase of the step).
_NOT_TRAINING = ("step", "perf/wall_s", "timing_s/eval")
# Thresholds compare float differences of fractions; 0.5 - 0.3 must count as +20 points.
_EPS = 1e-9


def read_run_rows(workdir: str) -> list[dict]:
    """One row per step of WORKDIR/metrics.jsonl, sorted; raises when the run logged none."""
    path = os.path.join(workdir, METRICS_FILE)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no metrics file at {path} (the trainer writes it to its workdir)")
    rows = rows_by_step(read_metrics(path))
    if not rows:
        raise ValueError(f"{path}: no complete metrics rows")
    return rows


def finite(v) -> float | None:
    """A finite float, or None for anything else (missing, NaN, strings, bools)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    v = float(v)
    return v if math.isfinite(v) else None


def series(rows: list[dict], key: str) -> tuple[list[int], list[float]]:
    """(steps, values) of the rows where `key` holds a finite number."""
    pairs = [(r["step"], finite(r.get(key))) for r in rows]
    pairs = [(s, v) for s, v in pairs if v is not None]
    return [s for s, _ in pairs], [v for _, v in pairs]


def is_train_row(row: dict) -> bool:
    """A row with training metrics (an eval-only row, as at step 0, has none)."""
    return any(k not in _NOT_TRAINING and not k.startswith("val-") for k in row)


def _carried(rows: list[dict], key: str) -> list[float] | None:
    """A cumulative metric at each row, or None when the run never logs it.

    Carried forward: an eval-only row sits where the training before it ended.
    """
    if all(finite(r.get(key)) is None for r in rows):
        return None
    out, last = [], 0.0
    for r in rows:
        v = finite(r.get(key))
        last = last if v is None else v
        out.append(last)
    return out


def _cumulative_wall_s(rows: list[dict]) -> list[float] | None:
    """Training wall seconds reached at each row, or None when the run logs no timing."""
    wall_s = _carried(rows, "perf/wall_s")
    if wall_s is not None:
        return wall_s
    if any(finite(r.get("timing_s/step")) is not None for r in rows):
        return _cumsum(finite(r.get("timing_s/step")) or 0.0 for r in rows)
    return None


def _cumsum(values) -> list[float]:
    out, total = [], 0.0
    for v in values:
        total += v
        out.append(total)
    return out


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _eval_points(rows: list[dict], wall_s, tokens) -> list[dict]:
    """Per eval row: step, minutes, tokens, {(env, "greedy" | "pass@k"): value}, and their means.

    `acc` is the mean greedy accuracy over envs, `pass` maps k to the mean pass@k over envs.
    """
    points = []
    for i, r in enumerate(rows):
        vals, passk = {}, {}
        for key, v in r.items():
            # the cheap test first: a long run's rows hold thousands of other keys (dashboard)
            if not key.startswith("val-core/") or finite(v) is None:
                continue
            if m := GREEDY_RE.match(key):
                vals[m["env"], "greedy"] = float(v)
            elif m := PASSK_RE.match(key):
                vals[m["env"], f"pass@{m['k']}"] = float(v)
                passk.setdefault(int(m["k"]), []).append(float(v))
        if vals:
            points.append(
                {
                    "step": r["step"],
                    "minutes": None if wall_s is None else wall_s[i] / 60.0,
                    "tokens": None if tokens is None else tokens[i],
                    "vals": vals,
                    "acc": _mean([v for (_, kind), v in vals.items() if kind == "greedy"]),
                    "pass": {k: _mean(v) for k, v in sorted(passk.items())},
                }
            )
    return points


def _derive(rows: list[dict]):
    """(cumulative wall s per row or None, cumulative tokens per row or None, eval points)."""
    wall_s = _cumulative_wall_s(rows)
    tokens = _carried(rows, "perf/total_num_tokens")
    return wall_s, tokens, _eval_points(rows, wall_s, tokens)


def eval_points(rows: list[dict]) -> list[dict]:
    """Per eval row: step, minutes, tokens, {(env, "greedy" | "pass@k"): value}, acc, pass."""
    return _derive(rows)[2]


def _set(out: dict, key: str, value) -> None:
    """Store only what the run logged: a missing metric leaves its key out."""
    if value is not None:
        out[key] = value


def summarize_run(rows: list[dict]) -> dict:
    """Headline numbers: time, tokens, held-out accuracy lift and its rate, phase split, lag."""
    train = [r for r in rows if is_train_row(r)]
    out: dict = {"steps": len(train)}
    _set(out, "last_step", rows[-1]["step"] if rows else None)
    wall_s, tokens, points = _derive(rows)
    if wall_s is not None:
        out["train_wall_s"] = wall_s[-1]
        out["train_minutes"] = wall_s[-1] / 60.0
    if tokens is not None:
        out["total_tokens"] = tokens[-1]
    _set(out, "mean_tokens_per_s", _mean(series(rows, "perf/throughput")[1]))

    evals = [p for p in points if p["acc"] is not None]
    if evals:
        base, final = evals[0], evals[-1]
        best = max(evals, key=lambda p: p["acc"])
        out.update(base_acc=base["acc"], base_step=base["step"], final_acc=final["acc"])
        out.update(final_step=final["step"], best_acc=best["acc"], best_step=best["step"])
        out["envs"] = sorted({env for p in evals for env, kind in p["vals"] if kind == "greedy"})
        out["lift_points"] = 100.0 * (final["acc"] - base["acc"])
        out["best_lift_points"] = 100.0 * (best["acc"] - base["acc"])
        # The rates charge the lift to the compute spent between the base and the final eval.
        if final["minutes"] is not None and base["minutes"] is not None:
            minutes = final["minutes"] - base["minutes"]
            out["eval_minutes"] = minutes
            if minutes > 0:
                out["points_per_minute"] = out["lift_points"] / minutes
        if final["tokens"] is not None and base["tokens"] is not None:
            spent = final["tokens"] - base["tokens"]
            out["eval_tokens"] = spent
            if spent > 0:
                out["points_per_million_tokens"] = out["lift_points"] / (spent / 1e6)
        out["time_to_points"] = {
            t: next(
                (
                    {"step": p["step"], "minutes": p["minutes"], "tokens": p["tokens"]}
                    for p in evals
                    if 100.0 * (p["acc"] - base["acc"]) >= t - _EPS
                ),
                None,
            )
            for t in THRESHOLDS_POINTS
        }
    pass_at_k = {}
    for p in points:
        for k, v in p["pass"].items():
            pass_at_k.setdefault(k, {"base": v})["final"] = v
    if pass_at_k:
        out["pass_at_k"] = dict(sorted(pass_at_k.items()))

    _phase_split(train, out)
    lag = series(train, "rollout/policy_version_lag")[1]
    if lag:
        out.update(policy_version_lag_mean=_mean(lag), policy_version_lag_max=max(lag))
    skipped = series(train, "train/skipped_updates")[1]
    if skipped:
        out["skipped_updates"] = sum(skipped)
    return out


def phase_names(rows: list[dict]) -> list[str]:
    """The timing_s/* phases of a step logged (not the total, not eval), in step order."""
    found = {k[len("timing_s/") :] for r in rows for k in r if k.startswith("timing_s/")}
    # tool seconds are spent inside generation (calls overlap other samples' decoding)
    found -= {"step", "eval", "tools"}
    order = {p: i for i, p in enumerate(PHASE_ORDER)}
    return sorted(found, key=lambda p: (order.get(p, len(order)), p))


def _phase_split(train: list[dict], out: dict) -> None:
    """Mean seconds per step and each phase's share of timing_s/step (summed over steps)."""
    steps = [r for r in train if finite(r.get("timing_s/step")) is not None]
    if not steps:
        return
    total = sum(finite(r["timing_s/step"]) for r in steps)
    out["step_s"] = total / len(steps)
    phases = {p: [finite(r.get(f"timing_s/{p}")) or 0.0 for r in steps] for p in phase_names(steps)}
    out["phase_s"] = {p: sum(v) / len(steps) for p, v in phases.items()}
    if total > 0:
        out["phase_share"] = {p: sum(v) / total for p, v in phases.items()}
        # Async runs overlap phases, so the shares may sum past 1; then there is no remainder.
        rest = 1.0 - sum(out["phase_share"].values())
        if rest > 0.005:
            out["phase_share"]["other"] = rest
            out["phase_s"]["other"] = rest * out["step_s"]


# The tool-use warm-up's record (mimojax/sft/warmup.py writes it once the warm-up has finished).
WARMUP_RECORD = os.path.join("warmup", "done.json")


def read_warmup_record(workdir: str) -> dict | None:
    """WORKDIR/warmup/done.json, or None when no warm-up finished in this run."""
    path = os.path.join(workdir, WARMUP_RECORD)
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def base_model_accs(warmup: dict | None) -> dict[str, float]:
    """{env: held-out greedy accuracy of the model before the warm-up} from its record."""
    before = (warmup or {}).get("held_out_before") or {}
    return {
        k.split("/")[1]: v
        for k, v in before.items()
        if k.startswith("val-core/") and k.endswith("/acc/greedy")
    }


def read_run_info(path: str) -> dict | None:
    """The run_info.json next to the metrics, or None when the run wrote none."""
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        try:
            info = json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: not valid JSON ({e.msg}, line {e.lineno})") from None
    if not isinstance(info, dict) or not isinstance(info.get("config", {}), dict):
        raise ValueError(f"{path}: expected an object with a 'config' object")
    return info
