"""mimojax's GRPO trainer against Hugging Face TRL's `GRPOTrainer`, same model, task and shape.

    python scripts/bench_vs_trl.py --minutes 5 --out runs/bench_vs_trl    (or `make bench`)

Both sides train SmolLM2-135M-Instruct (the same fp32 weights: mimojax's GGUF export, written as
an HF dir with `mimojax.models.save_hf` and loaded by transformers) on the default job
(`configs/grpo_arith_smollm2.py`): arithmetic word problems from `envs/math`, graded by
`mimojax.envs.math.grader.grade`, 4 prompts x 8 samples per step, 24 new tokens at T=0.7,
AdamW lr 2e-5 constant, no weight decay, no KL, token-mean loss, one on-policy update per step.
They run one after the other, each for `--minutes` of training wall time (held-out evaluation
excluded), with greedy held-out accuracy on the first `--eval-examples` rows of
`envs/math/data/arith_test.jsonl` at the start, every `--eval-every-minutes` and at the end.
The TRL side (`bench_vs_trl_trl.py`) reads its shape and hyperparameters from the same config
object (its `TRL_CHOICES` lists where it cannot match exactly).

Printed: a markdown table per side (median s/step, steps, held-out accuracy at start and end,
training wall s to reach the target accuracy) and the ratios TRL / mimojax; `OUT/summary.json`
holds the same plus every evaluation point. The target accuracy (`--target`, default: the
highest accuracy both sides reached) is read at evaluation points, so time-to-target has the
resolution of the evaluation interval. mimojax's wall time includes its first step's XLA
compile (about a minute on 2 cores); "first step s" shows it. torch runs with as many threads
as the machine has cores, which is what XLA's CPU backend uses too.

TRL and torch are benchmark-only dependencies: `pip install -e '.[bench]'` (the `mimojax`
package never imports them). `--smoke` runs 2 steps per side with 8 evaluation examples, a
plumbing check whose numbers mean nothing; `--only mimojax|trl` reruns one side and compares
with the other side's result already in `--out`. Results of full runs go in docs/benchmarks.md
("mimojax vs TRL"); record them from an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from bench_vs_trl_common import (
    CONFIG,
    KEY,
    REPO,
    eval_minutes,
    job_config,
    median_step_s,
    side_result,
    time_to,
)
from bench_vs_trl_trl import TRL_CHOICES, run_trl

SIDES = ("mimojax", "trl")


# ---------------------------------------------------------------- weights


def export_hf(hf_dir: Path, n_check: int = 3) -> None:
    """mimojax's SmolLM2 weights as an HF dir, plus mimojax's prompt ids for a few eval rows
    (the TRL side checks that its chat template gives the same ones). In a subprocess, so the
    JAX model does not stay in this process's memory."""
    if (hf_dir / "model.safetensors").exists() and (hf_dir / "bench_prompt_ids.json").exists():
        return
    from mimojax.envs.math.tasks import DATA_DIR

    code = f"""
import json
from mimojax.data.prompts import chat_messages
from mimojax.models import load_model, save_hf
from mimojax.models.tokenizer import encode_chat
rows = [json.loads(l) for l in open({str(DATA_DIR / "arith_test.jsonl")!r})][:{n_check}]
model, tok = load_model("smollm2-135m-instruct", dtype="float32")
save_hf(model, tok, {str(hf_dir)!r})
ids = [encode_chat(tok, chat_messages(r, None)) for r in rows]
json.dump(ids, open({str(hf_dir / "bench_prompt_ids.json")!r}, "w"))
"""
    print(f"exporting mimojax's SmolLM2-135M-Instruct weights to {hf_dir} ...", flush=True)
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


# ---------------------------------------------------------------- mimojax side


def run_mimojax(args, workdir: Path) -> dict:
    from mimojax.observe.metrics import read_metrics

    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    cmd = [
        sys.executable, "-m", "mimojax.cli.main", "train",
        "--config", f"{CONFIG}:seed={args.seed},minutes={args.minutes}",
        "--workdir", str(workdir),
        f"--config.eval.max_examples={args.eval_examples}",
        "--config.checkpoint.every_steps=0",
        "--config.logging.wandb.mode=disabled",
    ]  # fmt: skip
    if args.smoke:
        cmd += [
            f"--config.trainer.total_steps={args.smoke_steps}",
            "--config.trainer.time_limit_minutes=0",
            "--config.trainer.eval_at_minutes=()",
        ]
    else:
        at = eval_minutes(args.minutes, args.eval_every_minutes)
        cmd.append(
            f"--config.trainer.eval_at_minutes=({','.join(map(str, at))}{',' if at else ''})"
        )
    log_path = workdir.parent / "mimojax_train.log"
    print("mimojax: " + " ".join(cmd[1:]), flush=True)
    print(f"mimojax: log in {log_path}", flush=True)
    env = {**os.environ, "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
    t0 = time.perf_counter()
    metrics_path, seen = workdir / "metrics.jsonl", 0
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
        while proc.poll() is None:
            time.sleep(2.0)
            seen = _echo_mimojax(metrics_path, seen)
    proc_s = time.perf_counter() - t0
    _echo_mimojax(metrics_path, seen)
    if proc.returncode != 0:
        sys.stdout.write("".join(open(log_path).readlines()[-40:]))
        raise SystemExit(f"mimojax train failed (exit {proc.returncode}); log: {log_path}")
    rows = read_metrics(str(workdir))
    train = [r for r in rows if "perf/time_per_step" in r]
    evals = [[r.get("perf/wall_s", 0.0), r["step"], r[KEY]] for r in rows if r.get(KEY) is not None]
    return side_result(
        "mimojax",
        [r["perf/time_per_step"] for r in train],
        [r["timing_s/gen"] for r in train if "timing_s/gen" in r],
        evals,
        proc_s,
        {
            "update_s_median": median_step_s(
                [r["timing_s/update_actor"] for r in train if "timing_s/update_actor" in r]
            )
        },
    )


def _echo_mimojax(path: Path, seen: int) -> int:
    """Print the metrics lines the trainer wrote since the last call; returns lines seen."""
    if not path.exists():
        return seen
    lines = path.read_text().splitlines()
    for line in lines[seen:]:
        try:
            r = json.loads(line)
        except json.JSONDecodeError:
            return seen  # a line being written; read it next time
        seen += 1
        parts = [f"mimojax step {r.get('step')}"]
        if "perf/time_per_step" in r:
            parts.append(f"{r['perf/time_per_step']:.1f} s/step")
            parts.append(f"train wall {r.get('perf/wall_s', 0.0):.0f} s")
        for k in ("critic/score/mean", "reward/mean"):
            if k in r:
                parts.append(f"reward {r[k]:.2f}")
                break
        if KEY in r:
            parts.append(f"held-out acc {r[KEY]:.3f}")
        print(", ".join(parts), flush=True)
    return seen


# ---------------------------------------------------------------- report


def fmt(x, spec: str = ".2f") -> str:
    return "-" if x is None else format(x, spec)


def ratio(a, b) -> float | None:
    return None if a is None or b is None or b <= 0 else a / b


def summarize(results: dict[str, dict], target_arg: float | None) -> dict:
    m, t = results.get("mimojax"), results.get("trl")
    both = m is not None and t is not None and m["evals"] and t["evals"]
    if target_arg is not None:
        target, how = target_arg, "--target"
    elif both:
        target, how = min(m["acc_best"], t["acc_best"]), "highest accuracy both sides reached"
    else:
        side = m or t
        target, how = (side["acc_best"] if side and side["evals"] else None), "best accuracy"
    for r in results.values():
        r["time_to_target_s"] = None if target is None else time_to(r["evals"], target)
    start = max(
        (r["acc_start"] for r in results.values() if r["acc_start"] is not None), default=None
    )
    note = None
    if target is not None and start is not None and target <= start + 1e-9:
        note = "the target is not above the starting accuracy: time-to-target says nothing"
    out = {"target_acc": target, "target_from": how, "target_note": note, "sides": results}
    if both:
        out["ratio_s_per_step"] = ratio(t["s_per_step_median"], m["s_per_step_median"])
        out["ratio_time_to_target"] = ratio(t["time_to_target_s"], m["time_to_target_s"])
    return out


def print_report(summary: dict, args) -> None:
    sides = summary["sides"]
    target = summary["target_acc"]
    print()
    cfg = job_config(args.seed, args.minutes)
    print(
        f"## mimojax vs TRL GRPO: {CONFIG.relative_to(REPO)}, SmolLM2-135M-Instruct fp32, "
        f"{cfg.data.batch_size} prompts x {cfg.rollout.n} samples x "
        f"{cfg.rollout.max_new_tokens} new tokens per step"
        + (" (SMOKE: plumbing check, numbers mean nothing)" if args.smoke else "")
    )
    print(
        f"CPU threads: {args.threads} for torch (torch.set_num_threads), XLA's CPU backend uses "
        f"all {os.cpu_count()} cores; training budget {args.minutes} min per side; held-out: "
        f"first {args.eval_examples} rows of arith_test.jsonl, greedy"
    )
    tgt = f"{target:.3f}" if target is not None else "-"
    print(f"target accuracy {tgt} ({summary['target_from']})")
    if summary["target_note"]:
        print(f"note: {summary['target_note']}")
    print()
    header = [
        "side",
        "s/step (median)",
        "first step s",
        "rollout s/step*",
        "steps",
        "acc start",
        "acc end",
        "acc best",
        f"train s to acc {tgt}",
        "process wall s",
    ]
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---:" if i else "---" for i in range(len(header))) + "|")
    for name in SIDES:
        r = sides.get(name)
        if r is None:
            continue
        ttt = r["time_to_target_s"]
        print(
            "| "
            + " | ".join(
                [
                    name,
                    fmt(r["s_per_step_median"]),
                    fmt(r["first_step_s"], ".1f"),
                    fmt(r["gen_s_median"]),
                    str(r["steps"]),
                    fmt(r["acc_start"], ".3f"),
                    fmt(r["acc_end"], ".3f"),
                    fmt(r["acc_best"], ".3f"),
                    "not reached" if ttt is None else f"{ttt:.0f}",
                    fmt(r["process_wall_s"], ".0f"),
                ]
            )
            + " |"
        )
    if "ratio_s_per_step" in summary:
        print()
        rs, rt = summary["ratio_s_per_step"], summary["ratio_time_to_target"]
        print(f"TRL s/step / mimojax s/step: {fmt(rs)}x")
        print(
            f"TRL time-to-target / mimojax time-to-target: "
            f"{fmt(rt) + 'x' if rt is not None else 'n/a'} (goal: >= 3x)"
        )
    print()
    for name in SIDES:
        if name in sides:
            pts = ", ".join(f"{w:.0f}s:{a:.3f}" for w, _, a in sides[name]["evals"])
            print(f"{name} evals (train wall s: acc): {pts}")
    print(
        "* rollout s/step: mimojax timing_s/gen (generation); TRL "
        "_generate_and_score_completions (generation, rewards, advantages). Medians skip step 1."
    )


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--minutes", type=float, default=5.0, help="training wall-time budget per side")
    p.add_argument("--eval-examples", type=int, default=100, help="held-out rows evaluated")
    p.add_argument("--eval-every-minutes", type=float, default=1.0, help="0 = start and end only")
    p.add_argument(
        "--target",
        type=float,
        default=None,
        help="accuracy to time (default: the highest both sides reached)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="runs/bench_vs_trl", help="workdirs and summary.json")
    p.add_argument("--smoke", action="store_true", help="2 steps per side, 8 eval rows")
    p.add_argument(
        "--only",
        choices=SIDES,
        default=None,
        help="run one side; the other's result is read from --out if there",
    )
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="torch threads")
    args = p.parse_args(argv)
    args.smoke_steps = 2
    if args.smoke:
        args.eval_examples = min(args.eval_examples, 8)
    out = Path(args.out)
    if not out.is_absolute():
        out = REPO / out
    out.mkdir(parents=True, exist_ok=True)

    results = {}
    for name in SIDES:
        wd = out / name
        if args.only not in (None, name):
            if (wd / "result.json").exists():
                results[name] = json.loads((wd / "result.json").read_text())
                print(f"{name}: using the earlier result in {wd / 'result.json'}")
            continue
        print(f"\n=== {name} ===", flush=True)
        if name == "mimojax":
            r = run_mimojax(args, wd)
        else:
            export_hf(out / "hf")
            r = run_trl(args, wd, out / "hf")
        r["smoke"] = bool(args.smoke)
        (wd / "result.json").write_text(json.dumps(r, indent=1))
        results[name] = r

    summary = summarize(results, args.target)
    summary.update(
        command=" ".join([Path(sys.executable).name, *sys.argv]),
        minutes=args.minutes,
        eval_examples=args.eval_examples,
        seed=args.seed,
        smoke=bool(args.smoke),
        cpu_count=os.cpu_count(),
        torch_threads=args.threads,
        trl_choices=TRL_CHOICES,
    )
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    print_report(summary, args)
    print(f"\nsummary: {out / 'summary.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
