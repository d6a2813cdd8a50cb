"""Pass@k-aware GRPO on the hard arithmetic mix: configs/grpo_arith_hard_smollm2.py with the
`grpo_passk` estimator (mimojax/algos/advantages_outcome.py).

`grpo_passk` gives advantage only to a group's unique best sample (r_max - r_second, over the
group std); every other sample gets zero. With binary rewards and rare success, the one correct
answer among 8 is pushed up and the wrong ones are not pushed down, which keeps exploration
(entropy) up at the cost of a slower greedy (pass@1) climb; groups with two or more correct
answers carry no signal under it. Held-out pass@k is measured with `--config.eval.pass_k=8`.

Launch:   mimojax train --config configs/grpo_passk_arith_hard_smollm2.py --workdir runs/passk_hard
          args: as configs/grpo_arith_hard_smollm2.py (`:seed=N`, `:minutes=M`, `:runlocal`,
          `:model=NAME`)
Hardware: 2 CPU cores; any single accelerator runs it faster.
Expected: seed 0, idle 2-core box, 15 min, with dynamic sampling (the hard recipe's default
          then): held-out greedy 0.09 -> 0.11 (5.5 min) -> 0.07 -> 0.07 (15.4 min), below the
          base rate; pass@k itself was not evaluated (`--config.eval.pass_k=0` to save time).
          `python scripts/ablation_hard.py --variants passk --seed 0 --minutes 15`.
"""

from pathlib import Path

from mimojax.config.loader import load_config, parse_config_args

ARGS = {
    "seed": 0,  # data shuffle, sampling and trainer seeds
    "minutes": 15.0,  # training wall-time budget (evaluation excluded)
    "runlocal": False,  # two small steps, no evaluation: a smoke run
    "model": "smollm2-135m-instruct",  # registry name or HF dir
}


def get_config(arg=None):
    """Return the pass@k config; args: seed=N, minutes=M, runlocal, model=NAME."""
    args = parse_config_args(arg, ARGS)
    spec = str(Path(__file__).with_name("grpo_arith_hard_smollm2.py"))
    spec += f":seed={args['seed']},minutes={args['minutes']},model={args['model']},passk"
    spec += ",runlocal" if args["runlocal"] else ""
    cfg = load_config(spec)
    cfg.eval.pass_k = 0 if args["runlocal"] else 8  # the metric this estimator aims at
    return cfg
