"""The tool-use warm-up step of `mimojax train` (a config with `warmup.expert` set).

`mimojax train` on such a config runs, in WORKDIR: the base model's held-out evaluation
("held-out before"), the scripted expert's traces and SFT on them (WORKDIR/warmup, kept when
done), then RL from WORKDIR/warmup/hf. `trainer.time_limit_minutes` is the budget of both: RL
gets what the warm-up left. Evaluation time is excluded, as everywhere.
"""

from __future__ import annotations

import copy
import os
import time

from ml_collections import ConfigDict

from mimojax.sft.chat_sft import SftSettings, train_chats
from mimojax.sft.warmup import (
    WarmupSettings,
    read_done,
    restart,
    write_done,
    write_expert_rows,
)
from mimojax.train.role_settings import optimizer_settings


def warmup_settings(cfg: ConfigDict) -> WarmupSettings:
    """`warmup.*` of the run config (absent: no warm-up)."""
    group = cfg.get("warmup", None)
    return WarmupSettings.from_dict(dict(group or {}))


def _evaluate_base(cfg: ConfigDict, workdir: str) -> dict:
    """The base model's held-out metrics, with the run's own evaluation (same tool agent)."""
    from mimojax.train.trainer import Trainer

    base = copy.deepcopy(cfg)
    with base.unlocked():
        base.warmup.expert = ""
    trainer = Trainer(base, workdir, progress=False)
    try:
        return trainer.evaluate()
    finally:
        trainer.close()


def run_warmup(cfg: ConfigDict, workdir: str, *, log=print, progress: bool = True) -> dict:
    """Runs (or finds) the warm-up in WORKDIR/warmup; returns its record (done.json)."""
    from mimojax.train.roles import load_actor_model

    settings = warmup_settings(cfg)
    wdir = os.path.join(workdir, "warmup")
    done = read_done(wdir)
    if done is not None:
        log(f"warm-up: done in {wdir} ({done['warmup_s']:.0f} s), going on with RL")
        return done
    restart(wdir)  # a warm-up killed part-way starts again: it is deterministic
    record: dict = {"base_model": str(cfg.model.name_or_path)}
    if settings.eval_base:
        log("warm-up: evaluating the base model")
        t_eval = time.perf_counter()
        record["held_out_before"] = _evaluate_base(cfg, os.path.join(wdir, "base_eval"))
        record["eval_s"] = round(time.perf_counter() - t_eval, 1)
    t0 = time.perf_counter()
    traces = os.path.join(wdir, "expert_data.jsonl")
    record["traces"] = write_expert_rows(settings, traces)
    log(
        f"warm-up: {record['traces']} {settings.expert} expert traces -> {traces}; "
        f"fine-tuning {settings.steps} steps of {settings.batch_size}"
    )
    sft = SftSettings(
        train_files=(traces,),
        max_len=int(cfg.data.max_prompt_length + cfg.rollout.agent.max_response_tokens),
        total_steps=int(settings.steps),
        batch_size=int(settings.batch_size),
        seed=int(settings.seed),
        optimizer=optimizer_settings(cfg.optimizer, lr=float(settings.lr)),
    )
    model, tok, _, _ = load_actor_model(cfg)
    metrics = train_chats(model, tok, sft, wdir, progress=progress)
    record["sft_loss"] = metrics["sft/loss"]
    record["warmup_s"] = round(time.perf_counter() - t0, 1)
    write_done(wdir, record)
    log(f"warm-up: {record['warmup_s']:.0f} s, final sft/loss {record['sft_loss']:.4f}")
    return record


def rl_config(cfg: ConfigDict, workdir: str, record: dict) -> ConfigDict:
    """The RL phase's config: from WORKDIR/warmup/hf, with the budget the warm-up left."""
    rl = copy.deepcopy(cfg)
    with rl.unlocked():
        rl.model.name_or_path = os.path.join(workdir, "warmup", "hf")
        limit = float(rl.trainer.time_limit_minutes)
        if limit > 0:  # at least a minute of RL, however long the warm-up took
            rl.trainer.time_limit_minutes = max(1.0, limit - record["warmup_s"] / 60.0)
        rl.warmup.expert = ""  # the RL phase itself has no warm-up
    return rl
