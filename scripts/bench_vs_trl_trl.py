"""The TRL side of scripts/bench_vs_trl.py: TRL's GRPOTrainer on the default job's shape.

Reads its shape and hyperparameters from `configs/grpo_arith_smollm2.py`; `TRL_CHOICES` lists
where it cannot match mimojax exactly. torch, transformers and trl are imported only here.
"""

from __future__ import annotations

import json
import shutil
import time
import warnings
from pathlib import Path

from bench_vs_trl_common import eval_minutes, job_config, side_result

# Where the TRL run departs from mimojax's config, and why (also printed into summary.json).
TRL_CHOICES = {
    "loss_type": "dapo: token losses summed and divided by the number of completion tokens in "
    "the whole (global) batch, which is mimojax's token-mean over the mini-batch (= the batch)",
    "per_device_train_batch_size": "counts completions in TRL (32 = 4 prompts x 8 generations); "
    "mimojax does the same update in micro-batches (trainer.micro_batch_size) with gradient "
    "accumulation",
    "gradient_checkpointing": "follows mimojax's model.remat: on unless the config says "
    "remat='none' (the demo config runs remat='full' since issue 13, for memory)",
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


def run_trl(args, workdir: Path, hf_dir: Path) -> dict:
    import torch
    import transformers
    import trl
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from mimojax.data.prompts import read_rows
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

    eval_rows = read_rows(str(DATA_DIR / "arith_test.jsonl"))[: args.eval_examples]
    expected = json.loads((hf_dir / "bench_prompt_ids.json").read_text())
    for row, ids in zip(eval_rows, expected):
        if prompt_ids(row["prompt"]) != ids:
            raise SystemExit("TRL side: chat-templated prompt ids differ from mimojax's")
    eval_ids = [prompt_ids(r["prompt"]) for r in eval_rows]
    train_rows = read_rows(str(DATA_DIR / "arith_train.jsonl"))
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
        # Checkpoint activations exactly when mimojax's config rematerialises them.
        **{
            (
                "activation_checkpointing"
                if "activation_checkpointing" in GRPOConfig.__dataclass_fields__
                else "gradient_checkpointing"
            ): str(cfg.model.remat) != "none"
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
