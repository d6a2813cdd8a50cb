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

from mimojax.data.prompts import DataError, chat_messages
from mimojax.rollout.agent_loop import rollout
from mimojax.sft.rft_checks import KEEP_RULES, keeps

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


@dataclasses.dataclass(frozen=True)
class RftSettings:
    """`sft.rft.*` as plain values; the fields and defaults are RFT_DEFAULTS."""

    n: int = RFT_DEFAULTS["n"]
    num_prompts: int = RFT_DEFAULTS["num_prompts"]
    temperature: float = RFT_DEFAULTS["temperature"]
    max_per_prompt: int = RFT_DEFAULTS["max_per_prompt"]
    keep: str = RFT_DEFAULTS["keep"]
    prefer_shortest: bool = RFT_DEFAULTS["prefer_shortest"]
    prompts_per_batch: int = RFT_DEFAULTS["prompts_per_batch"]
    steps: int = RFT_DEFAULTS["steps"]
    batch_size: int = RFT_DEFAULTS["batch_size"]
    lr: float = RFT_DEFAULTS["lr"]

    def __post_init__(self):
        for key in ("n", "max_per_prompt", "prompts_per_batch", "steps", "batch_size"):
            if getattr(self, key) < 1:
                raise DataError(f"sft.rft.{key} must be >= 1, got {getattr(self, key)}")
        if self.num_prompts < 0:
            raise DataError(f"sft.rft.num_prompts must be >= 0, got {self.num_prompts}")
        if self.keep not in KEEP_RULES:
            raise DataError(f"sft.rft.keep must be one of {KEEP_RULES}, got {self.keep!r}")
        if self.lr <= 0:
            raise DataError(f"sft.rft.lr must be > 0, got {self.lr}")

    @classmethod
    def from_dict(cls, group: dict) -> RftSettings:
        """Over the defaults; an unknown key names itself and the known ones."""
        out = dict(RFT_DEFAULTS)
        for key, value in group.items():
            if key not in out:
                raise DataError(f"sft.rft.{key}: unknown key; have {sorted(out)}")
            out[key] = type(out[key])(value)
        return cls(**out)


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


def sample_rows(
    engine, tok, examples, pool, sampling, agent, settings: RftSettings, system_prompt=None,
    *, log=print,
) -> tuple[list[dict], dict]:  # fmt: skip
    """Samples the engine on the examples (`settings.num_prompts` of them, 0 = all), grades every
    sample with the reward pool and keeps the graded-correct answers as chat rows."""
    if settings.num_prompts:
        examples = examples[: settings.num_prompts]
    if settings.temperature >= 0:
        sampling = dataclasses.replace(sampling, temperature=settings.temperature)
    rows, stats = [], dict.fromkeys(_STAT_KEYS, 0)
    step, t0 = int(settings.prompts_per_batch), time.perf_counter()
    for start in range(0, len(examples), step):
        chunk = examples[start : start + step]
        trajs = rollout(
            engine, tok, chunk, settings.n, sampling, agent,
            request_id_base=_RFT_REQUEST_BASE + start * settings.n,
        )  # fmt: skip
        results = pool.score([t.grader_item() for t in trajs])
        kept, s = keep_correct(
            trajs, results, settings.max_per_prompt, system_prompt,
            keep=settings.keep, prefer_shortest=settings.prefer_shortest,
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


def write_rows(rows: list[dict], path: str) -> None:
    """One chat row per line (what `mimojax sft` reads)."""
    with open(path, "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)


def write_stats(workdir: str, stats: dict, settings: RftSettings) -> None:
    """WORKDIR/rft_stats.json: the sampling counts, the phase wall times (s) and the knobs."""
    with open(os.path.join(workdir, "rft_stats.json"), "w") as f:
        json.dump({**stats, "settings": dataclasses.asdict(settings)}, f, indent=1)
