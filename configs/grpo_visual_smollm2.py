"""GRPO on `envs/visual`: SmolLM2-135M-Instruct writes HTML/CSS pages graded by how they render.

Task: 14 training / 6 held-out pages described in text (header bar, sidebar, card, boxes, list;
envs/visual). Single turn: the model replies with an ```html block; headless chromium renders it
at 320x240 with JavaScript and network off; the reward is (SSIM with the reference rendering,
rescaled so an empty page is 0, + fraction of DOM checks) / 2.

Launch:   mimojax train --config configs/grpo_visual_smollm2.py --workdir runs/grpo_visual
          args: `:seed=N`, `:minutes=M` (training budget), `:runlocal` (two tiny steps, no
          evaluation), `:model=NAME` (e.g. tiny-random-llama for a plumbing check)
Hardware: 2 CPU cores; needs the system `chromium` (make setup installs it as root).
Expected: a working loop, not a lift: not yet measured with SmolLM2 on this world.
"""

import importlib.util
from pathlib import Path

from mimojax.config.loader import load_config, parse_config_args
from mimojax.envs.visual.tasks import DATA_DIR

ARGS = {
    "seed": 0,  # data shuffle, sampling and trainer seeds
    "minutes": 15.0,  # training wall-time budget (evaluation excluded)
    "runlocal": False,  # two small steps, no evaluation or checkpoints: a smoke run
    "model": "smollm2-135m-instruct",
}


def _music_config():
    spec = importlib.util.spec_from_file_location(
        "grpo_music_smollm2", Path(__file__).with_name("grpo_music_smollm2.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def get_config(arg=None):
    """Return the visual-world config; args: seed=N, minutes=M, runlocal, model=NAME."""
    args = parse_config_args(arg, ARGS)
    cfg = load_config(str(Path(__file__).with_name("base.py")))
    cfg = _music_config().single_turn_world(
        cfg, args, DATA_DIR / "visual_train.jsonl", DATA_DIR / "visual_test.jsonl",
        "runs/grpo_visual_smollm2", prompt_tokens=256, answer_tokens=384,
    )  # fmt: skip
    # One chromium per reward worker (~150 MB each); a render is ~0.2-0.6 s.
    cfg.reward.num_workers = 2
    return cfg
