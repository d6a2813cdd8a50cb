"""Sync vs one-step-off (or async) on the default job: wall time to the same held-out accuracy,
side by side with the policy-lag distribution.

    python scripts/async_vs_sync.py --minutes 8 --eval-minutes 2 4 6 --out runs/async_vs_sync

Runs `mimojax train --config configs/grpo_arith_smollm2.py:minutes=M` once per mode, one after
the other (never at once: they would share the cores), then prints the table. "Wall s" is
training wall time (evaluation excluded, first step's compile included); the target accuracy is
the best one that every run reached, and each run's time to it is the first evaluation at or
above it (an upper bound at the evaluation spacing). `--summarize-only` re-reads the workdirs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

from mimojax.observe.metrics import read_metrics

KEY = "val-core/math/acc/greedy"


def summarize(workdir: str) -> dict:
    """One run: evaluations (wall s, step, acc), per-step medians, lag and bias means."""
    rows = read_metrics(workdir)
    steps = [r for r in rows if "critic/score/mean" in r]
    evals = [(r.get("perf/wall_s", 0.0), r["step"], r[KEY]) for r in rows if r.get(KEY) is not None]

    def med(key):
        vals = [r[key] for r in steps if key in r]
        return statistics.median(vals) if vals else float("nan")

    def mean(key):
        vals = [r[key] for r in steps if key in r]
        return sum(vals) / len(vals) if vals else float("nan")

    hist = {}
    for r in steps:
        for k, v in r.items():
            if k.startswith("async/staleness/hist_"):
                hist[int(k.rsplit("_", 1)[1])] = hist.get(int(k.rsplit("_", 1)[1]), 0.0) + v
    n = max(len(steps), 1)
    return {
        "steps": len(steps),
        "wall_s": steps[-1]["perf/wall_s"] if steps else 0.0,
        "s_per_step": med("timing_s/step"),
        "gen_s": med("timing_s/gen"),
        "update_s": med("timing_s/update_actor"),
        "queue_wait_s": med("queue/wait_s"),
        "evals": evals,
        "lag_hist": {k: v / n for k, v in sorted(hist.items())},
        "lag_mean": mean("async/staleness/mean"),
        "lag_max": max((r.get("async/staleness/max", 0.0) for r in steps), default=0.0),
        "long_trained": mean("async/long_share/trained"),
        "long_sampled": mean("async/long_share/sampled"),
        "group_wait_s": med("queue/group_wait_s"),
    }


def print_table(runs: dict[str, dict]) -> None:
    """Markdown: per mode, steps, s/step, time to the common target, lag distribution."""
    target = min(max((a for _, _, a in r["evals"]), default=0.0) for r in runs.values())
    print(f"target held-out greedy accuracy (best reached by every run): {target:.2f}\n")
    print(
        "| mode | steps | median s/step (gen, update) | evals: acc @ wall s | train s to "
        f"{target:.2f} | lag: share at 0 / 1 (mean, max) | queue wait s | group wait s |"
    )
    print("|---|---:|---|---|---:|---|---:|---:|")
    for mode, r in runs.items():
        evals = ", ".join(f"{a:.2f} @ {w:.0f}" for w, _, a in r["evals"])
        hit = next((w for w, _, a in r["evals"] if a >= target), float("nan"))
        lag = "sync: 0 by construction"
        if r["lag_hist"]:
            h = r["lag_hist"]
            lag = f"{h.get(0, 0):.2f} / {h.get(1, 0):.2f} ({r['lag_mean']:.2f}, {r['lag_max']:.0f})"
        print(
            f"| {mode} | {r['steps']} | {r['s_per_step']:.1f} ({r['gen_s']:.1f}, "
            f"{r['update_s']:.1f}) | {evals} | {hit:.0f} | {lag} | {r['queue_wait_s']:.1f} | "
            f"{r['group_wait_s']:.2f} |"
        )


def main() -> None:
    """Runs each mode one after the other (unless --summarize-only), then prints the table."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--modes", nargs="+", default=["sync", "one_step_off"])
    p.add_argument("--minutes", type=float, default=8.0)
    p.add_argument("--eval-minutes", type=float, nargs="+", default=[2.0, 4.0, 6.0])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="runs/async_vs_sync")
    p.add_argument("--summarize-only", action="store_true")
    args = p.parse_args()
    workdirs = {m: os.path.join(args.out, m) for m in args.modes}
    if not args.summarize_only:
        for mode, wd in workdirs.items():
            at = "(" + ",".join(str(m) for m in args.eval_minutes) + ",)"
            config = f"configs/grpo_arith_smollm2.py:seed={args.seed},minutes={args.minutes}"
            cmd = [
                sys.executable, "-m", "mimojax.cli.main", "train", "--workdir", wd,
                "--config", config,
                f"--config.trainer.mode={mode}", "--config.eval.at_start=False",
                f"--config.trainer.eval_at_minutes={at}",
            ]  # fmt: skip
            print(" ".join(cmd), flush=True)
            subprocess.run(cmd, check=True)
    print_table({m: summarize(wd) for m, wd in workdirs.items()})


if __name__ == "__main__":
    main()
