"""Issue 16's ablation on the hard arithmetic recipe: one run per variant, then one table.

    python scripts/ablation_hard.py --seed 0 --minutes 15 --out runs/ablation_hard
    python scripts/ablation_hard.py --variants plain,mask --summarize-only --out runs/ablation_hard
    python scripts/ablation_hard.py --summarize-only --workdir plain=runs/abl_plain ...
    python scripts/ablation_hard.py --variants mask,difficulty --train-rows 48   # repeats

Variants (configs/grpo_arith_hard_smollm2.py unless named):
  plain       GRPO, every group trained on (all-equal groups give zero advantage)
  mask        + algorithm.filter_groups: all-equal groups masked out of the update (the recipe)
  dynamic     + DAPO dynamic sampling, at most 3 generation batches per step
  difficulty  mask + data.difficulty (always/never-solved prompts drawn at a floor rate)
  overlong    mask + DAPO's soft overlong penalty (reward.overlong_buffer, the last 16 of the
              48 response tokens: a truncated answer scores its grade minus 1)
  trunc_zero  mask + algorithm.truncated_responses=zero: an answer cut off at 48 tokens scores 0
  trunc_zero_b8  trunc_zero with 8 prompts a step in one mini-batch (one update of 64 samples)
  trunc_zero_b8_t05  trunc_zero_b8 sampling rollouts at temperature 0.5 (the recipe's 0.7)
  trunc_zero_b8_ent  trunc_zero_b8 + an entropy target (algorithm.entropy_control: 0.3, the
              bonus weight walking 0.01 a step up to 0.1 while entropy is below it)
  trunc_zero_n16  trunc_zero with 16 samples per prompt (4 prompts: 64 samples in one update)
  trunc_mask  mask + algorithm.truncated_responses=mask: cut-off answers get no loss (DAPO's
              overlong filtering)
  passk       configs/grpo_passk_arith_hard_smollm2.py (grpo_passk, masking)
  rft         configs/rft_grpo_arith_hard_smollm2.py: RFT warm-up, then the recipe

Each trains for `--minutes` of training wall time (evaluation excluded; for `rft` the warm-up
is extra and is added to its time axis, and its base rate is the other variants'). The table
gives held-out greedy accuracy on the first 100 problems before training and at the end, the
best, the minutes to +10 and +25 points (the first evaluation at or past it; "-" = not
reached), whether any evaluation after the first fell below the base rate, and rollouts
generated per group that carried signal (groups whose scores differ; "n/a" where the run does
not count them: `plain` runs from before 2026-12-05).

`--train-rows N` trains every variant on the first N training rows only (written to
`<out>/hard_arith_train_first<N>.jsonl`), so that prompts come back within the budget: with 4
prompts a step, 15 minutes draw about 110 of the 3000, none twice, and difficulty-aware
sampling has no history to act on.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys

from mimojax.observe.metrics import read_metrics
from mimojax.observe.summary import read_run_info

KEY = "val-core/math/acc/greedy"
HARD = "configs/grpo_arith_hard_smollm2.py"
# trunc_zero with 8 prompts a step in one mini-batch: the base of the trunc_zero_b8* variants
ZERO_B8 = [
    "--config.algorithm.truncated_responses=zero",
    "--config.data.batch_size=8",
    "--config.trainer.mini_batch_size=8",
]
VARIANTS = {
    "plain": (HARD, ["--config.algorithm.filter_groups=False"]),
    "mask": (HARD, []),
    "dynamic": (HARD, ["--config.algorithm.dynamic_sampling.enable=True"]),
    "difficulty": (HARD, ["--config.data.difficulty.enable=True"]),
    "overlong": (
        HARD,
        ["--config.reward.overlong_buffer.enable=True", "--config.reward.overlong_buffer.len=16"],
    ),
    "trunc_zero": (HARD, ["--config.algorithm.truncated_responses=zero"]),
    "trunc_zero_b8": (HARD, ZERO_B8),
    "trunc_zero_b8_t05": (HARD, [*ZERO_B8, "--config.rollout.temperature=0.5"]),
    "trunc_zero_b8_ent": (
        HARD,
        [
            *ZERO_B8,
            "--config.algorithm.entropy_control.target=0.3",
            "--config.algorithm.entropy_control.delta=0.01",
            "--config.algorithm.entropy_control.max_coeff=0.1",
        ],
    ),
    "trunc_zero_n16": (
        HARD,
        ["--config.algorithm.truncated_responses=zero", "--config.rollout.n=16"],
    ),
    "trunc_mask": (HARD, ["--config.algorithm.truncated_responses=mask"]),
    "passk": ("configs/grpo_passk_arith_hard_smollm2.py", ["--config.eval.pass_k=0"]),
    "rft": ("configs/rft_grpo_arith_hard_smollm2.py", []),
}


def command(
    variant: str, seed: int, minutes: float, workdir: str, train_file: str | None = None
) -> list[str]:
    """The `mimojax` command line that trains one variant (on `train_file` when given)."""
    config, extra = VARIANTS[variant]
    verb = ["sft", "--from-rollouts", "--then-train"] if variant == "rft" else ["train"]
    spec = f"{config}:seed={seed},minutes={minutes}"
    cli = [sys.executable, "-m", "mimojax.cli.main", *verb, "--config", spec, "--workdir", workdir]
    data = [f"--config.data.train_files=('{train_file}',)"] if train_file else []
    return cli + extra + data


def write_first_rows(n: int, out_dir: str) -> str:
    """The first `n` rows of the hard training file, as their own file under `out_dir`."""
    from mimojax.envs.math.tasks import DATA_DIR

    with open(DATA_DIR / "hard_arith_train.jsonl") as f:
        rows = f.readlines()
    if not 0 < n <= len(rows):
        raise SystemExit(f"--train-rows: must be in [1, {len(rows)}], got {n}")
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"hard_arith_train_first{n}.jsonl")
    with open(path, "w") as f:
        f.writelines(rows[:n])
    return path


def _rl_dir(workdir: str) -> tuple[str, float]:
    """(the directory holding the RL metrics, seconds spent before RL started)."""
    stats = os.path.join(workdir, "rft_stats.json")
    if os.path.exists(stats):
        with open(stats) as f:
            return os.path.join(workdir, "rl"), float(json.load(f).get("warmup_s", 0.0))
    return workdir, 0.0


def summarize(workdir: str, base: float | None = None) -> dict | None:
    """One table row from a run's metrics; None when it holds no evaluation. `base`: the base
    model's held-out rate (an RFT run's first evaluation is after its warm-up)."""
    rl_dir, offset_s = _rl_dir(workdir)
    rows = read_metrics(rl_dir)
    evals = [(r.get("perf/wall_s", 0.0) + offset_s, r[KEY]) for r in rows if r.get(KEY) is not None]
    if not evals:
        return None
    base = evals[0][1] if base is None else base

    def minutes_to(points: float) -> float | None:
        hit = next((w for w, a in evals if a >= base + points / 100 - 1e-9), None)
        return None if hit is None else hit / 60

    # A step whose groups were all masked makes no update and logs no actor/* metrics.
    steps = [r for r in rows if r.get("timing_s/step") is not None]
    updates = [r for r in steps if r.get("actor/entropy") is not None]
    prompts, samples = _batch_shape(rl_dir) if steps else (0, 0)
    drawn = sum(_groups_drawn(r, prompts) for r in steps) * samples
    kept = sum(_informative(r, prompts) for r in steps)
    return {
        "base": base,
        "end": evals[-1][1],
        "best": max(a for _, a in evals),
        "evals": [(round(w / 60, 1), a) for w, a in evals],
        "min_to_10": minutes_to(10),
        "min_to_25": minutes_to(25),
        "below_base": any(a < base - 1e-9 for _, a in evals[1:]),
        "steps": len(steps),
        "rollouts_per_signal_group": drawn / kept if kept and drawn else None,
        "entropy_first_last": (updates[0]["actor/entropy"], updates[-1]["actor/entropy"])
        if updates
        else None,
    }


def _batch_shape(run_dir: str) -> tuple[int, int]:
    """(prompts, samples per prompt) from the "P prompts x N samples" run_info.json records."""
    info = read_run_info(os.path.join(run_dir, "run_info.json"))
    found = re.fullmatch(r"(\d+) prompts x (\d+) samples", str((info or {}).get("batch", "")))
    if found is None:
        raise SystemExit(f"{run_dir}/run_info.json: no 'batch' of the form 'P prompts x N samples'")
    return int(found.group(1)), int(found.group(2))


def _groups_drawn(row: dict, prompts: int) -> float:
    """Groups generated this step: every generation batch's with dynamic sampling, else the
    batch's (logged only when filtering; a plain run's is its prompts per step)."""
    return row.get("train/groups_drawn", row.get("batch/groups", float(prompts)))


def _informative(row: dict, prompts: int) -> float:
    """Groups with signal the step trained on (dynamic sampling draws more than it keeps)."""
    if "train/groups_informative" in row:  # every run from 2026-12-05, dynamic sampling before
        return min(row["train/groups_informative"], prompts)
    return row.get("batch/groups_kept", 0.0)  # masking runs before 2026-12-05


def _fmt_min(m: float | None) -> str:
    return "-" if m is None else f"{m:.1f}"


def print_table(results: dict[str, dict]) -> None:
    print(
        "| variant | base | end | best | min to +10 | min to +25 | below base after 1st eval "
        "| RL steps | rollouts per signal group | entropy first -> last |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, r in results.items():
        rps = r["rollouts_per_signal_group"]
        ent = r["entropy_first_last"]
        print(
            f"| {name} | {r['base']:.2f} | {r['end']:.2f} | {r['best']:.2f} "
            f"| {_fmt_min(r['min_to_10'])} | {_fmt_min(r['min_to_25'])} "
            f"| {'yes' if r['below_base'] else 'no'} | {r['steps']} "
            f"| {'n/a' if rps is None else f'{rps:.1f}'} "
            f"| {'n/a' if ent is None else f'{ent[0]:.2f} -> {ent[1]:.2f}'} |"
        )
    for name, r in results.items():
        print(f"{name}: evals (min, acc) {r['evals']}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--minutes", type=float, default=15.0)
    p.add_argument("--out", default="runs/ablation_hard")
    p.add_argument("--summarize-only", action="store_true")
    p.add_argument("--train-rows", type=int, default=0, help="train on the first N rows only")
    p.add_argument(
        "--workdir", action="append", default=[], help="NAME=DIR: summarize DIR as variant NAME"
    )
    args = p.parse_args()
    names = [v for v in args.variants.split(",") if v]
    unknown = sorted(set(names) - set(VARIANTS))
    if unknown:
        p.error(f"--variants: unknown {unknown}; have {sorted(VARIANTS)}")
    rows = f"_rows{args.train_rows}" if args.train_rows else ""
    workdirs = {v: os.path.join(args.out, f"{v}{rows}_seed{args.seed}") for v in names}
    for item in args.workdir:
        name, _, path = item.partition("=")
        workdirs[name] = path
    if not args.summarize_only:
        train_file = write_first_rows(args.train_rows, args.out) if args.train_rows else None
        for name in names:
            cmd = command(name, args.seed, args.minutes, workdirs[name], train_file)
            print("+", " ".join(cmd), flush=True)
            subprocess.run(cmd, check=True)
    results = {n: s for n, wd in workdirs.items() if n != "rft" and (s := summarize(wd))}
    if "rft" in workdirs:  # every variant starts from the same model, eval set and greedy decode
        base = next(iter(results.values()))["base"] if results else None
        if (s := summarize(workdirs["rft"], base)) is not None:
            results["rft"] = s
    print_table(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
