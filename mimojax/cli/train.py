"""`mimojax train / eval / report / export`: the trainer's commands (registered by cli/main.py)."""

from __future__ import annotations

import argparse
import json
import os
import sys


def _config_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", required=True, metavar="PATH[:ARGS]", help="configs/NAME.py[:args]")
    p.add_argument(
        "--workdir", default=None, help="metrics, checkpoints, report (default: trainer.workdir)"
    )


def register(sub) -> None:
    """Adds the trainer's subcommands to the `mimojax` parser."""
    train = sub.add_parser(
        "train", help="run RL training (resumes if WORKDIR has a checkpoint)", allow_abbrev=False
    )
    _config_arg(train)
    train.add_argument(
        "--no-resume", action="store_true", help="refuse to start if WORKDIR has a checkpoint"
    )
    train.set_defaults(func=cmd_train, takes_config=True)

    ev = sub.add_parser(
        "eval", help="held-out metrics of the latest checkpoint in WORKDIR", allow_abbrev=False
    )
    _config_arg(ev)
    ev.set_defaults(func=cmd_eval, takes_config=True)

    sft = sub.add_parser(
        "sft",
        help="supervised fine-tuning on chat rows (loss on assistant tokens); writes WORKDIR/hf",
        allow_abbrev=False,
    )
    _config_arg(sft)
    sft.add_argument(
        "--from-rollouts",
        action="store_true",
        help="rejection-sampling warm-up (RFT): sample the config's model sft.rft.n times on its "
        "data.train_files prompts, keep graded-correct answers (WORKDIR/rft_data.jsonl), "
        "fine-tune on them",
    )
    sft.add_argument(
        "--from-expert",
        action="store_true",
        help="the tool-use warm-up alone: the config's warmup.expert writes scripted traces "
        "(WORKDIR/warmup/expert_data.jsonl), SFT on them writes WORKDIR/warmup/hf "
        "(`mimojax train` on the same config runs it first by itself)",
    )
    sft.add_argument(
        "--then-train",
        action="store_true",
        help="with --from-rollouts: then run `mimojax train` from WORKDIR/hf in WORKDIR/rl "
        "(rerun to resume; a finished warm-up is not redone)",
    )
    sft.set_defaults(func=cmd_sft, takes_config=True)

    rep = sub.add_parser("report", help="(re)write WORKDIR/report.html", allow_abbrev=False)
    rep.add_argument("workdir")
    rep.add_argument("--target", type=float, default=None, help="held-out accuracy target (0-1)")
    rep.set_defaults(func=cmd_report, takes_config=False)

    ex = sub.add_parser(
        "export", help="write the latest checkpoint as an HF safetensors dir", allow_abbrev=False
    )
    _config_arg(ex)
    ex.add_argument("--out", required=True, help="output directory")
    ex.set_defaults(func=cmd_export, takes_config=True)


def _load(args):
    from mimojax.config.loader import load_config

    cfg = load_config(args.config, args.overrides)
    workdir = args.workdir or cfg.trainer.workdir
    return cfg, workdir


def _fmt_eval(metrics: dict) -> str:
    keys = sorted(k for k in metrics if k.startswith("val-core/"))
    return ", ".join(f"{k} = {metrics[k]:.3f}" for k in keys) or "no eval metrics"


def fixed_mmap_threshold(nbytes: int = 128 << 10) -> None:
    """Pins glibc's mmap threshold (as MALLOC_MMAP_THRESHOLD_ would), so XLA's large buffers
    stay mmap'd and go back to the OS when freed. Left dynamic, glibc raises it (up to 32 MB)
    after the first such free; per-layer weights and activations then come from the heap, which
    keeps freed pages: the demo's RSS sat ~1.3 GB above its live arrays before the update's own
    temporaries came on top (8.7 GB peak). No-op off glibc or when the variable is set;
    MIMOJAX_MMAP_THRESHOLD=N pins N bytes instead, 0 leaves glibc's dynamic threshold."""
    nbytes = int(os.environ.get("MIMOJAX_MMAP_THRESHOLD", nbytes))
    if "MALLOC_MMAP_THRESHOLD_" in os.environ or not sys.platform.startswith("linux") or not nbytes:
        return
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").mallopt(-3, int(nbytes))  # -3 = M_MMAP_THRESHOLD
    except (OSError, AttributeError):  # musl or another libc: keep its defaults
        pass


def cmd_train(args) -> int:
    from mimojax.checkpoint.manager import Checkpointer, CheckpointError
    from mimojax.data.prompts import DataError
    from mimojax.distributed import initialize_from_env, is_main_process
    from mimojax.observe.metrics import read_metrics
    from mimojax.observe.report import write_report
    from mimojax.train.trainer import Trainer

    initialize_from_env()  # multi-host (JAX_COORDINATOR_ADDRESS ...): before any device use
    fixed_mmap_threshold()
    cfg, workdir = _load(args)
    warmup = None
    if cfg.get("warmup", None) is not None and cfg.warmup.get("expert", ""):
        from mimojax.cli.warmup import rl_config, run_warmup

        try:
            warmup = run_warmup(cfg, workdir, log=lambda m: print(m, flush=True))
        except DataError as e:
            print(f"mimojax train: {e}", file=sys.stderr)
            return 1
        cfg = rl_config(cfg, workdir, warmup)
    if args.no_resume:
        ck = Checkpointer(os.path.join(workdir, "checkpoints"), keep=1, async_save=False)
        latest = ck.latest_step()
        ck.close()
        if latest is not None:
            print(f"mimojax train: {workdir} has a checkpoint at step {latest}", file=sys.stderr)
            return 1
    try:
        trainer = Trainer(cfg, workdir, progress=True)
    except (DataError, CheckpointError) as e:
        print(f"mimojax train: {e}", file=sys.stderr)
        return 1
    try:
        trainer.train()
    except CheckpointError as e:  # a save that failed (disk full, workdir gone): one clear line
        print(f"mimojax train: {e}", file=sys.stderr)
        return 1
    if not is_main_process():  # multi-host: process 0 reports
        return 0
    rows = read_metrics(workdir)
    evals = [r for r in rows if any(k.startswith("val-core/") for k in r)]
    if warmup is not None and "held_out_before" in warmup:
        print(f"held-out before (base model): {_fmt_eval(warmup['held_out_before'])}")
    if evals:
        first, last = evals[0], evals[-1]
        if warmup is not None:
            print(
                f"held-out after warm-up (step {first['step']}, {warmup['warmup_s']:.0f}s "
                f"warm-up): {_fmt_eval(first)}"
            )
        else:
            print(f"held-out before (step {first['step']}): {_fmt_eval(first)}")
        print(
            f"held-out after  (step {last['step']}, {last.get('perf/wall_s', 0.0):.0f}s "
            f"training): {_fmt_eval(last)}"
        )
    print(f"report: {write_report(workdir)}")
    return 0


def cmd_eval(args) -> int:
    from mimojax.train.trainer import Trainer

    cfg, workdir = _load(args)
    trainer = Trainer(cfg, workdir, progress=False)
    try:
        metrics = trainer.evaluate()
    finally:
        trainer.close()
    print(json.dumps({"step": trainer.step, **metrics}, indent=1, sort_keys=True))
    return 0


def cmd_sft(args) -> int:
    from mimojax.cli.sft import run_sft
    from mimojax.config.errors import ConfigError
    from mimojax.data.prompts import DataError

    if args.then_train and not args.from_rollouts:
        print("mimojax sft: --then-train needs --from-rollouts", file=sys.stderr)
        return 2
    cfg, workdir = _load(args)
    if args.from_expert:
        from mimojax.cli.warmup import run_warmup, warmup_settings

        try:
            if not warmup_settings(cfg).enabled:
                raise DataError("--from-expert needs warmup.expert (e.g. 'math') in the config")
            record = run_warmup(cfg, workdir, log=lambda m: print(m, flush=True))
        except (DataError, ConfigError) as e:
            print(f"mimojax sft: {e}", file=sys.stderr)
            return 1
        print(f"model: {os.path.join(workdir, 'warmup', 'hf')} ({record['traces']} traces)")
        return 0
    hf = os.path.join(workdir, "hf")
    if args.then_train and os.path.exists(os.path.join(hf, "config.json")):
        print(f"mimojax sft: {hf} exists: warm-up done, going on with RL", flush=True)
    else:
        try:
            if args.from_rollouts:
                from mimojax.cli.sft import run_rft

                metrics = run_rft(cfg, workdir, log=lambda m: print(m, flush=True))
            else:
                metrics = run_sft(cfg, workdir)
        except (DataError, ConfigError) as e:
            print(f"mimojax sft: {e}", file=sys.stderr)
            return 1
        print(f"final sft/loss {metrics['sft/loss']:.4f}; model: {hf}", flush=True)
    if not args.then_train:
        return 0
    rl = argparse.Namespace(
        config=args.config,
        overrides=[*args.overrides, f"model.name_or_path={hf}"],
        workdir=os.path.join(workdir, "rl"),
        no_resume=False,
    )
    print(f"mimojax sft: RL from {hf} in {rl.workdir}", flush=True)
    return cmd_train(rl)


def cmd_report(args) -> int:
    from mimojax.observe.report import write_report

    print(write_report(args.workdir, target=args.target))
    return 0


def cmd_export(args) -> int:
    from flax import nnx

    from mimojax.models.loader import save_hf
    from mimojax.train.roles import load_actor_model
    from mimojax.train.trainer import Trainer

    cfg, workdir = _load(args)
    trainer = Trainer(cfg, workdir, progress=False)
    trainer.close()
    model, tokenizer, _, _ = load_actor_model(cfg)
    graphdef, state = nnx.split(model)
    nnx.replace_by_pure_dict(state, trainer.actor.full_params())  # LoRA: adapters merged
    save_hf(nnx.merge(graphdef, state), tokenizer, args.out)
    print(f"step {trainer.step} -> {args.out}")
    return 0
