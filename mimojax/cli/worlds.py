"""`mimojax eval --env NAME|all --model PATH_OR_CKPT`: a model's held-out scores per task world
(mimojax/eval/worlds.py). Without --env, `mimojax eval --config` is the trainer's eval."""

from __future__ import annotations

import argparse
import os
import shlex
import sys

BASE_CONFIG = "configs/base.py"


def register(sub) -> None:
    """Adds --env / --model / ... to the existing `eval` subcommand."""
    ev = sub.choices["eval"]
    for action in ev._actions:  # --config stays the trainer's; with --env it is optional
        if action.dest == "config":
            action.required = False
    ev.description = (
        "With --config only: held-out metrics of a run's latest checkpoint. With --env: a "
        "model's (or, with --config, a run's checkpoint's) scores on task worlds' held-out splits."
    )
    ev.add_argument(
        "--env", default=None, metavar="NAME|all", help="world(s), comma-separated, or all"
    )
    ev.add_argument(
        "--model",
        default=None,
        metavar="NAME_OR_PATH_OR_CKPT",
        help="registry name, HF dir, .gguf, or a run's workdir (with --config)",
    )
    ev.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    ev.add_argument("--limit", type=int, default=0, help="held-out rows per world (0 = all)")
    ev.add_argument("--pass-k", type=int, default=4, help="samples per row for pass@k (0 = off)")
    ev.add_argument("--temperature", type=float, default=0.7, help="pass@k sampling temperature")
    ev.add_argument("--max-new-tokens", type=int, default=128, help="per model turn")
    ev.add_argument("--slots", type=int, default=16)
    ev.add_argument("--out", default="runs/eval", help="directory for eval.json / eval.html")
    ev.add_argument(
        "--judge-url",
        default=None,
        help="OpenAI-compatible judge for rubric worlds (sets MIMOJAX_JUDGE_URL; 'none' = rules "
        "only; default: the row's setting, http://127.0.0.1:8000/v1)",
    )
    ev.add_argument("--judge-model", default=None, help="the judge's model id")
    ev.add_argument("--reward-workers", type=int, default=2)
    ev.add_argument("--reward-timeout-s", type=float, default=120.0)
    fallback = ev.get_default("func")
    ev.set_defaults(func=lambda args: cmd_eval(args, fallback))


def cmd_eval(args: argparse.Namespace, fallback) -> int:
    """Dispatch: --env scores worlds; otherwise the trainer's `eval --config`."""
    if args.env is None:
        if not args.config:
            print(
                "mimojax eval: give --config (a run's eval) or --env and --model", file=sys.stderr
            )
            return 2
        return fallback(args)
    from mimojax.eval.worlds import discover_worlds, format_table, write_report

    worlds = discover_worlds()
    wanted = list(worlds) if args.env == "all" else args.env.split(",")
    unknown = [w for w in wanted if w not in worlds]
    if unknown:
        print(f"mimojax eval: unknown world(s) {unknown}; have {sorted(worlds)}", file=sys.stderr)
        return 2
    if not args.model and not args.config:
        print("mimojax eval --env: give --model (or --config of a run)", file=sys.stderr)
        return 2
    # the grader workers (spawned by the pool) inherit the judge settings from the environment
    if args.judge_url:
        os.environ["MIMOJAX_JUDGE_URL"] = args.judge_url
    if args.judge_model:
        os.environ["MIMOJAX_JUDGE_MODEL"] = args.judge_model
    report = run_eval(args, {w: worlds[w] for w in wanted})
    js, page = write_report(report, args.out)
    print(format_table(report))
    print(f"wrote {js} and {page}")
    return 0


def _world_config(args, held_out: str):
    from mimojax.config.loader import load_config

    if not os.path.exists(BASE_CONFIG):
        raise SystemExit(f"mimojax eval --env: run it from the repo root ({BASE_CONFIG} not found)")
    cfg = load_config(BASE_CONFIG)
    cfg.data.eval_files = (str(held_out),)
    cfg.data.max_prompt_length = 1024  # tool worlds list the tools' schemas in the prompt
    cfg.eval.max_examples = int(args.limit)
    cfg.rollout.max_new_tokens = int(args.max_new_tokens)
    cfg.rollout.max_concurrent_decodes = int(args.slots)
    cfg.rollout.temperature = float(args.temperature)
    cfg.rollout.agent.max_turns = 3
    cfg.rollout.agent.max_tool_calls = 4
    cfg.rollout.agent.max_response_tokens = 3 * int(args.max_new_tokens)
    return cfg


def run_eval(args, worlds: dict) -> dict:
    """Loads the model once and scores each world; a world that fails is reported, not fatal."""
    import time

    from mimojax.cli.serve import load_any_model
    from mimojax.eval.worlds import score_world
    from mimojax.extras import WORLD_EXTRAS, check_extra
    from mimojax.rewards.pool import RewardPool
    from mimojax.train.role_settings import agent_settings, prompt_dataset
    from mimojax.train.roles import engine_from_config, sampling_from_config

    started = time.perf_counter()
    model, tokenizer, what = load_any_model(
        args.model or args.workdir or "", args.config, getattr(args, "overrides", ()), args.dtype
    )
    print(f"loaded {what} in {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
    report = {
        "model": what,
        "pass_k": int(args.pass_k),
        "limit": int(args.limit),
        "command": "mimojax " + shlex.join(sys.argv[1:]) if sys.argv else "",
        "worlds": {},
    }
    engine = None
    with RewardPool(int(args.reward_workers), float(args.reward_timeout_s)) as pool:
        for name, held_out in worlds.items():
            print(f"eval {name}: {held_out}", file=sys.stderr, flush=True)
            try:
                if name in WORLD_EXTRAS:  # before any generation for it
                    check_extra(WORLD_EXTRAS[name], f"the {name} world")
                cfg = _world_config(args, held_out)
                if engine is None:  # one engine for every world (same prompt/response sizes)
                    engine = engine_from_config(cfg, model, tokenizer)
                rows = prompt_dataset(cfg, tokenizer, "eval").all_rows()
                rows = rows[: args.limit or None]
                report["worlds"][name] = score_world(
                    engine, tokenizer, rows, pool,
                    greedy=sampling_from_config(cfg, greedy=True),
                    sampled=sampling_from_config(cfg), pass_k=int(args.pass_k),
                    agent=agent_settings(cfg),
                )  # fmt: skip
            except Exception as e:  # noqa: BLE001 - one broken world must not hide the others
                report["worlds"][name] = {"error": f"{type(e).__name__}: {e}"[:300]}
    report["wall_s"] = time.perf_counter() - started
    return report
