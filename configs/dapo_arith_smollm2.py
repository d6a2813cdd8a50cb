"""DAPO on the default job's task: clip-higher, token-mean loss, overlong shaping, group filter.

DAPO (Yu et al. 2025) changes GRPO in four places, each a knob here: an asymmetric clip
(`clip_ratio_high` 0.28 > `clip_ratio_low` 0.2), token-mean aggregation, a soft penalty for
responses that run into the token budget (`reward.overlong_buffer`), and dropping groups whose
samples all scored the same (`algorithm.filter_groups`: masked out of the update here, where
DAPO resamples). No KL term.

Launch:   mimojax train --config configs/dapo_arith_smollm2.py --workdir runs/dapo_arith
          args: `:seed=N`, `:minutes=M`, `:tiny` (tiny random model, for tests),
          `:runlocal` (SmolLM2, two small steps: a smoke run)
Hardware: 2 CPU cores; any single accelerator.
Expected: not measured yet beyond the few-step test (tests/train/test_recipes.py).
"""

from pathlib import Path

from mimojax.config.loader import load_config, parse_config_args

ARGS = {
    "seed": 0,  # data shuffle, sampling and trainer seeds
    "minutes": 15.0,  # training wall-time budget (evaluation excluded)
    "tiny": False,  # tiny random model (configs/grpo_tiny.py) instead of SmolLM2: for tests
    "runlocal": False,  # SmolLM2, two small steps, no evaluation: a smoke run
}


def get_config(arg=None):
    """Return the DAPO config; args: seed=N, minutes=M, tiny, runlocal."""
    args = parse_config_args(arg, ARGS)
    base = "grpo_tiny.py" if args["tiny"] else "grpo_arith_smollm2.py"
    spec = str(Path(__file__).with_name(base))
    if not args["tiny"]:
        spec += f":seed={args['seed']},minutes={args['minutes']}"
        spec += ",runlocal" if args["runlocal"] else ""
    cfg = load_config(spec)
    cfg.algorithm.adv_estimator = "grpo"
    cfg.algorithm.clip_ratio_low = 0.2
    cfg.algorithm.clip_ratio_high = 0.28
    cfg.algorithm.loss_agg_mode = "token-mean"
    cfg.algorithm.use_kl_loss = False
    cfg.algorithm.filter_groups = True
    cfg.reward.overlong_buffer.enable = True
    cfg.reward.overlong_buffer.len = max(cfg.rollout.max_new_tokens // 4, 1)
    cfg.reward.overlong_buffer.penalty_factor = 1.0
    cfg.trainer.workdir = "runs/dapo_tiny" if args["tiny"] else "runs/dapo_arith_smollm2"
    return cfg
