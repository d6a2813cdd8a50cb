"""GRPO on Qwen2.5 / Qwen3 (0.5B-72B) at the hardware ladder's scale: one config, sized by model.

Task: the math world's arithmetic word problems by default (`envs/math`); point
`data.train_files` / `data.eval_files` at another world's JSONL to change it. Each model size gets
the choices `mimojax plan` says it needs (see docs/usage.md "Planning and launching"): bfloat16
weights and compute, full remat, 256-token log-prob chunks, fsdp over every device
(`mesh.fsdp=-1`), and LoRA (rank 64, all linears) from 7B up; the 0.5B-4B models train all weights.

Launch:   scripts/launch/one_gpu.sh | one_node.sh | multi_node.sh (they pass
          `configs/grpo_qwen.py:model=NAME,path=DIR` and any `--config.KEY=VALUE` overrides), or
          mimojax train --config configs/grpo_qwen.py:model=qwen2.5-7b,path=/models/Qwen2.5-7B
          args: `model=` a name below, `path=` the HF weights dir (default: the name, which only
          `mimojax plan` can use), `lora=R` (-1: the size's default, 0: off), `runlocal`
          (the tiny random Qwen2 on CPU: checks the plumbing only)
Hardware: 0.5B on one 24 GB card; 7B LoRA on one 80 GB H100; 14B-72B LoRA on 8 x H100 80 GB;
          full-weight 32B-72B on 4 x 8 H100 (`mimojax plan` prints the numbers).
Expected: not measured here (no GPU on the machine these configs were written on); the planner's
          step-time column is a roofline estimate, not a benchmark.
"""

from pathlib import Path

from mimojax.config.loader import ConfigError, load_config, parse_config_args
from mimojax.envs.math.tasks import DATA_DIR

ARGS = {
    "model": "qwen2.5-7b",
    "path": "",  # HF dir of the weights; "" = the model name (plans only, nothing is downloaded)
    "lora": -1,  # adapter rank; -1 = the size's default below, 0 = train all weights
    "runlocal": False,
}

# name -> (default LoRA rank, micro-batch rows across all devices, decode slots, tensor axis).
# From 14B up the mesh is tensor=8 inside a node (fsdp over nodes): with weights sharded only by
# fsdp, the colocated engine would all-gather every weight at every decode step (`mimojax plan`'s
# generation time: ~1000 s per step for 72B on 8 cards, ~60 s with tensor=8).
SIZES = {
    "qwen2.5-0.5b": (0, 16, 128, 1),
    "qwen2.5-1.5b": (0, 16, 128, 1),
    "qwen2.5-3b": (0, 16, 128, 1),
    "qwen3-0.6b": (0, 16, 128, 1),
    "qwen3-1.7b": (0, 16, 128, 1),
    "qwen3-4b": (0, 16, 128, 1),
    # 7B/8B: 8 rows split over one node's fsdp=8 too; on one 80 GB card the peak is still the
    # weight sync's (plan: 57.6 GiB at micro 4 and at 8), the update's activations 10 GiB
    "qwen2.5-7b": (64, 8, 64, 1),
    "qwen3-8b": (64, 8, 64, 1),
    "qwen2.5-14b": (64, 16, 64, 8),
    "qwen3-14b": (64, 16, 64, 8),
    "qwen2.5-32b": (64, 16, 64, 8),
    "qwen3-32b": (64, 16, 64, 8),
    "qwen2.5-72b": (64, 4, 32, 8),  # KV cache of 32 slots x 1.5k tokens: 15 GiB per card
}


def get_config(arg=None):
    """Return the Qwen GRPO config; args: model=NAME, path=DIR, lora=R, runlocal."""
    args = parse_config_args(arg, ARGS)
    name = args["model"]
    if name not in SIZES:
        raise ConfigError(f"config arg 'model': unknown {name!r}; known: {', '.join(SIZES)}")
    lora, micro, slots, tensor = SIZES[name]
    cfg = load_config(str(Path(__file__).with_name("base.py")))

    m = cfg.model
    m.name_or_path = args["path"] or name
    m.dtype = "bfloat16"
    m.param_dtype = "bfloat16"  # float32 master weights would double every weight set
    m.remat = "full"  # 1.5k-token sequences: recompute beats keeping every layer's residuals
    m.logprob_chunk_size = 256  # float32 logits of 152k vocab: bounded per chunk
    m.lora.rank = lora if args["lora"] < 0 else args["lora"]
    m.lora.alpha = 2.0 * m.lora.rank if m.lora.rank else 16.0

    cfg.mesh.data, cfg.mesh.fsdp, cfg.mesh.tensor = 1, -1, tensor
    cfg.sharding.preset = "fsdp_tensor" if tensor > 1 else "fsdp"

    cfg.data.train_files = (str(DATA_DIR / "arith_train.jsonl"),)
    cfg.data.eval_files = (str(DATA_DIR / "arith_test.jsonl"),)
    cfg.data.max_prompt_length = 512
    cfg.data.batch_size = 32
    cfg.rollout.n = 8
    cfg.rollout.temperature = 1.0
    cfg.rollout.max_new_tokens = 1024
    cfg.rollout.max_concurrent_decodes = slots

    cfg.algorithm.adv_estimator = "grpo"
    cfg.algorithm.loss_agg_mode = "token-mean"
    cfg.algorithm.use_kl_loss = False

    cfg.optimizer.lr = 1e-5 if m.lora.rank else 1e-6
    cfg.trainer.total_steps = 200
    cfg.trainer.mini_batch_size = 32
    cfg.trainer.micro_batch_size = micro
    cfg.trainer.workdir = f"runs/grpo_{name}"
    cfg.eval.max_examples = 200
    cfg.logging.wandb.mode = "offline"
    cfg.checkpoint.every_steps = 20

    if args["runlocal"]:
        m.name_or_path = "tiny-random-qwen2"
        cfg.mesh.tensor, cfg.sharding.preset = 1, "fsdp"
        m.dtype = m.param_dtype = "float32"
        m.logprob_chunk_size = 0
        cfg.data.max_prompt_length = 96
        cfg.data.batch_size = cfg.trainer.mini_batch_size = 2
        cfg.rollout.n = 4
        cfg.rollout.max_new_tokens = 16
        cfg.rollout.max_concurrent_decodes = 8
        cfg.trainer.micro_batch_size = 8
        cfg.trainer.total_steps = 2
        cfg.trainer.workdir = "runs/grpo_qwen_local"
        cfg.eval.at_start = cfg.eval.at_end = False
        cfg.logging.wandb.mode = "disabled"
        cfg.checkpoint.every_steps = 0
    return cfg
