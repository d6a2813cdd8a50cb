"""GRPO with tools on `envs/code`: SmolLM2-135M-Instruct writes Python functions in a sandbox.

Task: 24 training / 8 held-out function-writing tasks (envs/code). Each trajectory is a
multi-turn tool agent: the model may call write_file / run_python / run_tests (run under
bubblewrap), and ends with a final answer; the reward is the fraction of hidden tests that
pass on solution.py (or the last ```python block), run in the sandbox.

Launch:   mimojax train --config configs/grpo_code_smollm2.py --workdir runs/grpo_code
          args: `:seed=N`, `:minutes=M` (training budget), `:runlocal` (two tiny steps, no
          evaluation), `:model=NAME` (e.g. tiny-random-llama for a plumbing check),
          `:warmup` (first SFT on scripted-expert traces from the reference solutions,
          envs/code/expert.py, in WORKDIR/warmup; RL then starts from WORKDIR/warmup/hf)
Hardware: 2 CPU cores; needs `bwrap` (make setup installs it as root).
Expected: a working loop, not a lift: SmolLM2-135M rarely emits a well-formed tool call and
          almost never passes hidden tests (docs/benchmarks.md "Agents" has the measured numbers).
"""

from pathlib import Path

from ml_collections import ConfigDict

from mimojax.config.loader import load_config, parse_config_args
from mimojax.envs.code.tasks import DATA_DIR

ARGS = {
    "seed": 0,  # data shuffle, sampling and trainer seeds
    "minutes": 15.0,  # training wall-time budget (evaluation excluded)
    "runlocal": False,  # two small steps, no evaluation or checkpoints: a smoke run
    "model": "smollm2-135m-instruct",
    "warmup": False,  # first a tool-use warm-up on the reference solutions (envs/code/expert.py)
}


def get_config(arg=None):
    """Return the code-world config; args: seed=N, minutes=M, runlocal, model=NAME."""
    args = parse_config_args(arg, ARGS)
    cfg = load_config(str(Path(__file__).with_name("base.py")))
    cfg = agentic_world(cfg, args, DATA_DIR / "code_train.jsonl", DATA_DIR / "code_test.jsonl",
                        "runs/grpo_code_smollm2")  # fmt: skip
    if args["warmup"]:  # write_file(reference) -> run_tests -> answer, from the training tasks
        with cfg.unlocked():
            cfg.warmup = ConfigDict(
                {"expert": "code", "num_chats": 48, "steps": 24, "batch_size": 4, "lr": 2e-5,
                 "seed": int(args["seed"]), "eval_base": True}
            )  # fmt: skip
        if args["runlocal"]:
            cfg.warmup.num_chats, cfg.warmup.steps, cfg.warmup.batch_size = 2, 1, 1
            cfg.warmup.eval_base = False
    return cfg


def agentic_world(cfg, args, train_file, eval_file, workdir):
    """The settings the tool-agent worlds share (grpo_cyber_smollm2.py reuses them)."""
    cfg.model.name_or_path = args["model"]
    cfg.model.dtype = "float32"
    cfg.model.param_dtype = "float32"
    # Trajectories of ~1k tokens (prompt with tools + turns): recompute layers in backward and
    # take log-probs in chunks, or one 8-row pass asks XLA for ~30 GB.
    cfg.model.remat = "full"
    cfg.model.logprob_chunk_size = 256

    cfg.data.train_files = (str(train_file),)
    cfg.data.eval_files = (str(eval_file),)
    # The tools' schemas are listed in the prompt: ~430-660 tokens with SmolLM2's tokenizer.
    cfg.data.max_prompt_length = 768
    cfg.data.batch_size = 2
    cfg.data.seed = int(args["seed"])

    cfg.rollout.n = 4
    cfg.rollout.temperature = 0.7
    cfg.rollout.max_new_tokens = 128  # per model turn
    cfg.rollout.max_concurrent_decodes = 8
    cfg.rollout.seed = int(args["seed"])
    cfg.rollout.agent.default = "tool_agent"
    cfg.rollout.agent.max_turns = 3
    cfg.rollout.agent.max_tool_calls = 4
    cfg.rollout.agent.max_response_tokens = 384
    cfg.rollout.agent.max_wall_s = 120.0
    cfg.sandbox.timeout_s = 5.0
    cfg.sandbox.memory_mb = 512

    cfg.algorithm.adv_estimator = "grpo"
    cfg.algorithm.loss_agg_mode = "token-mean"
    cfg.optimizer.lr = 1e-5
    cfg.optimizer.weight_decay = 0.0
    cfg.optimizer.warmup_steps = 0

    cfg.trainer.total_steps = 1000  # bounded by the wall-time budget
    cfg.trainer.time_limit_minutes = float(args["minutes"])
    cfg.trainer.eval_at_minutes = ()
    cfg.trainer.mini_batch_size = 2
    cfg.trainer.micro_batch_size = 8  # one GRPO step's 8 samples: splits over 1, 2, 4, 8 devices
    cfg.trainer.micro_batch_tokens = 2048  # ... in passes of at most 2048 padded tokens
    cfg.trainer.seed = int(args["seed"])
    cfg.trainer.workdir = workdir

    cfg.eval.max_examples = 8
    cfg.eval.pass_k = 0
    cfg.reward.num_workers = 2
    cfg.reward.timeout_s = 60.0  # a grader runs several sandboxed tests
    cfg.logging.wandb.mode = "offline"
    cfg.logging.wandb.project = "mimojax-agentic"
    cfg.checkpoint.every_steps = 10
    cfg.checkpoint.keep = 2

    if args["runlocal"]:
        cfg.rollout.n = 2
        cfg.rollout.max_new_tokens = 32
        cfg.rollout.agent.max_response_tokens = 96
        cfg.trainer.total_steps = 2
        cfg.trainer.time_limit_minutes = 0.0
        cfg.trainer.micro_batch_size = 4
        cfg.trainer.workdir = workdir + "_local"
        cfg.eval.at_start = cfg.eval.at_end = False
        cfg.logging.wandb.mode = "disabled"
        cfg.checkpoint.every_steps = 0
    return cfg
