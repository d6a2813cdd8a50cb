"""GRPO on a tiny random-weight model: the whole loop in seconds on a CPU.

For tests and for checking the plumbing (data -> rollout -> reward -> update ->
checkpoint), not for learning anything: the model is random, so rewards stay
at chance.

Launch:   mimojax train --config configs/grpo_tiny.py --workdir /tmp/grpo_tiny
          (args: `:model=tiny-random-qwen3`, `:runlocal`)
Hardware: CPU (2 cores) or any single accelerator; also 8 fake CPU devices in tests.
Expected: 3 steps in well under a minute on 2 CPU cores; reward stays near zero.
"""

from pathlib import Path

from mimojax.config.loader import load_config, parse_config_args
from mimojax.envs.math.tasks import DATA_DIR

ARGS = {
    "model": "tiny-random-llama",  # or tiny-random-qwen2, tiny-random-qwen3
    "runlocal": False,  # accepted for uniformity with other configs; this one is CPU-sized
}


def get_config(arg=None):
    """Return the tiny GRPO config; args: model=NAME, runlocal."""
    args = parse_config_args(arg, ARGS)
    cfg = load_config(str(Path(__file__).with_name("base.py")))

    cfg.model.name_or_path = args["model"]
    cfg.model.dtype = "float32"
    cfg.model.remat = "none"
    cfg.model.logprob_chunk_size = 0

    cfg.data.train_files = (str(DATA_DIR / "arith_train.jsonl"),)
    cfg.data.eval_files = (str(DATA_DIR / "arith_test.jsonl"),)
    cfg.data.system_prompt = "Be brief."
    cfg.data.batch_size = 2
    cfg.data.max_prompt_length = 96
    cfg.eval.max_examples = 4
    cfg.eval.pass_k = 2
    cfg.reward.num_workers = 1
    # 2 prompts * 4 samples = 8: splits evenly over 1, 2, 4 or 8 data-parallel devices.
    cfg.rollout.n = 4
    cfg.rollout.max_new_tokens = 16
    cfg.rollout.max_concurrent_decodes = 8

    cfg.trainer.total_steps = 3
    cfg.trainer.mini_batch_size = 2
    cfg.trainer.micro_batch_size = 8
    cfg.trainer.workdir = "runs/grpo_tiny"
    cfg.optimizer.lr = 1e-4

    cfg.logging.wandb.mode = "disabled"
    cfg.checkpoint.every_steps = 2
    cfg.checkpoint.keep = 2  # one older step to fall back to when the newest is damaged
    cfg.checkpoint.async_save = False
    return cfg
