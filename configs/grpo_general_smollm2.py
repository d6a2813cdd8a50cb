"""GRPO on `envs/general`: SmolLM2-135M-Instruct answers knowledge-work requests graded by a rubric.

Task: 27 training / 9 held-out requests (envs/general: capitals, explanations, short emails,
bulleted lists, JSON records). The reward is the rubric's weighted score: rule items (length,
must-mention facts, forbidden phrases, format) checked in code, judge items sent to an
OpenAI-compatible judge endpoint; judge calls, tokens and seconds are logged as reward/judge_*.

Launch:   mimojax serve --model smollm2-135m-instruct --port 8000 &     # the judge
          mimojax train --config configs/grpo_general_smollm2.py --workdir runs/grpo_general
          args: `:seed=N`, `:minutes=M` (training budget), `:runlocal` (two tiny steps, no
          evaluation, rule-only scoring unless judge_url is given), `:model=NAME`,
          `:judge_url=URL` ("none" = rule items only), `:judge_model=NAME`
          The judge settings reach the grader workers through MIMOJAX_JUDGE_URL /
          MIMOJAX_JUDGE_MODEL, which get_config sets (the workers inherit the environment).
Hardware: 2 CPU cores (plus whatever runs the judge).
Expected: a working loop; the rule items move first (format, length), see envs/general/README.md.
"""

import os
from pathlib import Path

from mimojax.config.loader import load_config, parse_config_args
from mimojax.envs.general.tasks import DATA_DIR

ARGS = {
    "seed": 0,  # data shuffle, sampling and trainer seeds
    "minutes": 15.0,  # training wall-time budget (evaluation excluded)
    "runlocal": False,  # two small steps, no evaluation or checkpoints: a smoke run
    "model": "smollm2-135m-instruct",
    "judge_url": "",  # "" = http://127.0.0.1:8000/v1 (none with runlocal); "none" = rules only
    "judge_model": "smollm2-135m-instruct",
}


def get_config(arg=None):
    """Return the general-world config; args: seed, minutes, runlocal, model, judge_url/model."""
    args = parse_config_args(arg, ARGS)
    cfg = load_config(str(Path(__file__).with_name("base.py")))
    cfg.model.name_or_path = args["model"]
    cfg.model.dtype = "float32"
    cfg.model.param_dtype = "float32"
    cfg.model.remat = "none"
    cfg.model.logprob_chunk_size = 0

    cfg.data.train_files = (str(DATA_DIR / "general_train.jsonl"),)
    cfg.data.eval_files = (str(DATA_DIR / "general_test.jsonl"),)
    cfg.data.max_prompt_length = 96
    cfg.data.batch_size = 4
    cfg.data.seed = int(args["seed"])

    cfg.rollout.n = 4
    cfg.rollout.temperature = 0.7
    cfg.rollout.max_new_tokens = 96
    cfg.rollout.max_concurrent_decodes = 16
    cfg.rollout.seed = int(args["seed"])

    cfg.algorithm.adv_estimator = "grpo"
    cfg.algorithm.loss_agg_mode = "token-mean"
    cfg.algorithm.use_kl_loss = False

    cfg.optimizer.lr = 1e-5
    cfg.optimizer.weight_decay = 0.0
    cfg.optimizer.warmup_steps = 0

    cfg.trainer.total_steps = 1000  # bounded by the wall-time budget
    cfg.trainer.time_limit_minutes = float(args["minutes"])
    cfg.trainer.eval_at_minutes = ()
    cfg.trainer.mini_batch_size = 4
    cfg.trainer.micro_batch_size = 16
    cfg.trainer.seed = int(args["seed"])
    cfg.trainer.workdir = "runs/grpo_general_smollm2"

    cfg.eval.max_examples = 9
    cfg.eval.pass_k = 0
    cfg.reward.num_workers = 2
    cfg.reward.timeout_s = 120.0  # a rubric makes up to 2 judge calls, each with retries
    cfg.logging.wandb.mode = "offline"
    cfg.logging.wandb.project = "mimojax-general"
    cfg.checkpoint.every_steps = 10
    cfg.checkpoint.keep = 2

    judge_url = str(args["judge_url"]) or ("none" if args["runlocal"] else "")
    if args["runlocal"]:
        cfg.data.batch_size = 2
        cfg.rollout.n = 2
        cfg.rollout.max_new_tokens = 16
        cfg.rollout.max_concurrent_decodes = 4
        cfg.trainer.total_steps = 2
        cfg.trainer.time_limit_minutes = 0.0
        cfg.trainer.mini_batch_size = 2
        cfg.trainer.micro_batch_size = 4
        cfg.trainer.workdir = "runs/grpo_general_smollm2_local"
        cfg.eval.at_start = cfg.eval.at_end = False
        cfg.logging.wandb.mode = "disabled"
        cfg.checkpoint.every_steps = 0
    if judge_url:
        os.environ["MIMOJAX_JUDGE_URL"] = judge_url
    os.environ["MIMOJAX_JUDGE_MODEL"] = str(args["judge_model"])
    return cfg
