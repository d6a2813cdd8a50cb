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
The TRL side reads its shape and hyperparameters from the same config object (`TRL_CHOICES`
below lists where it cannot match exactly).

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
with the other side's result already in `--out`. Results of full runs go in README
("mimojax vs TRL"); record them from an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "configs" / "grpo_arith_smollm2.py"
KEY = "val-core/math/acc/greedy"
SIDES = ("mimojax", "trl")

# Where the TRL run departs from mimojax's config, and why (also printed into summary.json).
TRL_CHOICES = {
    "loss_type": "dapo: token losses summed and divided by the number of completion tokens in "
    "the whole (global) batch, which is mimojax's token-mean over the mini-batch (= the batch)",
    "per_device_train_batch_size": "counts completions in TRL (32 = 4 prompts x 8 generations); "
    "mimojax does the same update as 2 micro-batches of 16 with gradient accumulation",
    "gradient_checkpointing": "False (GRPOConfig defaults to True); mimojax runs remat=none",
    "bf16": "False (GRPOConfig defaults to True); both sides compute in fp32 on CPU",
    "scale_rewards": "group: advantages divided by the group std, as mimojax's "
    "norm_adv_by_std_in_grpo=True (TRL's std is unbiased, mimojax's may differ by sqrt(8/7))",
    "clip": "epsilon=0.2 both sides; mimojax's dual clip (clip_ratio_c=3) never acts on-policy",
    "old_logprobs": "neither side recomputes them: one update per batch is on-policy (ratio 1)",
    "eval": "TRL has no greedy held-out accuracy of its own; a callback runs model.generate "
    "(greedy, batches of 32, left-padded) on the same chat-templated prompts and grades with "
    "mimojax's grader, with the training clock paused",
    "data_order": "each side shuffles the same training rows with its own seeded sampler",
}


# ---------------------------------------------------------------- shared helpers


def read_jsonl(path: Path, limit: int | None = None) -> list[dict]:
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                rows.append(json.loads(line))
            if limit is not None and len(rows) >= limit:
                break
    return rows


def job_config(seed: int, minutes: float):
    from mimojax.config import load_config

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
from mimojax.data import chat_messages
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
    from mimojax.metrics import read_metrics

    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    cmd = [
        sys.executable, "-m", "mimojax.cli", "train",
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


# ---------------------------------------------------------------- TRL side


def run_trl(args, workdir: Path, hf_dir: Path) -> dict:
    import torch
    import transformers
    import trl
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from mimojax.envs.math.grader import grade
    from mimojax.envs.math.tasks import DATA_DIR

    t_proc = time.perf_counter()
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    torch.set_num_threads(args.threads)
    transformers.logging.set_verbosity_warning()
    # transformers 5 renames gradient_checkpointing; TRL still reads the old name internally.
    warnings.filterwarnings("ignore", message=".*gradient_checkpointing.*", category=FutureWarning)
    cfg = job_config(args.seed, args.minutes)
    n_gen = int(cfg.rollout.n)
    max_new = int(cfg.rollout.max_new_tokens)

    tok = AutoTokenizer.from_pretrained(hf_dir)
    model = AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32)

    def chat(prompt: str) -> list[dict]:
        # data.system_prompt is None in the job config: one user turn, and SmolLM2's template
        # adds its default system message, on both sides.
        assert cfg.data.system_prompt is None
        return [{"role": "user", "content": prompt}]

    def prompt_ids(prompt: str) -> list[int]:
        out = tok.apply_chat_template(chat(prompt), tokenize=True, add_generation_prompt=True)
        if hasattr(out, "keys"):
            out = out["input_ids"]
        return [int(i) for i in out]

    eval_rows = read_jsonl(DATA_DIR / "arith_test.jsonl", args.eval_examples)
    expected = json.loads((hf_dir / "bench_prompt_ids.json").read_text())
    for row, ids in zip(eval_rows, expected):
        if prompt_ids(row["prompt"]) != ids:
            raise SystemExit("TRL side: chat-templated prompt ids differ from mimojax's")
    eval_ids = [prompt_ids(r["prompt"]) for r in eval_rows]
    train_rows = read_jsonl(DATA_DIR / "arith_train.jsonl")
    dataset = Dataset.from_list(
        [{"prompt": chat(r["prompt"]), "ground_truth": str(r["ground_truth"])} for r in train_rows]
    )

    @torch.no_grad()
    def held_out_acc(m) -> float:
        was_training = m.training
        m.eval()
        pad = tok.pad_token_id
        correct = 0
        for s in range(0, len(eval_ids), 32):
            batch = eval_ids[s : s + 32]
            width = max(map(len, batch))
            ids = torch.tensor([[pad] * (width - len(b)) + b for b in batch])
            mask = torch.tensor([[0] * (width - len(b)) + [1] * len(b) for b in batch])
            out = m.generate(
                input_ids=ids,
                attention_mask=mask,
                do_sample=False,
                max_new_tokens=max_new,
                pad_token_id=pad,
                eos_token_id=tok.eos_token_id,
                temperature=None,
                top_p=None,
                top_k=None,
            )
            for row, seq in zip(eval_rows[s : s + 32], out[:, width:]):
                text = tok.decode(seq, skip_special_tokens=True)
                correct += grade(text, row["ground_truth"])["score"] >= 1.0
        if was_training:
            m.train()
        return correct / len(eval_ids)

    def arith_reward(completions, ground_truth, **kwargs) -> list[float]:
        texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
        return [float(grade(t, gt)["score"]) for t, gt in zip(texts, ground_truth)]

    budget_s = 0.0 if args.smoke else 60.0 * args.minutes
    eval_at = (
        []
        if args.smoke
        else [60.0 * m for m in eval_minutes(args.minutes, args.eval_every_minutes)]
    )

    class Clock(TrainerCallback):
        """Training wall time with evaluation excluded; held-out evals at start, at the
        `eval_at` marks and at the end; stops at the budget."""

        def __init__(self):
            self.train_s, self.t0, self.step_s, self.evals = 0.0, None, [], []
            self.rewards, self.pending = [], list(eval_at)

        def _eval(self, m, step):
            t = time.perf_counter()
            acc = held_out_acc(m)
            self.evals.append([self.train_s, step, acc])
            print(
                f"trl step {step}: held-out acc {acc:.3f} (eval {time.perf_counter() - t:.0f} s)",
                flush=True,
            )

        def on_train_begin(self, a, state, control, model=None, **kw):
            self._eval(model, 0)
            self.t0 = time.perf_counter()

        def on_step_end(self, a, state, control, model=None, **kw):
            dt = time.perf_counter() - self.t0
            self.train_s += dt
            self.step_s.append(dt)
            stop = (budget_s > 0 and self.train_s >= budget_s) or state.global_step >= a.max_steps
            due = False
            while self.pending and self.train_s >= self.pending[0]:
                self.pending.pop(0)
                due = True
            if stop or due:
                self._eval(model, state.global_step)
            if stop:
                control.should_training_stop = True
            self.t0 = time.perf_counter()

        def on_log(self, a, state, control, logs=None, **kw):
            if logs and "reward" in logs:
                self.rewards.append(logs["reward"])
                print(
                    f"trl step {state.global_step}: {self.step_s[-1]:.1f} s/step, train wall "
                    f"{self.train_s:.0f} s, reward {logs['reward']:.2f}",
                    flush=True,
                )

    class TimedGRPOTrainer(GRPOTrainer):
        """Records the rollout time (generate + reward + advantages) of each step."""

        gen_s: list = []

        def _generate_and_score_completions(self, *a, **kw):
            t = time.perf_counter()
            out = super()._generate_and_score_completions(*a, **kw)
            self.gen_s.append(time.perf_counter() - t)
            return out

    o, alg = cfg.optimizer, cfg.algorithm
    assert alg.clip_ratio_low == alg.clip_ratio_high and not alg.use_kl_loss
    assert cfg.trainer.ppo_epochs == 1 and cfg.trainer.mini_batch_size == cfg.data.batch_size
    assert alg.loss_agg_mode == "token-mean" and o.schedule == "constant" and o.warmup_steps == 0
    targs = GRPOConfig(
        output_dir=str(workdir),
        use_cpu=True,
        bf16=False,
        fp16=False,
        seed=args.seed,
        data_seed=args.seed,
        # one optimizer step = batch_size prompts x n generations, in one pass
        per_device_train_batch_size=int(cfg.data.batch_size) * n_gen,
        gradient_accumulation_steps=1,
        num_generations=n_gen,
        num_iterations=int(cfg.trainer.ppo_epochs),
        max_completion_length=max_new,
        temperature=float(cfg.rollout.temperature),
        top_p=float(cfg.rollout.top_p),
        top_k=max(int(cfg.rollout.top_k), 0),
        learning_rate=float(o.lr),
        lr_scheduler_type="constant",
        warmup_steps=0,
        weight_decay=float(o.weight_decay),
        adam_beta1=float(o.betas[0]),
        adam_beta2=float(o.betas[1]),
        adam_epsilon=float(o.eps),
        max_grad_norm=float(o.grad_clip),
        optim="adamw_torch",
        beta=0.0,
        epsilon=float(alg.clip_ratio_low),
        loss_type="dapo",
        scale_rewards="group" if alg.norm_adv_by_std_in_grpo else "none",
        mask_truncated_completions=False,
        use_vllm=False,
        max_steps=args.smoke_steps if args.smoke else 100_000,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        disable_tqdm=True,
        dataloader_num_workers=0,
        log_completions=False,
        # mimojax runs remat=none; GRPOConfig turns checkpointing on by default
        **{
            (
                "activation_checkpointing"
                if "activation_checkpointing" in GRPOConfig.__dataclass_fields__
                else "gradient_checkpointing"
            ): False
        },
    )
    clock = Clock()
    trainer = TimedGRPOTrainer(
        model=model,
        reward_funcs=arith_reward,
        args=targs,
        train_dataset=dataset,
        processing_class=tok,
        callbacks=[clock],
    )
    from transformers.trainer_callback import PrinterCallback

    trainer.remove_callback(PrinterCallback)  # Clock.on_log prints a short line instead
    trainer.train()
    return side_result(
        "trl",
        clock.step_s,
        TimedGRPOTrainer.gen_s,
        clock.evals,
        time.perf_counter() - t_proc,
        {
            "versions": {
                "trl": trl.__version__,
                "torch": torch.__version__,
                "transformers": transformers.__version__,
            },
            "torch_threads": torch.get_num_threads(),
        },
    )


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
