"""The default job's held-out lift over seeds: runs `mimojax train` per seed, then tabulates.

    python scripts/demo_lift.py --seeds 0 1 2 --minutes 15 --out runs/demo_lift

Each seed trains for `--minutes` of training wall time (evaluation excluded) with evaluations
at 5 and 10 minutes and at the end; the table gives held-out greedy accuracy before training,
at the first evaluation past 5 minutes, and at the end, with the lift in points.
`--summarize-only` re-reads existing workdirs.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from mimojax.observe.metrics import read_metrics

KEY = "val-core/math/acc/greedy"


def _evals(workdir: str) -> list[tuple[float, int, float]]:
    rows = read_metrics(workdir)
    return [(r.get("perf/wall_s", 0.0), r["step"], r[KEY]) for r in rows if r.get(KEY) is not None]


def summarize(workdirs: dict[int, str]) -> list[dict]:
    """Per seed: base accuracy, accuracy at the first eval past 5 min, and at the end."""
    out = []
    for seed, wd in workdirs.items():
        evals = _evals(wd)
        if not evals:
            continue
        base = evals[0][2]
        at5 = next(((w, s, a) for w, s, a in evals if w >= 300.0), evals[-1])
        end = evals[-1]
        out.append(
            {
                "seed": seed,
                "base": base,
                "at5_wall_s": at5[0],
                "at5_step": at5[1],
                "at5": at5[2],
                "end_wall_s": end[0],
                "end_step": end[1],
                "end": end[2],
            }
        )
    return out


def print_table(rows: list[dict]) -> None:
    print(
        "| seed | base greedy acc | acc @ first eval >= 5 min (wall s, step) | lift | "
        "acc at end (wall s, step) | lift |"
    )
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['seed']} | {r['base']:.2f} | {r['at5']:.2f} ({r['at5_wall_s']:.0f} s, "
            f"{r['at5_step']}) | {100 * (r['at5'] - r['base']):+.0f} pts | {r['end']:.2f} "
            f"({r['end_wall_s']:.0f} s, {r['end_step']}) | "
            f"{100 * (r['end'] - r['base']):+.0f} pts |"
        )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--minutes", type=float, default=15.0)
    p.add_argument("--out", default="runs/demo_lift")
    p.add_argument("--summarize-only", action="store_true")
    args = p.parse_args()
    workdirs = {s: os.path.join(args.out, f"seed{s}") for s in args.seeds}
    if not args.summarize_only:
        for seed, wd in workdirs.items():
            cmd = [
                sys.executable,
                "-m",
                "mimojax.cli.main",
                "train",
                "--config",
                f"configs/grpo_arith_smollm2.py:seed={seed},minutes={args.minutes}",
                "--workdir",
                wd,
            ]
            print("+", " ".join(cmd), flush=True)
            subprocess.run(cmd, check=True)
    print_table(summarize(workdirs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
