"""The default job (`make demo`): GRPO teaches SmolLM2-135M-Instruct to answer word problems.

Task: one-step arithmetic word problems from `envs/math` (add / subtract / multiply small
numbers), "Answer with just the final number.", graded by the sympy answer checker. The base
model mostly knows the sums but answers verbosely and runs out of its 24-token budget, so it
scores 29% greedy on the first 100 held-out problems; GRPO rewards the responses that reach a
correct answer, which teaches it to answer directly.

Launch:   mimojax train --config configs/grpo_arith_smollm2.py --workdir runs/grpo_arith
          args: `:seed=N` (sampling, shuffle and init seeds), `:minutes=M` (training budget),
          `:runlocal` (two tiny steps, no evaluation: a smoke run)
Hardware: 2 CPU cores (the numbers below); any single accelerator runs it faster.
Expected: see docs/benchmarks.md "The default job" for held-out accuracy before / after and the
          wall time (measured with `scripts/demo_lift.py --seeds 0 1 2 --minutes 15`).
"""

from pathlib import Path

from mimojax.config.loader import load_config, parse_config_args
from mimojax.envs.math.tasks import DATA_DIR

ARGS = {
    "seed": 0,  # data shuffle, sampling and trainer seeds
    "minutes": 15.0,  # training wall-time budget (evaluation excluded)
    "runlocal": False,  # two small steps, no evaluation or checkpoints: a smoke run
}


def get_config(arg=None):
    """Return the demo config; args: seed=N, minutes=M (training wall-time budget), runlocal."""
    args = parse_config_args(arg, ARGS)
    cfg = load_config(str(Path(__file__).with_name("base.py")))

    cfg.model.name_or_path = "smollm2-135m-instruct"
    cfg.model.dtype = "float32"  # bf16 matmuls are slower than f32 on CPU
    cfg.model.param_dtype = "float32"
    cfg.model.remat = "full"  # memory: see the note at the end of this file
    cfg.model.logprob_chunk_size = 0

    cfg.data.train_files = (str(DATA_DIR / "arith_train.jsonl"),)
    cfg.data.eval_files = (str(DATA_DIR / "arith_test.jsonl"),)
    cfg.data.max_prompt_length = 96
    cfg.data.batch_size = 4
    cfg.data.seed = int(args["seed"])

    cfg.rollout.n = 8
    cfg.rollout.temperature = 0.7  # T=1 samples are far worse than greedy (3% vs 29%): no signal
    cfg.rollout.max_new_tokens = 24
    cfg.rollout.max_concurrent_decodes = 32
    cfg.rollout.seed = int(args["seed"])

    cfg.algorithm.adv_estimator = "grpo"
    cfg.algorithm.loss_agg_mode = "token-mean"
    cfg.algorithm.use_kl_loss = False  # the reference pass would cost a forward per step

    cfg.optimizer.lr = 2e-5
    cfg.optimizer.weight_decay = 0.0
    cfg.optimizer.warmup_steps = 0

    cfg.trainer.total_steps = 1000  # bounded by the wall-time budget below
    cfg.trainer.time_limit_minutes = float(args["minutes"])
    cfg.trainer.eval_at_minutes = (5.0, 10.0)
    cfg.trainer.mini_batch_size = 4
    cfg.trainer.micro_batch_size = 8  # memory: see the note at the end of this file
    cfg.trainer.seed = int(args["seed"])
    cfg.trainer.workdir = "runs/grpo_arith_smollm2"

    cfg.eval.max_examples = 100
    cfg.eval.pass_k = 0
    cfg.reward.num_workers = 1
    cfg.logging.wandb.mode = "offline"
    cfg.logging.wandb.project = "mimojax-demo"
    cfg.checkpoint.every_steps = 10
    cfg.checkpoint.keep = 2

    if args["runlocal"]:
        cfg.data.batch_size = 2
        cfg.rollout.n = 4
        cfg.rollout.max_concurrent_decodes = 8
        cfg.trainer.total_steps = 2
        cfg.trainer.time_limit_minutes = 0.0
        cfg.trainer.eval_at_minutes = ()
        cfg.trainer.mini_batch_size = 2
        cfg.trainer.micro_batch_size = 8
        cfg.trainer.workdir = "runs/grpo_arith_smollm2_local"
        cfg.eval.at_start = cfg.eval.at_end = False
        cfg.logging.wandb.mode = "disabled"
        cfg.checkpoint.every_steps = 0
    return cfg


# Memory (issue 13; 2 CPU cores, f32; measured 2026-12-04 on a shared, loaded box).
# `/usr/bin/time -v mimojax train --config configs/grpo_arith_smollm2.py:minutes=1 --workdir W`
# (two held-out evals, 1-2 steps): max RSS 8.74 GB before (remat "none", micro-batch 16), 4.68 GB
# after (remat "full", micro-batch 8, plus the code changes below). Per phase, from
# `python scripts/measure_memory.py` (peak RSS of each phase, GB, before -> after): model load
# 1.3; engine init 3.1 -> 3.0 (f32 params 0.54 + Adam 1.08 + the engine's copy 0.54 live);
# eval / gen 4.4 -> 3.4-4.0; update_actor 9.1 -> 4.1; async checkpoint save at the end ~4.5
# (a 1.6 GB copy of the state while it writes). What held the update: XLA temporaries of 4.46 GB
# (memory_analysis(): activations of 16 rows x ~88 tokens x 30 layers without remat, plus the
# gradient carry and the optimizer's jnp.where keep) on top of ~1.5 GB of freed-but-kept glibc
# heap. Now: remat "full" + micro-batch 8 -> 1.28 GB temporaries; the skip-on-non-finite is a
# lax.cond (train/step.py); the engine's weights are dropped during the update (Rollout.release)
# and mimojax train pins glibc's mmap threshold (cli/train.py). Gradients: micro-batch 16 -> 8
# alone changes them by 2e-7 (relative L2); remat "full" by 5e-5, which is f32 rounding: the
# remat "none" gradient itself is 1.1e-4 from a float64-matmul reference on the same batch.
