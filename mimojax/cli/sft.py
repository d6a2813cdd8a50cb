"""The fine-tuning jobs from a run config: `mimojax sft` and `mimojax sft --from-rollouts`.

The CLI builds the plain settings and the parts (model, engine, reward pool; with the RL role
builders) once and hands them to `sft.chat_sft.train_chats` and `sft.rft.sample_rows`, which
never see a config.
"""

from __future__ import annotations

import os
import time

from ml_collections import ConfigDict

from mimojax.data.prompts import DataError
from mimojax.sft.chat_sft import SftSettings, train_chats
from mimojax.sft.rft import RftSettings, sample_rows, write_rows, write_stats
from mimojax.train.role_settings import agent_settings, optimizer_settings, prompt_dataset
from mimojax.train.roles import (
    _reward_pool,
    engine_from_config,
    load_actor_model,
    sampling_from_config,
)


def sft_settings(cfg: ConfigDict) -> SftSettings:
    """`data.*`, `trainer.total_steps` and `optimizer.*` as the fine-tuning's settings."""
    return SftSettings(
        train_files=tuple(cfg.data.train_files),
        max_len=int(cfg.data.max_prompt_length + cfg.rollout.max_new_tokens),
        total_steps=int(cfg.trainer.total_steps),
        batch_size=int(cfg.data.batch_size),
        seed=int(cfg.data.seed),
        optimizer=optimizer_settings(cfg.optimizer),
    )


def rft_settings(cfg: ConfigDict) -> RftSettings:
    """`sft.rft.*` over RFT_DEFAULTS; errors name the key."""
    group = cfg.get("sft", None)
    group = group.get("rft", None) if group is not None else None
    return RftSettings.from_dict(dict(group or {}))


def run_sft(cfg: ConfigDict, workdir: str, *, progress: bool = True) -> dict:
    """Fine-tunes the config's model on `data.train_files` chats; writes WORKDIR/hf."""
    settings = sft_settings(cfg)
    if not settings.train_files:
        raise DataError("data.train_files is empty: give at least one chat .jsonl file")
    model, tok, _, _ = load_actor_model(cfg)
    return train_chats(model, tok, settings, workdir, progress=progress)


def run_rft(cfg: ConfigDict, workdir: str, *, progress: bool = True, log=print) -> dict:
    """Sample, keep graded-correct, write WORKDIR/rft_data.jsonl, fine-tune, write WORKDIR/hf."""
    settings = rft_settings(cfg)
    os.makedirs(workdir, exist_ok=True)
    log(
        f"rft: sampling {cfg.model.name_or_path} x{settings.n} on "
        f"{settings.num_prompts or 'all'} prompts of {list(cfg.data.train_files)}"
    )
    t0 = time.perf_counter()
    model, tok, _, _ = load_actor_model(cfg)
    examples = prompt_dataset(cfg, tok, "train").all_rows()
    engine = engine_from_config(cfg, model, tok)
    with _reward_pool(cfg) as pool:
        rows, stats = sample_rows(
            engine, tok, examples, pool, sampling_from_config(cfg), agent_settings(cfg),
            settings, cfg.data.get("system_prompt", None), log=log,
        )  # fmt: skip
    data_file = os.path.join(workdir, "rft_data.jsonl")
    write_rows(rows, data_file)
    write_stats(workdir, stats, settings)
    log(f"rft: wrote {len(rows)} rows to {data_file}")
    if not rows:
        raise DataError(
            f"rft: no graded-correct response in {stats['samples']} samples of "
            f"{stats['prompts']} prompts; raise sft.rft.n or sft.rft.num_prompts, or start RL "
            "from the base model"
        )
    log(f"rft: fine-tuning {settings.steps} steps of {settings.batch_size} chats")
    t1 = time.perf_counter()
    fine_tune = sft_settings(cfg)
    fine_tune = SftSettings(
        train_files=(data_file,),
        max_len=fine_tune.max_len,
        total_steps=int(settings.steps),
        batch_size=int(settings.batch_size),
        seed=fine_tune.seed,
        optimizer=optimizer_settings(cfg.optimizer, lr=settings.lr),
    )
    del engine, model  # the engine's copy of the weights goes before the fresh load trains
    model, tok, _, _ = load_actor_model(cfg)
    metrics = train_chats(model, tok, fine_tune, workdir, progress=progress)
    stats["sft_s"] = round(time.perf_counter() - t1, 1)  # fine-tuning + writing WORKDIR/hf
    stats["warmup_s"] = round(time.perf_counter() - t0, 1)  # the whole warm-up, model loads too
    write_stats(workdir, stats, settings)
    log(
        f"rft: warm-up {stats['warmup_s']:.0f} s (sampling {stats['sample_s']:.0f} s, "
        f"fine-tuning {stats['sft_s']:.0f} s)"
    )
    return {**metrics, **{f"rft/{k}": float(v) for k, v in stats.items()}}
