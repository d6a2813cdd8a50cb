"""GRPO on SmolLM2-135M-Instruct, the default first real run.

Single-turn prompts, 8 samples each, outcome reward, KL loss against the
reference; the accelerator-sized sibling of the default job
(`grpo_arith_smollm2.py`): the same envs/math arithmetic split, bigger
batches, longer responses, bf16. Point `data.train_files` / `data.eval_files`
at your own jsonl/parquet rows (`prompt`, `ground_truth`, `env`) to change task.

Launch:   mimojax train --config configs/grpo_smollm2.py
          mimojax train --config configs/grpo_smollm2.py:runlocal   (CPU smoke run)
          args: `:model=NAME` swaps the model (registry name, HF dir or .gguf)
Hardware: 1x H100/H200 (fsdp over all local devices); `:runlocal` on a 2-core CPU.
Expected: not measured on an accelerator yet; `:runlocal` runs 2 steps in ~2 min on 2 cores.
"""

from pathlib import Path

from mimojax.config.loader import load_config, parse_config_args
from mimojax.envs.math.tasks import DATA_DIR

ARGS = {
    "model": "smollm2-135m-instruct",  # model name_or_path
    "runlocal": False,  # shrink everything to run a couple of steps on a CPU
}


def get_config(arg=None):
    """Return the SmolLM2 GRPO config; args: model=NAME, runlocal."""
    args = parse_config_args(arg, ARGS)
    cfg = load_config(str(Path(__file__).with_name("base.py")))

    cfg.model.name_or_path = args["model"]
    cfg.model.dtype = "bfloat16"

    cfg.data.train_files = (str(DATA_DIR / "arith_train.jsonl"),)
    cfg.data.eval_files = (str(DATA_DIR / "arith_test.jsonl"),)
    cfg.data.batch_size = 64
    cfg.data.max_prompt_length = 256
    cfg.rollout.n = 8
    cfg.rollout.temperature = 1.0
    cfg.rollout.max_new_tokens = 512
    cfg.rollout.max_concurrent_decodes = 512

    cfg.algorithm.adv_estimator = "grpo"
    cfg.algorithm.use_kl_loss = True
    cfg.algorithm.kl_loss_coef = 0.001

    cfg.optimizer.lr = 1e-6
    cfg.optimizer.warmup_steps = 10

    cfg.trainer.total_steps = 200
    cfg.trainer.mini_batch_size = 16
    cfg.trainer.micro_batch_size = 32
    cfg.trainer.eval_every = 25
    cfg.trainer.workdir = "runs/grpo_smollm2"
    cfg.logging.wandb.project = "mimojax-grpo-smollm2"

    if args["runlocal"]:
        cfg.model.dtype = "float32"
        cfg.model.logprob_chunk_size = 0
        cfg.data.batch_size = 2
        cfg.data.max_prompt_length = 128
        cfg.rollout.n = 4
        cfg.rollout.max_new_tokens = 32
        cfg.rollout.max_concurrent_decodes = 8
        cfg.optimizer.warmup_steps = 0
        cfg.trainer.total_steps = 2
        cfg.trainer.mini_batch_size = 2
        cfg.trainer.micro_batch_size = 8
        cfg.trainer.eval_every = 0
        cfg.trainer.workdir = "runs/grpo_smollm2_local"
        cfg.logging.wandb.mode = "disabled"
        cfg.checkpoint.every_steps = 0
    return cfg
