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
Expected: see README "Default job" for held-out accuracy before / after and the wall time
          (measured with `scripts/demo_lift.py --seeds 0 1 2 --minutes 15`).
"""

from pathlib import Path

from mimojax.config import load_config, parse_config_args
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
    cfg.model.remat = "none"  # short sequences: activations are small, recompute is waste
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
    cfg.trainer.micro_batch_size = 16
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
