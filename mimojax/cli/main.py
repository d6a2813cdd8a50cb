"""The `mimojax` command line: `info`, `generate`, and the trainer's `train / eval / report /
export` (in cli/train.py)."""

from __future__ import annotations

import argparse
import importlib.metadata
import logging
import sys
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from mimojax.config.loader import ConfigError
from mimojax.extras import MissingExtraError

DEFAULT_CONFIG = "configs/base.py"
VERSIONED = (
    "jax",
    "jaxlib",
    "flax",
    "optax",
    "orbax-checkpoint",
    "grain",
    "transformers",
    "mimojax",
)


# ---------------------------------------------------------------- argv helpers


def split_config_overrides(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """Pull `--config.KEY=VALUE` / `--config.KEY VALUE` out of argv; return (rest, overrides)."""
    rest, overrides = [], []
    i = 0
    while i < len(argv):
        token = argv[i]
        if token.startswith("--config."):
            body = token[len("--config.") :]
            if "=" in body:
                overrides.append(body)
            elif i + 1 < len(argv):
                overrides.append(f"{body}={argv[i + 1]}")
                i += 1
            else:
                raise ConfigError(f"{token} needs a value: {token}=VALUE")
        else:
            rest.append(token)
        i += 1
    return rest, overrides


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _non_negative_float(text: str) -> float:
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser for all subcommands."""
    parser = argparse.ArgumentParser(
        prog="mimojax",
        description="Pure-JAX RL post-training for LLMs.",
        epilog="Config overrides: --config configs/X.py[:args] --config.KEY=VALUE ...",
        allow_abbrev=False,
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    info = sub.add_parser(
        "info",
        help="devices, the mesh a config builds, library versions",
        allow_abbrev=False,
    )
    info.add_argument(
        "--config",
        default=None,
        metavar="PATH[:ARGS]",
        help=f"config whose mesh to show (default: {DEFAULT_CONFIG}); --config.KEY=VALUE overrides",
    )
    info.set_defaults(func=cmd_info, takes_config=True)

    gen = sub.add_parser("generate", help="sample answers to prompts", allow_abbrev=False)
    gen.add_argument(
        "--model",
        default="smollm2-135m-instruct",
        metavar="NAME_OR_PATH",
        help="registry name, HF model dir or .gguf file (default: %(default)s)",
    )
    gen.add_argument(
        "--prompt",
        action="append",
        required=True,
        metavar="TEXT",
        help="a prompt; repeat for several",
    )
    gen.add_argument("--max-new-tokens", type=_positive_int, default=64)
    gen.add_argument(
        "--temperature", type=_non_negative_float, default=0.0, help="0 = greedy (default)"
    )
    gen.add_argument("--top-k", type=int, default=0, help="0 = off (default)")
    gen.add_argument("--top-p", type=float, default=1.0, help="1 = off (default)")
    gen.add_argument("--n", type=_positive_int, default=1, help="samples per prompt")
    gen.add_argument("--slots", type=_positive_int, default=8, help="concurrent decode slots")
    gen.add_argument("--seed", type=int, default=0)
    gen.add_argument(
        "--no-chat-template",
        action="store_true",
        help="feed the raw prompt text instead of a chat-formatted user turn",
    )
    gen.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    gen.set_defaults(func=cmd_generate, takes_config=False)

    dash = sub.add_parser(
        "dashboard", help="live page of runs' metrics: curves, costs, restarts", allow_abbrev=False
    )
    dash.add_argument("workdirs", nargs="+", metavar="WORKDIR", help="runs to show side by side")
    dash.add_argument("--port", type=int, default=8050, help="0 = any free port")
    dash.add_argument("--host", default="127.0.0.1")
    dash.add_argument("--interval", type=float, default=2.0, help="seconds between page polls")
    dash.add_argument("--target", type=float, default=None, help="held-out accuracy target (0-1)")
    dash.set_defaults(func=cmd_dashboard, takes_config=False)
    from mimojax.cli import train as cli_train

    cli_train.register(sub)
    from mimojax.cli import serve as cli_serve

    cli_serve.register(sub)
    from mimojax.cli import worlds as cli_worlds

    cli_worlds.register(sub)
    from mimojax.cli import plan as cli_plan

    cli_plan.register(sub)
    return parser


# ---------------------------------------------------------------- info


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _load_cli_config(spec: str | None, overrides: Sequence[str]):
    from mimojax.config.loader import load_config

    return load_config(spec or DEFAULT_CONFIG, overrides)


def _describe_mesh(cfg, num_devices: int) -> str:
    from mimojax.config.loader import resolve_mesh_shape

    shape = resolve_mesh_shape(cfg.mesh, num_devices)  # ConfigError names the mesh keys
    sizes = " ".join(f"{k}={v}" for k, v in shape.items())
    try:
        from mimojax.sharding import make_mesh
    except ImportError as e:
        return f"{sizes} (not built: mimojax.sharding unavailable: {e})"
    mesh = make_mesh(cfg.mesh)
    built = " ".join(f"{name}={size}" for name, size in mesh.shape.items())
    return f"{built} over {mesh.devices.size} devices"


def cmd_info(args: argparse.Namespace) -> int:
    """Print devices, the config's mesh and validation, and library versions."""
    import jax

    from mimojax.config.loader import validate

    devices = jax.devices()
    kinds = Counter(d.device_kind for d in devices)
    print(f"platform: {jax.default_backend()}")
    print(f"device_count: {jax.device_count()}")
    print(f"local_device_count: {jax.local_device_count()}")
    print(f"process: {jax.process_index()} of {jax.process_count()}")
    print("device_kinds: " + ", ".join(f"{k} x{n}" for k, n in kinds.items()))

    status = 0
    spec = args.config or DEFAULT_CONFIG
    try:
        cfg = _load_cli_config(args.config, args.overrides)
        print(f"config: {spec}")
        print(f"mesh: {_describe_mesh(cfg, jax.device_count())}")
        validate(cfg, jax.device_count())
        print("config check: ok")
    except ConfigError as e:
        print(f"config {spec}: {e}", file=sys.stderr)
        status = 1

    print("versions:")
    for dist in VERSIONED:
        print(f"  {dist}: {_version(dist)}")
    return status


# ---------------------------------------------------------------- generate


def _as_id_list(encoded: Any) -> list[int]:
    """Token ids from whatever a tokenizer returned: list, batch of one, dict or array."""
    if isinstance(encoded, Mapping) or hasattr(encoded, "input_ids"):
        encoded = encoded["input_ids"]
    if hasattr(encoded, "tolist"):
        encoded = encoded.tolist()
    encoded = list(encoded)
    if encoded and isinstance(encoded[0], (list, tuple)):
        if len(encoded) != 1:
            raise ValueError(f"expected one sequence of token ids, got {len(encoded)}")
        encoded = list(encoded[0])
    return [int(i) for i in encoded]


def encode_prompt(tokenizer: Any, prompt: str, chat_template: bool = True) -> list[int]:
    """Prompt token ids, as one chat-formatted user turn unless chat_template is False."""
    if chat_template:
        messages = [{"role": "user", "content": prompt}]
        try:
            encoded = tokenizer.apply_chat_template(
                messages, add_generation_prompt=True, tokenize=True
            )
        except (AttributeError, ValueError) as e:
            # Base models have no template; a raw prompt is the honest fallback.
            print(f"warning: no chat template ({e}); using the raw prompt", file=sys.stderr)
        else:
            return _as_id_list(encoded)
    return _as_id_list(tokenizer.encode(prompt))


def cmd_generate(args: argparse.Namespace) -> int:
    """Load a model, sample an answer to each prompt and print it."""
    from mimojax.engine import JaxEngine, SamplingError, SamplingParams, bucket_length, generate
    from mimojax.models import load_model

    try:
        sampling = SamplingParams(
            temperature=args.temperature,
            top_k=args.top_k,
            top_p=args.top_p,
            seed=args.seed,
            max_new_tokens=args.max_new_tokens,
        )
    except SamplingError as e:
        raise SystemExit(f"mimojax generate: {e}") from None
    started = time.perf_counter()
    print(f"loading {args.model} ...", file=sys.stderr, flush=True)
    model, tokenizer = load_model(args.model, dtype=args.dtype)
    cfg = model.config
    print(
        f"loaded {cfg.model_type}: {cfg.num_layers} layers, hidden {cfg.hidden_size}, "
        f"vocab {cfg.vocab_size} in {time.perf_counter() - started:.1f} s",
        file=sys.stderr,
        flush=True,
    )
    prompt_ids = [
        encode_prompt(tokenizer, p, chat_template=not args.no_chat_template) for p in args.prompt
    ]
    longest = max(map(len, prompt_ids))
    prefill = bucket_length(longest, limit=1 << 30)
    engine = JaxEngine(
        model,
        tokenizer,
        max_concurrent_decodes=args.slots,
        max_prefill_length=prefill,
        max_cache_length=prefill + args.max_new_tokens,
    )
    started = time.perf_counter()
    stats: dict = {}
    out = generate(engine, prompt_ids, n=args.n, sampling=sampling, progress=True, stats=stats)
    seconds = time.perf_counter() - started
    n_new = stats["completion_tokens"]
    print(
        f"generated {n_new} tokens in {seconds:.1f} s incl. compile ({n_new / seconds:.1f} tok/s; "
        f"decode {stats['decode_s']:.1f} s, prefill {stats['prefill_s']:.1f} s)",
        file=sys.stderr,
        flush=True,
    )
    new_ids = [[c.token_ids for c in samples] for samples in out]
    several = len(args.prompt) > 1
    several = several or args.n > 1
    for i, (prompt, samples) in enumerate(zip(args.prompt, new_ids, strict=True)):
        for j, ids in enumerate(samples):
            if several:
                print(f"### [{i}.{j}] {prompt}" if args.n > 1 else f"### [{i}] {prompt}")
            print(tokenizer.decode(list(ids), skip_special_tokens=True))
            if several:
                print()
    return 0


# ---------------------------------------------------------------- dashboard


def cmd_dashboard(args: argparse.Namespace) -> int:
    """Serve the live dashboard for the given run directories until Ctrl-C."""
    from mimojax.observe.dashboard.server import serve

    try:
        serve(args.workdirs, args.host, args.port, args.interval, args.target)
    except (FileNotFoundError, OSError) as e:
        print(f"mimojax dashboard: {e}", file=sys.stderr)
        return 1
    return 0


# ---------------------------------------------------------------- entry point


def _quiet_abandoned_reads(unraisable) -> None:
    """Drops orbax's "Exception ignored in <coroutine ...>" reports for the array reads it
    abandons when a corrupt checkpoint is skipped (the skip itself is one warning line)."""
    obj, exc = unraisable.object, unraisable.exc_value
    if getattr(getattr(obj, "cr_code", None), "co_filename", "").find("orbax") >= 0:
        return
    if obj is None and isinstance(exc, RuntimeError) and str(exc) == "Event loop is closed":
        return  # the same abandoned reads, completing after the loop that awaited them closed
    sys.__unraisablehook__(unraisable)


def _from_orbax(record: logging.LogRecord) -> bool:
    """A log record raised in orbax's code (its path, or a frame of its exception's traceback)."""
    if "orbax" in record.pathname:
        return True
    tb = record.exc_info[2] if record.exc_info else None
    while tb is not None:
        if "orbax" in tb.tb_frame.f_code.co_filename:
            return True
        tb = tb.tb_next
    return "orbax" in record.getMessage()


class _OrbaxErrorsOnOneLine(logging.Filter):
    """Orbax's background threads log a failed save with full tracebacks (absl), and asyncio
    reports the same failed writes again when their tasks are collected; the CLI reports that
    failure as one line (CheckpointSaveError), so absl's records keep only their message and
    asyncio's repeats are dropped."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not _from_orbax(record):
            return True
        if record.name == "asyncio":
            return False
        record.exc_info, record.exc_text = None, None
        return True


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `mimojax` command; returns the exit status."""
    sys.unraisablehook = _quiet_abandoned_reads
    for name in ("absl", "asyncio"):
        logging.getLogger(name).addFilter(_OrbaxErrorsOnOneLine())
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        rest, overrides = split_config_overrides(argv)
    except ConfigError as e:
        parser.error(str(e))
    args = parser.parse_args(rest)
    if overrides and not args.takes_config:
        parser.error(f"'{args.command}' takes no --config overrides, got --config.{overrides[0]}")
    args.overrides = overrides
    try:
        return args.func(args)
    except ConfigError as e:
        print(f"mimojax {args.command}: {e}", file=sys.stderr)
        return 1
    except MissingExtraError as e:  # a feature without its optional extra: one line, no traceback
        print(e, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
