"""A tool agent on the hard arithmetic mix: a calculator warm-up, then GRPO with the tool agent.

SmolLM2-135M-Instruct never writes a `<tool_call>` by itself, and text-only RL on this split
levels off at +11..+22 points in 15 minutes (configs/grpo_arith_hard_smollm2.py). MiMo starts
agentic RL from a model distilled for tool use; at our scale:

1. Warm-up (mimojax/cli/warmup.py, WORKDIR/warmup, kept once done): the base model's held-out
   score ("held-out before"), `warmup.num_chats` scripted-expert traces from the math world's
   own generators (mimojax/envs/math/expert.py: word problems and bare expressions, several
   phrasings, some that recover from a rejected expression; never `data.train_files`), and
   `warmup.steps` SFT steps on the assistant tokens, rendered exactly as the tool agent
   renders them at RL time.
2. GRPO from WORKDIR/warmup/hf with `rollout.agent.default = "tool_agent"`: every math row runs
   with the `calculator` tool (mimojax/envs/math/tools.py), in training and in the held-out
   evaluation (greedy). Logged per step: agent_loop/tool_call_rate, valid_call_rate,
   correct_with_tool, tool_errors/*, tool_call_counts/*, num_turns/*, timing_s/tools.

`minutes` is the budget of both phases: RL gets what the warm-up left (evaluation excluded).

Launch:   mimojax train --config configs/agent_arith_tools_smollm2.py:minutes=15 --workdir W
          (rerun to resume; a finished warm-up is kept, a killed one is redone)
          args: `:seed=N`, `:minutes=M`, `:runlocal` (a smoke run), `:model=NAME`;
          data files as in any config: --config.data.train_files="('my_math.jsonl',)"
          (rows {"prompt" or "messages", "ground_truth", "env": "math"})
Hardware: 2 CPU cores; any single accelerator runs it faster.
Expected: idle 2-core box, 15 minutes: held-out greedy 0.10 (the base model, given the tool:
          it never calls it) -> 0.88 / 0.99 / 1.00 after the warm-up (seeds 0 / 1 / 2,
          330-500 s of it) -> 1.00 / 1.00 / 1.00 after 3-8 RL steps (470-610 s); every held-out
          answer calls the calculator; 6.4 GB peak RSS, 22-26 min wall with the three evaluations.
          The text-only hard recipe from the same base ends at +11..+22 (docs/benchmarks.md,
          "A tool agent on the hard split").
"""

from pathlib import Path

from ml_collections import ConfigDict

from mimojax.config.loader import load_config, parse_config_args

ARGS = {
    "seed": 0,  # traces, data shuffle, sampling and trainer seeds
    "minutes": 15.0,  # warm-up + RL wall-time budget (evaluation excluded)
    "runlocal": False,  # a tiny warm-up and two small RL steps, no evaluation: a smoke run
    "model": "smollm2-135m-instruct",  # registry name or HF dir
}


def get_config(arg=None):
    """Return the tool-agent recipe; args: seed=N, minutes=M, runlocal, model=NAME."""
    args = parse_config_args(arg, ARGS)
    spec = str(Path(__file__).with_name("grpo_arith_hard_smollm2.py"))
    spec += f":seed={args['seed']},minutes={args['minutes']},model={args['model']}"
    spec += ",runlocal" if args["runlocal"] else ""
    cfg = load_config(spec)

    # The prompt lists the calculator (~130 tokens with the tool instructions).
    cfg.data.max_prompt_length = 256
    cfg.rollout.max_new_tokens = 48  # per turn: a call or an answer
    ag = cfg.rollout.agent
    ag.default = "tool_agent"  # every row without its own `agent` runs with the world's tools
    ag.max_turns = 3  # call, (a retry,) answer
    ag.max_tool_calls = 3
    ag.max_response_tokens = 192  # model + observation tokens of the whole trajectory
    # per trajectory from its start, queueing included: 100 held-out trajectories share the
    # engine, and 60 s cut most of them off after the call (the answer never came)
    ag.max_wall_s = 600.0

    with cfg.unlocked():
        cfg.warmup = ConfigDict(
            {
                "expert": "math",  # mimojax/envs/math/expert.py writes the traces
                "num_chats": 256,
                "steps": 16,  # ~15 s each on 2 cores (8 traces of ~260 tokens)
                "batch_size": 8,
                "lr": 5e-5,
                "seed": int(args["seed"]),
                "eval_base": True,  # the "held-out before" line: the base model, same agent
            }
        )
    # A tool-agent evaluation takes ~3 min on 2 cores: base, after the warm-up, at the end only.
    cfg.trainer.eval_at_minutes = ()
    cfg.trainer.workdir = "runs/agent_arith_tools_smollm2"
    if args["runlocal"]:
        cfg.warmup.num_chats = 8
        cfg.warmup.steps = 2
        cfg.warmup.batch_size = 2
        cfg.warmup.eval_base = False
        cfg.rollout.max_new_tokens = 16
        ag.max_response_tokens = 64
        cfg.trainer.workdir = "runs/agent_arith_tools_smollm2_local"
    return cfg
