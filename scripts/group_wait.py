"""Group dependency, measured: async stream flow with gae (+ critic) vs grpo on a long tail.

    python scripts/group_wait.py --steps 8 --decode-ms 60 --out runs/group_wait

The tiny random config, `trainer.mode=async`, `trainer.flow=stream`, and a scripted long-tailed
length distribution: sample 0 of every prompt writes `--long` tokens, the others `--short`
(EOS ignored), with `--decode-ms` of sleep per decode step so that wall time follows tokens as
with a real model. GAE trains on the first batch_size * n trajectories to finish; GRPO on the
first batch_size whole groups, each waiting for its long member. Prints per run the means of
`queue/group_wait_s`, the trainer's wait for data, the step time, the trained response length
and the long-response shares (the short-task bias trajectory flow pays).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import time

import mimojax.train.trainer as trainer_module
from mimojax.config.loader import load_config
from mimojax.observe.metrics import read_metrics
from mimojax.rollout.stream import stream_rollouts

RUNS = {
    "gae (+ critic)": ("algorithm.adv_estimator=gae", "model.value_head=True", "critic.lr=1e-4"),
    "grpo": (),
}


def run(name: str, workdir: str, args) -> dict:
    """One run in-process; returns the means over its step rows (the first excluded)."""
    cfg = load_config("configs/grpo_tiny.py", [
        "reward.num_workers=0", "checkpoint.every_steps=0", "eval.at_start=False",
        "eval.at_end=False", "trainer.mode='async'", "trainer.flow='stream'",
        f"trainer.max_off_policy_steps={args.bound}", f"trainer.total_steps={args.steps}",
        f"rollout.max_new_tokens={args.long}", f"trainer.seed={args.seed}", *RUNS[name],
    ])  # fmt: skip
    trainer = trainer_module.Trainer(cfg, workdir, progress=False)
    base = trainer.roles.rollout.sampling

    def sampling_for(example, sample):
        n = args.long if sample == 0 else args.short
        return dataclasses.replace(base, max_new_tokens=n, ignore_eos=True)

    trainer_module.stream_rollouts = lambda *a: stream_rollouts(*a, sampling_for=sampling_for)
    generate = trainer.engine.generate

    def slow_generate(*a, **k):  # a real model's decode step takes time
        time.sleep(args.decode_ms / 1000)
        return generate(*a, **k)

    trainer.engine.generate = slow_generate
    trainer.train()
    rows = [r for r in read_metrics(workdir) if "critic/score/mean" in r][1:]  # skip compile

    def mean(key):
        vals = [r[key] for r in rows if key in r]
        return statistics.mean(vals) if vals else float("nan")

    return {k: mean(k) for k in (
        "queue/group_wait_s", "queue/wait_s", "timing_s/step", "response_length/mean",
        "async/long_share/sampled", "async/long_share/trained", "async/stream/groups_per_step",
        "async/staleness/mean",
    )} | {"dropped": rows[-1]["async/dropped_stale"] if rows else float("nan")}  # fmt: skip


def main() -> None:
    """Runs gae then grpo (one after the other), then prints the table."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--long", type=int, default=32)
    p.add_argument("--short", type=int, default=4)
    p.add_argument("--decode-ms", type=float, default=60.0)
    p.add_argument("--bound", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="runs/group_wait")
    args = p.parse_args()
    results = {}
    for name in RUNS:
        workdir = os.path.join(args.out, name.split()[0])
        results[name] = run(name, workdir, args)
    print(
        f"\nstream flow, {args.steps} steps (first excluded: compile), 2 prompts x 4 samples, "
        f"sample 0 of each prompt {args.long} tokens, others {args.short}, "
        f"{args.decode_ms:.0f} ms per decode step, max_off_policy_steps={args.bound}\n"
    )
    print(
        "| estimator | group wait s | trainer wait s | s/step | prompts/step | trained "
        "length | long share sampled / trained | lag mean | dropped (units) |"
    )
    print("|---|---:|---:|---:|---:|---:|---|---:|---:|")
    for name, r in results.items():
        print(
            f"| {name} | {r['queue/group_wait_s']:.3f} | {r['queue/wait_s']:.2f} | "
            f"{r['timing_s/step']:.2f} | {r['async/stream/groups_per_step']:.1f} | "
            f"{r['response_length/mean']:.1f} | {r['async/long_share/sampled']:.2f} / "
            f"{r['async/long_share/trained']:.2f} | {r['async/staleness/mean']:.2f} | "
            f"{r['dropped']:.0f} |"
        )


if __name__ == "__main__":
    main()
