"""GRPO with tools on `envs/cyber`: SmolLM2-135M-Instruct reproduces vulnerabilities in small
programs (crash a C parser under UBSan, leak a planted flag from a Python service).

Task: 16 training / 8 held-out rows over 12 vulnerable programs (envs/cyber). The agent reads
the target's source and runs it on inputs with list_files / read_file / write_file /
run_target (under bubblewrap), then leaves its input in input.txt (or a final fenced block);
the grader rebuilds the target, plants a fresh random flag and checks the crash or the leak.

Launch:   mimojax train --config configs/grpo_cyber_smollm2.py --workdir runs/grpo_cyber
          args: `:seed=N`, `:minutes=M`, `:runlocal`, `:model=NAME` (as grpo_code_smollm2.py)
Hardware: 2 CPU cores; needs `bwrap` and `gcc` (make setup installs bwrap as root).
Expected: a working loop, not a lift (docs/benchmarks.md "Agents" has the measured numbers).
"""

import importlib.util
from pathlib import Path

from mimojax.config.loader import load_config, parse_config_args
from mimojax.envs.cyber.tasks import DATA_DIR

ARGS = {"seed": 0, "minutes": 15.0, "runlocal": False, "model": "smollm2-135m-instruct"}


def _code_config():
    spec = importlib.util.spec_from_file_location(
        "grpo_code_smollm2", Path(__file__).with_name("grpo_code_smollm2.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def get_config(arg=None):
    """Return the cyber-world config; args: seed=N, minutes=M, runlocal, model=NAME."""
    args = parse_config_args(arg, ARGS)
    cfg = load_config(str(Path(__file__).with_name("base.py")))
    cfg = _code_config().agentic_world(
        cfg, args, DATA_DIR / "cyber_train.jsonl", DATA_DIR / "cyber_test.jsonl",
        "runs/grpo_cyber_smollm2",
    )  # fmt: skip
    cfg.rollout.agent.max_turns = 4  # read the source, try an input, then answer
    cfg.rollout.agent.max_tool_calls = 6
    return cfg
