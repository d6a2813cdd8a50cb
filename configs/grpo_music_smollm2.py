"""GRPO/GDPO on `envs/music`: SmolLM2-135M-Instruct writes two-voice ABC pieces under rules.

Task: 22 training / 8 held-out constraint sets (key, meter, bars, ranges, cadence, motif, no
parallel fifths/octaves; envs/music). Single turn: the model replies with an ```abc block;
music21 parses it and each rule is a reward dimension (score = their mean, 0 if unparseable).
The estimator is `gdpo` (each rule normalised within its group); the trainer passes the summed
score today, where gdpo equals whitened GRPO (envs/music/README.md).

Launch:   mimojax train --config configs/grpo_music_smollm2.py --workdir runs/grpo_music
          args: `:seed=N`, `:minutes=M` (training budget), `:runlocal` (two tiny steps, no
          evaluation), `:model=NAME` (e.g. tiny-random-llama for a plumbing check)
Hardware: 2 CPU cores; no system dependencies (music21 is a Python package).
Expected: a working loop, not a lift: not yet measured with SmolLM2 on this world.
"""

from pathlib import Path

from mimojax.config.loader import load_config, parse_config_args
from mimojax.envs.music.tasks import DATA_DIR

ARGS = {
    "seed": 0,  # data shuffle, sampling and trainer seeds
    "minutes": 15.0,  # training wall-time budget (evaluation excluded)
    "runlocal": False,  # two small steps, no evaluation or checkpoints: a smoke run
    "model": "smollm2-135m-instruct",
}


def get_config(arg=None):
    """Return the music-world config; args: seed=N, minutes=M, runlocal, model=NAME."""
    args = parse_config_args(arg, ARGS)
    cfg = load_config(str(Path(__file__).with_name("base.py")))
    cfg = single_turn_world(cfg, args, DATA_DIR / "music_train.jsonl",
                            DATA_DIR / "music_test.jsonl", "runs/grpo_music_smollm2",
                            prompt_tokens=384, answer_tokens=256)  # fmt: skip
    cfg.algorithm.adv_estimator = "gdpo"
    return cfg


def single_turn_world(cfg, args, train_file, eval_file, workdir, prompt_tokens, answer_tokens):
    """The settings the single-answer worlds share (grpo_visual_smollm2.py reuses them)."""
    cfg.model.name_or_path = args["model"]
    cfg.model.dtype = "float32"
    cfg.model.param_dtype = "float32"
    cfg.model.remat = "full"  # ~600-token sequences
    cfg.model.logprob_chunk_size = 256

    cfg.data.train_files = (str(train_file),)
    cfg.data.eval_files = (str(eval_file),)
    cfg.data.max_prompt_length = prompt_tokens
    cfg.data.batch_size = 2
    cfg.data.seed = int(args["seed"])

    cfg.rollout.n = 4
    cfg.rollout.temperature = 0.7
    cfg.rollout.max_new_tokens = answer_tokens
    cfg.rollout.max_concurrent_decodes = 8
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
    cfg.trainer.mini_batch_size = 2
    cfg.trainer.micro_batch_size = 8
    cfg.trainer.micro_batch_tokens = 2048
    cfg.trainer.seed = int(args["seed"])
    cfg.trainer.workdir = workdir

    cfg.eval.max_examples = 8
    cfg.eval.pass_k = 0
    cfg.reward.num_workers = 2
    cfg.reward.timeout_s = 60.0
    cfg.logging.wandb.mode = "offline"
    cfg.logging.wandb.project = "mimojax-worlds"
    cfg.checkpoint.every_steps = 10
    cfg.checkpoint.keep = 2

    if args["runlocal"]:
        cfg.rollout.n = 2
        cfg.rollout.max_new_tokens = 32
        cfg.trainer.total_steps = 2
        cfg.trainer.time_limit_minutes = 0.0
        cfg.trainer.micro_batch_size = 4
        cfg.trainer.workdir = workdir + "_local"
        cfg.eval.at_start = cfg.eval.at_end = False
        cfg.logging.wandb.mode = "disabled"
        cfg.checkpoint.every_steps = 0
    return cfg
