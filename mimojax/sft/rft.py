"""Rejection-sampling fine-tuning (RFT), the warm-up before RL: `mimojax sft --from-rollouts`.

Where the base model rarely succeeds, most GRPO groups are all wrong and carry no gradient. RFT
(Yuan et al. 2023; STaR) samples the base model `sft.rft.n` times per training prompt with the
run's engine, grades every sample with the run's reward pool, keeps the graded-correct ones
(deduplicated, at most `sft.rft.max_per_prompt` per prompt), writes them as chat rows to
WORKDIR/rft_data.jsonl and fine-tunes on them with `mimojax.sft.chat_sft` (loss on assistant
tokens only), writing WORKDIR/hf. RL then starts from WORKDIR/hf (`--then-train`, or
`--config.model.name_or_path=WORKDIR/hf`).

The knobs live in an optional `sft.rft` config group (a recipe defines it, e.g.
configs/rft_grpo_arith_hard_smollm2.py); a run config without one gets RFT_DEFAULTS.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time

from ml_collections import ConfigDict

from mimojax.data.prompts import DataError, chat_messages, prompt_dataset_from_config
from mimojax.rollout.agent_loop import rollout
from mimojax.sft.chat_sft import run_sft
from mimojax.sft.rft_checks import KEEP_RULES, keeps
from mimojax.train.role_settings import agent_settings
from mimojax.train.roles import (
    _reward_pool,
    engine_from_config,
    load_actor_model,
    sampling_from_config,
)

RFT_DEFAULTS = {
    "n": 16,  # samples per training prompt
    "num_prompts": 256,  # training prompts sampled (from the top of data.train_files); 0 = all
    "temperature": -1.0,  # sampling temperature; < 0 = rollout.temperature
    "max_per_prompt": 4,  # distinct correct responses kept per prompt at most
    "keep": "correct",  # which correct ones: "correct" (grader only) or "worked" (rft_checks)
    "prefer_shortest": False,  # keep a prompt's shortest answers first (else sampling order)
    "prompts_per_batch": 32,  # prompts per engine call (progress is printed after each)
    "steps": 100,  # fine-tuning steps on the kept rows
    "batch_size": 8,  # chats per fine-tuning step
    "lr": 1e-5,  # fine-tuning learning rate (constant after optimizer.warmup_steps)
}
_RFT_REQUEST_BASE = 1 << 29  # request ids far from training (0..) and eval (1 << 30) ones


def rft_settings(cfg: ConfigDict) -> dict:
    """`sft.rft.*` over RFT_DEFAULTS; errors name the key."""
    out = dict(RFT_DEFAULTS)
    group = cfg.get("sft", None)
    group = group.get("rft", None) if group is not None else None
    for key, value in dict(group or {}).items():
        if key not in out:
            raise DataError(f"sft.rft.{key}: unknown key; have {sorted(out)}")
        out[key] = type(out[key])(value)
    for key in ("n", "max_per_prompt", "prompts_per_batch", "steps", "batch_size"):
        if out[key] < 1:
            raise DataError(f"sft.rft.{key} must be >= 1, got {out[key]}")
    if out["num_prompts"] < 0:
        raise DataError(f"sft.rft.num_prompts must be >= 0, got {out['num_prompts']}")
    if out["keep"] not in KEEP_RULES:
        raise DataError(f"sft.rft.keep must be one of {KEEP_RULES}, got {out['keep']!r}")
    if out["lr"] <= 0:
        raise DataError(f"sft.rft.lr must be > 0, got {out['lr']}")
    return out


_STAT_KEYS = ("samples", "correct", "unworked", "duplicates", "prompts_solved")


def keep_correct(
    trajs,
    results,
    max_per_prompt: int,
    system_prompt: str | None = None,
    *,
    keep: str = "correct",
    prefer_shortest: bool = False,
):
    """(chat rows, stats) from graded trajectories: valid, score >= 1, non-empty, passing the
    `keep` rule (rft_checks), distinct per prompt, at most max_per_prompt per prompt (the
    shortest first if prefer_shortest); a row records its prompt's source and score."""
    by_prompt: dict[int, list] = {}
    for t, r in zip(trajs, results, strict=True):
        by_prompt.setdefault(t.group, []).append((t, r))
    rows, stats = [], dict.fromkeys(_STAT_KEYS, 0)
    for group in sorted(by_prompt):
        candidates: dict[str, tuple] = {}  # distinct text -> its first (trajectory, result)
        for t, r in by_prompt[group]:
            stats["samples"] += 1
            if not (r.valid and r.score >= 1.0):
                continue
            stats["correct"] += 1
            text = t.response_text.strip()
            if not text or text in candidates:
                stats["duplicates"] += bool(text)
                continue
            if not keeps(keep, text, t.example.get("ground_truth")):
                stats["unworked"] += 1
                continue
            candidates[text] = (t, r)
        texts = sorted(candidates, key=len) if prefer_shortest else list(candidates)
        for text in texts[:max_per_prompt]:
            t, r = candidates[text]
            rows.append(
                {
                    "messages": chat_messages(t.example, system_prompt)
                    + [{"role": "assistant", "content": text}],
                    "score": float(r.score),
                    "ground_truth": t.example.get("ground_truth"),
                }
            )
        stats["prompts_solved"] += bool(candidates)
    return rows, stats


def sample_rft_rows(cfg: ConfigDict, settings: dict, *, log=print) -> tuple[list[dict], dict]:
    """Samples the config's model on the training prompts and keeps the graded-correct answers."""
    model, tok, _, _ = load_actor_model(cfg)
    examples = prompt_dataset_from_config(cfg, tok, "train").all_rows()
    if settings["num_prompts"]:
        examples = examples[: settings["num_prompts"]]
    sampling = sampling_from_config(cfg)
    if settings["temperature"] >= 0:
        sampling = dataclasses.replace(sampling, temperature=settings["temperature"])
    engine = engine_from_config(cfg, model, tok)
    agent = agent_settings(cfg)
    system_prompt = cfg.data.get("system_prompt", None)
    rows, stats = [], dict.fromkeys(_STAT_KEYS, 0)
    step, t0 = int(settings["prompts_per_batch"]), time.perf_counter()
    with _reward_pool(cfg) as pool:
        for start in range(0, len(examples), step):
            chunk = examples[start : start + step]
            trajs = rollout(
                engine, tok, chunk, settings["n"], sampling, agent,
                request_id_base=_RFT_REQUEST_BASE + start * settings["n"],
            )  # fmt: skip
            results = pool.score([t.grader_item() for t in trajs])
            kept, s = keep_correct(
                trajs, results, settings["max_per_prompt"], system_prompt,
                keep=settings["keep"], prefer_shortest=settings["prefer_shortest"],
            )  # fmt: skip
            rows += kept
            stats = {k: stats[k] + s[k] for k in stats}
            done = start + len(chunk)
            log(
                f"rft: {done}/{len(examples)} prompts, {stats['samples']} samples, "
                f"{stats['correct'] / max(stats['samples'], 1):.1%} correct, "
                f"{stats['prompts_solved']} prompts solved, {len(rows)} rows kept "
                f"({time.perf_counter() - t0:.0f} s)"
            )
    stats["prompts"] = len(examples)
    stats["rows"] = len(rows)
    stats["sample_s"] = round(time.perf_counter() - t0, 1)  # sampling + grading wall time
    return rows, stats


def sft_config(cfg: ConfigDict, data_file: str, settings: dict) -> ConfigDict:
    """The run config turned into the fine-tuning config of run_sft (steps, batch, lr, data)."""
    out = cfg.copy_and_resolve_references()  # the run config stays as it was
    out.data.train_files = (data_file,)
    out.data.batch_size = int(settings["batch_size"])
    out.trainer.total_steps = int(settings["steps"])
    out.optimizer.lr = float(settings["lr"])
    return out


def write_rows(rows: list[dict], path: str) -> None:
    """One chat row per line (what `mimojax sft` reads)."""
    with open(path, "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)


def _write_stats(workdir: str, stats: dict, settings: dict) -> None:
    """WORKDIR/rft_stats.json: the sampling counts, the phase wall times (s) and the knobs."""
    with open(os.path.join(workdir, "rft_stats.json"), "w") as f:
        json.dump({**stats, "settings": settings}, f, indent=1)


def run_rft(cfg: ConfigDict, workdir: str, *, progress: bool = True, log=print) -> dict:
    """Sample, keep graded-correct, write WORKDIR/rft_data.jsonl, fine-tune, write WORKDIR/hf."""
    settings = rft_settings(cfg)
    os.makedirs(workdir, exist_ok=True)
    log(
        f"rft: sampling {cfg.model.name_or_path} x{settings['n']} on "
        f"{settings['num_prompts'] or 'all'} prompts of {list(cfg.data.train_files)}"
    )
    t0 = time.perf_counter()
    rows, stats = sample_rft_rows(cfg, settings, log=log)
    data_file = os.path.join(workdir, "rft_data.jsonl")
    write_rows(rows, data_file)
    _write_stats(workdir, stats, settings)
    log(f"rft: wrote {len(rows)} rows to {data_file}")
    if not rows:
        raise DataError(
            f"rft: no graded-correct response in {stats['samples']} samples of "
            f"{stats['prompts']} prompts; raise sft.rft.n or sft.rft.num_prompts, or start RL "
            "from the base model"
        )
    log(f"rft: fine-tuning {settings['steps']} steps of {settings['batch_size']} chats")
    t1 = time.perf_counter()
    metrics = run_sft(sft_config(cfg, data_file, settings), workdir, progress=progress)
    stats["sft_s"] = round(time.perf_counter() - t1, 1)  # fine-tuning + writing WORKDIR/hf
    stats["warmup_s"] = round(time.perf_counter() - t0, 1)  # the whole warm-up, model loads too
    _write_stats(workdir, stats, settings)
    log(
        f"rft: warm-up {stats['warmup_s']:.0f} s (sampling {stats['sample_s']:.0f} s, "
        f"fine-tuning {stats['sft_s']:.0f} s)"
    )
    return {**metrics, **{f"rft/{k}": float(v) for k, v in stats.items()}}
