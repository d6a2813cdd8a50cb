"""PPO with a critic (GAE) on the default job's task: SmolLM2-135M-Instruct, envs/math.

Same task, data and budget as `grpo_arith_smollm2.py`; advantages come from a value model
(`ValueModel.from_decoder`: the policy's trunk with a fresh scalar head) trained alongside
the actor, one sample per prompt as in classic PPO-RLHF, more prompts per step.

Launch:   mimojax train --config configs/ppo_arith_smollm2.py --workdir runs/ppo_arith
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
    """Return the PPO config; args: seed=N, minutes=M, tiny, runlocal."""
    args = parse_config_args(arg, ARGS)
    base = "grpo_tiny.py" if args["tiny"] else "grpo_arith_smollm2.py"
    spec = str(Path(__file__).with_name(base))
    if not args["tiny"]:
        spec += f":seed={args['seed']},minutes={args['minutes']}"
        spec += ",runlocal" if args["runlocal"] else ""
    cfg = load_config(spec)
    cfg.model.value_head = True
    cfg.algorithm.adv_estimator = "gae"
    cfg.algorithm.gamma = 1.0
    cfg.algorithm.lam = 0.95
    cfg.algorithm.use_kl_in_reward = True  # classic PPO-RLHF: KL folded into the reward
    cfg.algorithm.kl_ctrl.kl_coef = 0.01
    cfg.critic.lr = 1e-5 if not args["tiny"] else 1e-4
    cfg.critic.cliprange_value = 0.5
    cfg.trainer.ppo_epochs = 2  # several passes per batch: the old-logprob pass is needed
    if args["tiny"]:
        cfg.trainer.workdir = "runs/ppo_tiny"
    else:
        cfg.rollout.n = 1
        cfg.data.batch_size = 8 if args["runlocal"] else 32
        cfg.trainer.mini_batch_size = 4 if args["runlocal"] else 16
        cfg.trainer.micro_batch_size = 4 if args["runlocal"] else 16
        cfg.trainer.workdir = "runs/ppo_arith_smollm2"
    return cfg
