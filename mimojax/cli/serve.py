"""`mimojax serve`: an OpenAI-compatible server over the engine (mimojax/engine/server.py), and
the model loading it shares with `mimojax eval --env` (a name, a path or a run's checkpoint)."""

from __future__ import annotations

import argparse
import os
import sys
import time

from mimojax.extras import require


def add_model_args(p: argparse.ArgumentParser, default: str | None = None) -> None:
    """--model / --config / --dtype: what `load_any_model` reads."""
    p.add_argument(
        "--model",
        default=default,
        required=default is None,
        metavar="NAME_OR_PATH_OR_CKPT",
        help="registry name (smollm2-135m-instruct, tiny-random-llama), HF dir, .gguf file, "
        "or a run's workdir (with --config: its latest checkpoint)",
    )
    p.add_argument(
        "--config",
        default=None,
        metavar="PATH[:ARGS]",
        help="the run's config, to load the latest checkpoint of --model (a workdir) or of "
        "the config's trainer.workdir",
    )
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")


def is_run_dir(path: str) -> bool:
    return os.path.isdir(os.path.join(path, "checkpoints"))


def load_any_model(model: str, config: str | None, overrides=(), dtype: str = "float32"):
    """(model, tokenizer, description): a registered name, HF dir or .gguf, or, with a run
    config, the latest checkpoint of that run (its actor, LoRA adapters merged)."""
    from mimojax.models import load_model

    if config is None:
        if is_run_dir(model):
            raise SystemExit(
                f"{model} is a run's workdir: pass its --config too (or `mimojax export` it)"
            )
        return (*load_model(model, dtype=dtype), model)
    from flax import nnx

    from mimojax.config.loader import load_config
    from mimojax.train.roles import load_actor_model
    from mimojax.train.trainer import Trainer

    cfg = load_config(config, list(overrides))
    workdir = model if model and is_run_dir(model) else cfg.trainer.workdir
    cfg.trainer.workdir = workdir
    trainer = Trainer(cfg, workdir, progress=False)
    trainer.close()
    if trainer.step == 0:
        raise SystemExit(f"{workdir}: no checkpoint to load")
    net, tokenizer, _, _ = load_actor_model(cfg)
    graphdef, state = nnx.split(net)
    nnx.replace_by_pure_dict(state, trainer.actor.full_params())
    return nnx.merge(graphdef, state), tokenizer, f"{workdir}@step{trainer.step}"


def register(sub) -> None:
    """Adds `serve` to the `mimojax` parser."""
    sv = sub.add_parser(
        "serve",
        help="OpenAI-compatible HTTP server (/v1/chat/completions, /v1/completions, /v1/models)",
        allow_abbrev=False,
    )
    add_model_args(sv, default="smollm2-135m-instruct")
    sv.add_argument("--host", default="127.0.0.1")
    sv.add_argument("--port", type=int, default=8000)
    sv.add_argument("--served-model-name", default=None, help="the id clients pass as `model`")
    sv.add_argument("--slots", type=int, default=8, help="concurrent decode slots")
    sv.add_argument("--max-context", type=int, default=2048, help="prompt + completion tokens")
    sv.add_argument(
        "--max-prompt", type=int, default=None, help="longest prompt (default: 3/4 of the context)"
    )
    sv.add_argument("--log-level", default="warning")
    sv.set_defaults(func=cmd_serve, takes_config=True)


def cmd_serve(args: argparse.Namespace) -> int:
    """Load a model and serve it until interrupted."""
    uvicorn = require("uvicorn", "serve", "mimojax serve")  # before minutes of model loading
    require("fastapi", "serve", "mimojax serve")

    from mimojax.engine import EngineError, JaxEngine
    from mimojax.engine.server import OpenAIServer

    started = time.perf_counter()
    model, tokenizer, what = load_any_model(args.model, args.config, args.overrides, args.dtype)
    max_prompt = args.max_prompt or max(1, args.max_context * 3 // 4)
    try:
        engine = JaxEngine(
            model,
            tokenizer,
            max_concurrent_decodes=args.slots,
            max_prefill_length=max_prompt,
            max_cache_length=args.max_context,
        )
    except EngineError as e:
        print(f"mimojax serve: {e}", file=sys.stderr)
        return 2
    name = args.served_model_name or args.model
    aliases = {args.model, os.path.basename(os.path.normpath(args.model)), what}
    app = OpenAIServer(engine, tokenizer, name, aliases=sorted(aliases)).app()
    print(
        f"mimojax serve: {what} as '{name}' on http://{args.host}:{args.port}/v1 "
        f"(context {args.max_context}, prompt <= {max_prompt}, {args.slots} slots; "
        f"loaded in {time.perf_counter() - started:.1f} s)",
        file=sys.stderr,
        flush=True,
    )
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)
    return 0
