"""What both sides of scripts/bench_vs_trl.py share: the job's config, eval marks, step stats."""

from __future__ import annotations

import statistics
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "configs" / "grpo_arith_smollm2.py"
KEY = "val-core/math/acc/greedy"


def job_config(seed: int, minutes: float):
    from mimojax.config.loader import load_config

    return load_config(f"{CONFIG}:seed={seed},minutes={minutes}")


def eval_minutes(minutes: float, every: float) -> tuple[float, ...]:
    """Evaluation points strictly inside the budget (the end is evaluated anyway)."""
    if every <= 0:
        return ()
    out, k = [], 1
    while k * every < minutes - 1e-9:
        out.append(round(k * every, 4))
        k += 1
    return tuple(out)


def median_step_s(step_s: list[float]) -> float | None:
    """Median s/step without the first step (warm-up, and mimojax's compile) when there are more."""
    if not step_s:
        return None
    return statistics.median(step_s[1:] if len(step_s) > 1 else step_s)


def time_to(evals: list[list[float]], target: float) -> float | None:
    """Training wall s of the first evaluation at or above `target`; None if never."""
    for wall_s, _step, acc in evals:
        if acc >= target - 1e-9:
            return wall_s
    return None


def side_result(name, step_s, gen_s, evals, proc_s, extra=None) -> dict:
    return {
        "side": name,
        "steps": len(step_s),
        "s_per_step_median": median_step_s(step_s),
        "first_step_s": step_s[0] if step_s else None,
        "gen_s_median": median_step_s(gen_s),
        "step_s": step_s,
        "evals": evals,  # [training wall s, step, held-out greedy accuracy]
        "acc_start": evals[0][2] if evals else None,
        "acc_end": evals[-1][2] if evals else None,
        "acc_best": max(e[2] for e in evals) if evals else None,
        "train_wall_s": sum(step_s),
        "process_wall_s": proc_s,
        **(extra or {}),
    }
