"""Metric names (verl's), the per-step JSONL log, wandb, console progress, phase timers.

This module owns the metrics.jsonl format: `MetricsLogger` is its one writer, `read_metrics` its
one reader (`rows_by_step` merges the lines of one step). Every line is a JSON object with an
integer "step", its other keys sorted, non-finite numbers as null.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
import uuid
import warnings
from collections import defaultdict
from contextlib import contextmanager

import numpy as np

from mimojax.observe.progress import RichBar, enter_phase, exit_phase, use_rich

METRIC_NAMES = {
    "critic/score/mean": "mean grader score of the step's valid samples (also /max, /min)",
    "critic/rewards/mean": "mean per-sample reward after shaping (overlong, in-reward KL)",
    "critic/advantages/mean": "mean advantage over response tokens (also /max, /min)",
    "critic/returns/mean": "mean return over response tokens",
    "critic/values/mean": "mean critic value over response tokens (gae only)",
    "critic/vf_loss": "value loss",
    "train/groups_informative": "groups drawn this step whose valid scores differ (or with one "
    "valid sample): the ones a group estimator learns from; every run logs it",
    "response_length/mean": "response tokens per sample (also /max, /min)",
    "response_length/clip_ratio": "fraction of samples cut off by a token budget "
    "(rollout.max_new_tokens, an agent's response budget or context window)",
    "prompt_length/mean": "prompt tokens per sample",
    "actor/pg_loss": "policy-gradient loss",
    "actor/pg_clipfrac": "fraction of tokens whose ratio was clipped",
    "actor/ppo_kl": "mean old-vs-new logprob difference",
    "actor/entropy": "mean token entropy of the policy",
    "actor/entropy_coeff": "entropy bonus weight the step's updates used (algorithm."
    "entropy_control: the adaptive weight while entropy is below its target, else 0)",
    "actor/kl_loss": "KL(actor || reference) loss term",
    "actor/grad_norm": "global gradient norm before clipping",
    "actor/lr": "learning rate",
    "train/skipped_updates": "updates skipped because the loss or gradient was not finite",
    "reward/infra_failures": "samples whose grader raised, hung or died (excluded)",
    "timing_s/gen": "seconds generating rollouts (also reward, old_log_prob, ref, values, adv, "
    "update_actor, update_critic, sync, step, eval, save_checkpoint)",
    "perf/throughput": "tokens (prompt + response) per second of step time",
    "perf/time_per_step": "seconds per RL step",
    "perf/total_num_tokens": "tokens processed so far (cumulative, not per step)",
    "perf/wall_s": "cumulative training wall time (evaluation excluded)",
    "val-core/<env>/acc/greedy": "held-out accuracy, greedy decoding",
    "val-core/<env>/pass@k": "held-out pass@k with the rollout sampling settings",
}
METRICS_FILE = "metrics.jsonl"


class Timer:
    """`with timer("gen"):` accumulates seconds; `pop()` returns {"timing_s/gen": s} and resets."""

    def __init__(self):
        self._s = defaultdict(float)

    @contextmanager
    def __call__(self, name: str):
        t0 = time.perf_counter()
        enter_phase(name)  # the terminal bar shows the phase running now
        try:
            yield
        finally:
            exit_phase(name)
            self._s[name] += time.perf_counter() - t0

    def pop(self) -> dict[str, float]:
        out = {f"timing_s/{k}": v for k, v in self._s.items()}
        self._s.clear()
        return out


def _stats(prefix: str, x, stats=("mean", "max", "min")) -> dict[str, float]:
    """{prefix/mean, /max, /min} of x; zeros when x is empty (a batch with no valid sample)."""
    fns = {"mean": np.mean, "max": np.max, "min": np.min}
    return {f"{prefix}/{k}": float(fns[k](x)) if x.size else 0.0 for k in stats}


def rollout_batch_metrics(batch, trajs, mask_BxT, adv_BxT, returns_BxT, values_BxT,
                          engine_version: int) -> dict[str, float]:  # fmt: skip
    """verl's per-step data metrics (score, rewards, advantages, lengths, staleness).

    `batch` is `mimojax.rollout.batch.build_batch`'s output; scores and rewards count valid
    samples only, advantages / returns / values the response tokens of `mask_BxT`.
    """
    valid_B, tok = batch.valid_B, mask_BxT > 0
    lengths_B = batch.response_len_B
    m = {
        **_stats("critic/score", batch.scores_B[valid_B] if valid_B.any() else np.zeros(1)),
        **_stats("critic/rewards", batch.token_rewards_BxT.sum(-1)[valid_B], ("mean",)),
        **_stats("critic/advantages", adv_BxT[tok]),
        **_stats("critic/returns", returns_BxT[tok], ("mean",)),
        **_stats("response_length", lengths_B),
        "response_length/clip_ratio": float(np.mean(batch.truncated_B)),
        "prompt_length/mean": float(batch.prompt_len_B.mean()),
        # the engine already holds this step's weights: lag 0 = sampled by the previous version
        "rollout/policy_version_lag": float(
            np.mean([engine_version - 1 - t.policy_version for t in trajs])
        ),
    }
    if values_BxT is not None:
        m.update(_stats("critic/values", values_BxT[tok], ("mean",)))
    return m


def reduce_metrics(rows: list[dict]) -> dict[str, float]:
    """Mean of each key over the dicts that have it."""
    acc = defaultdict(list)
    for r in rows:
        for k, v in r.items():
            acc[k].append(float(v))
    return {k: sum(v) / len(v) for k, v in acc.items()}


def _clean(value):
    try:
        x = float(value)
    except (TypeError, ValueError):
        return value if isinstance(value, (str, bool)) or value is None else str(value)
    return x if math.isfinite(x) else None


def _metrics_path(path_or_workdir: str) -> str:
    if os.path.isdir(path_or_workdir):
        return os.path.join(path_or_workdir, METRICS_FILE)
    return path_or_workdir


RESTART_KEYS = ("restarts/count", "restarts/steps_redone", "restarts/wall_s_lost")


def restart_stats(workdir: str, resumed_step: int, resumed_wall_s: float, previous=None) -> dict:
    """restarts/* after resuming at checkpoint `resumed_step`, carried on from `previous`.

    Steps redone: steps the metrics file logged after the checkpoint (they run again); wall
    time lost: training wall time logged after it. Read before the logger truncates the file.
    """
    out = {k: float((previous or {}).get(k, 0.0)) for k in RESTART_KEYS}
    rows = [r for r in read_metrics(workdir) if "perf/wall_s" in r]
    last = max(rows, key=lambda r: r["step"]) if rows else None
    out["restarts/count"] += 1.0
    if last is not None and last["step"] > resumed_step:
        out["restarts/steps_redone"] += float(last["step"] - resumed_step)
        out["restarts/wall_s_lost"] += max(float(last["perf/wall_s"]) - resumed_wall_s, 0.0)
    return out


def read_metrics(path_or_workdir: str) -> list[dict]:
    """The lines of a run's metrics.jsonl as logged, in file order; [] when there is no file.

    Only the last line can be cut short (a run killed mid-write; the writer ends every complete
    line with a newline), and it is skipped. Any other malformed line raises ValueError naming
    the file and line.
    """
    path = _metrics_path(path_or_workdir)
    if not os.path.isfile(path):
        return []
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    rows = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            if i == len(lines) - 1:
                continue
            raise ValueError(f"{path}:{i + 1}: not valid JSON ({e.msg})") from None
        if not isinstance(row, dict):
            raise ValueError(f"{path}:{i + 1}: expected a JSON object, got {type(row).__name__}")
        step = row.get("step")
        if isinstance(step, bool) or not isinstance(step, (int, float)) or step != int(step):
            raise ValueError(f"{path}:{i + 1}: 'step' must be an integer, got {step!r}")
        row["step"] = int(step)
        rows.append(row)
    return rows


def read_metrics_from(path_or_workdir: str, offset: int = 0) -> tuple[list[dict], int]:
    """The complete lines logged from byte `offset` on, and the offset to read from next.

    For following a live run: a last line still being written is left for the next call.
    A file shorter than `offset`, or where `offset` no longer starts a line, was rewritten (a
    resume keeps only the checkpointed steps): then this raises EOFError; read again from 0.
    """
    path = _metrics_path(path_or_workdir)
    if not os.path.isfile(path):
        return [], 0
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        if f.tell() < offset:
            raise EOFError(f"{path} is shorter than {offset} bytes: rewritten")
        if offset > 0:  # a rewrite that has already grown back rarely ends a line there
            f.seek(offset - 1)
            if f.read(1) != b"\n":
                raise EOFError(f"{path}: byte {offset} no longer starts a line: rewritten")
        f.seek(offset)
        data = f.read()
    end = data.rfind(b"\n") + 1
    rows = []
    for line in data[:end].decode("utf-8").split("\n"):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: a line after byte {offset} is not JSON ({e.msg})") from None
        step = row.get("step") if isinstance(row, dict) else None
        if isinstance(step, bool) or not isinstance(step, (int, float)) or step != int(step):
            raise ValueError(f"{path}: a line after byte {offset} has no integer 'step'")
        row["step"] = int(step)
        rows.append(row)
    return rows, offset + end


def rows_by_step(rows: list[dict]) -> list[dict]:
    """One row per step, sorted by step; lines repeating a step merge, later values winning."""
    by_step: dict[int, dict] = {}
    for row in rows:
        by_step.setdefault(row["step"], {}).update(row)
    return [by_step[s] for s in sorted(by_step)]


class MetricsLogger:
    """One JSON line per step in WORKDIR/metrics.jsonl (flushed), wandb, and console progress.

    Resuming at `start_step` S keeps only lines with step <= S, so steps re-run after the last
    checkpoint are not duplicated.
    """

    def __init__(
        self,
        workdir: str,
        *,
        total_steps: int,
        start_step: int = 0,
        jsonl: bool = True,
        wandb_mode: str = "offline",
        wandb_project: str = "mimojax",
        wandb_entity: str | None = None,
        wandb_name: str | None = None,
        config: dict | None = None,
        progress: bool = True,
        time_limit_s: float = 0.0,
    ):
        self.workdir, self.total_steps = workdir, int(total_steps)
        self.time_limit_s = float(time_limit_s)  # a training wall-time budget also bounds the ETA
        self.path = os.path.join(workdir, METRICS_FILE)
        self._file = None
        if jsonl:
            old = read_metrics(self.path) if start_step > 0 else []
            kept = [r for r in old if r["step"] <= start_step]
            with open(self.path, "w") as f:
                f.writelines(json.dumps(r) + "\n" for r in kept)
            self._file = open(self.path, "a")
        self.progress = progress
        self._t0, self._start = time.perf_counter(), int(start_step)
        # a rich bar on a terminal; plain lines (one per step) in logs and pipes
        self._bar = RichBar(total_steps, start_step) if progress and use_rich() else None
        self._wandb = None
        if wandb_mode != "disabled":
            self._wandb = _init_wandb(
                workdir, wandb_mode, wandb_project, wandb_entity, wandb_name, config
            )

    def log(self, step: int, metrics: dict) -> None:
        row = {"step": int(step), **{k: _clean(v) for k, v in sorted(metrics.items())}}
        if self._file is not None:
            self._file.write(json.dumps(row) + "\n")
            self._file.flush()
        if self._wandb is not None:
            self._wandb.log({k: v for k, v in row.items() if v is not None}, step=int(step))
        if self._bar is not None:
            self._bar.update(step, self._line(row).split(" | ", 1)[-1])
        elif self.progress:
            print(self._line(row), file=sys.stderr, flush=True)

    def _line(self, row: dict) -> str:
        step = row["step"]
        parts = [f"step {step}/{self.total_steps}"]
        if row.get("critic/score/mean") is not None:
            parts.append(f"reward {row['critic/score/mean']:.3f}")
        if row.get("response_length/mean") is not None:
            parts.append(f"len {row['response_length/mean']:.1f}")
        for k, v in row.items():
            if k.startswith("val-core/") and v is not None:
                parts.append(f"{k.removeprefix('val-core/')} {v:.3f}")
        if row.get("perf/time_per_step") is not None:
            parts.append(f"{row['perf/time_per_step']:.1f}s/step")
        done = step - self._start
        if done > 0:
            eta = (time.perf_counter() - self._t0) / done * (self.total_steps - step)
            if self.time_limit_s > 0 and row.get("perf/wall_s") is not None:
                eta = min(eta, max(self.time_limit_s - row["perf/wall_s"], 0.0))
            parts.append(f"ETA {eta / 60:.1f}m")
        if row.get("perf/wall_s") is not None:
            parts.append(f"train {row['perf/wall_s'] / 60:.1f}m")
        return " | ".join(parts)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        if self._file is not None:
            self._file.close()
            self._file = None
        if self._wandb is not None:
            try:
                self._wandb.finish()
            except Exception:  # noqa: BLE001 - logging must not fail the run
                pass
            self._wandb = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _init_wandb(workdir, mode, project, entity, name, config):
    """A wandb run resumed by a stable id kept in WORKDIR/wandb_id.txt; None if it fails."""
    id_path = os.path.join(workdir, "wandb_id.txt")
    if os.path.exists(id_path):
        run_id = open(id_path).read().strip()
    else:
        run_id = uuid.uuid4().hex[:12]
        with open(id_path, "w") as f:
            f.write(run_id)
    try:
        os.environ.setdefault("WANDB_SILENT", "true")
        import wandb

        return wandb.init(
            mode=mode,
            dir=workdir,
            project=project,
            entity=entity,
            name=name,
            config=config,
            id=run_id,
            resume="allow",
        )
    except Exception as e:  # noqa: BLE001 - a broken wandb install must not stop training
        warnings.warn(f"wandb disabled: {type(e).__name__}: {e}", stacklevel=2)
        return None
