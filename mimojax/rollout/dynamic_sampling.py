"""DAPO's dynamic sampling: generate until a step holds `batch_size` groups that carry signal.

With 8 samples per prompt and a success rate of a few percent, most GRPO groups are all-wrong:
every sample scores the same, the group's advantages are all zero and it trains on nothing.
Masking them (`algorithm.filter_groups`) still pays for their rollouts and leaves the step with
few groups. Dynamic sampling keeps drawing generation batches of `batch_size` prompts, keeps the
groups whose valid samples' scores differ, and stops once it has `batch_size` of them or after
`max_num_gen_batches` batches (verl: `algorithm.filter_groups.max_num_gen_batches`). A step that
is still short is filled with uninformative groups (masked by the group filter, so they do not
train) and counted, rather than failing the run as verl does: the batch keeps its static shape.

Everything here is a pure function of what `draw`, `generate` and `score` return, so a resumed
run (same data position, same request ids) draws and keeps the same groups.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any


@dataclasses.dataclass
class SampledStep:
    """A step's examples (one per group), their trajectories and grader results, in order."""

    examples: list[dict]
    trajs: list[Any]
    results: list[Any]
    metrics: dict[str, float]
    # response lengths of every trajectory generated for the step, rejected groups included
    drawn_lengths: list[int] = dataclasses.field(default_factory=list)


def informative(results: Sequence[Any], truncated: Sequence[bool] | None = None) -> bool:
    """Whether a group's scores give GRPO a signal: its valid samples' scores differ, or it has
    exactly one valid sample (the same rule as `algos.batch_filters.filter_groups`).
    `truncated`: per sample, whether it scores 0 whatever its grade
    (`algorithm.truncated_responses=zero`), as the advantage stage's group filter sees it."""
    cut = truncated if truncated is not None else [False] * len(results)
    scores = [0.0 if c else float(r.score) for r, c in zip(results, cut, strict=True) if r.valid]
    return len(scores) == 1 or (len(scores) > 1 and max(scores) > min(scores))


def _groups(examples, trajs, results) -> list[tuple[dict, list, list]]:
    """(example, its trajectories, their results) per group, trajectories in sample order."""
    by_group: list[tuple[list, list]] = [([], []) for _ in examples]
    for t, r in zip(trajs, results, strict=True):
        by_group[t.group][0].append(t)
        by_group[t.group][1].append(r)
    return [(ex, ts, rs) for ex, (ts, rs) in zip(examples, by_group, strict=True)]


def sample_step(
    draw: Callable[[], list[dict]],
    generate: Callable[[list[dict], int], list[Any]],
    score: Callable[[list[Any]], list[Any]],
    *,
    batch_size: int,
    max_num_gen_batches: int,
    between_phases: Callable[[], None] = lambda: None,
    zero_truncated: bool = False,
) -> SampledStep:
    """Draws generation batches until `batch_size` informative groups (or the batch limit).

    `draw()` returns the next `batch_size` examples; `generate(examples, gen_index)` their
    trajectories (`t.group` indexes `examples`); `score(trajs)` one result per trajectory (with
    `.score` and `.valid`). `between_phases()` runs after each generation and scoring (the
    trainer's stop-signal safe point). The returned groups keep their draw order and are
    renumbered 0..batch_size-1: the first `batch_size` informative ones, then (when short) the
    first uninformative ones as fill. `zero_truncated`: a cut-off trajectory (`t.truncated`)
    counts as scoring 0, so that a group whose only success was cut off is not kept.
    """
    if max_num_gen_batches < 1:
        raise ValueError(f"max_num_gen_batches must be >= 1, got {max_num_gen_batches}")
    kept, spare, drawn, num_batches = [], [], 0, 0  # (draw order, group)
    drawn_lengths = []
    while len(kept) < batch_size and num_batches < max_num_gen_batches:
        examples = draw()
        trajs = generate(examples, num_batches)
        between_phases()
        results = score(trajs)
        between_phases()
        num_batches += 1
        drawn_lengths.extend(len(t.response_ids) for t in trajs)
        for group in _groups(examples, trajs, results):
            cut = [t.truncated for t in group[1]] if zero_truncated else None
            (kept if informative(group[2], cut) else spare).append((drawn, group))
            drawn += 1
    informative_kept = min(len(kept), batch_size)
    # In draw order: one generation batch comes back exactly as drawn.
    chosen = sorted(kept[:batch_size] + spare[: batch_size - informative_kept])
    chosen = [group for _, group in chosen]
    out = SampledStep([], [], [], {}, drawn_lengths)
    for g, (ex, ts, rs) in enumerate(chosen):
        out.examples.append(ex)
        out.trajs.extend(dataclasses.replace(t, group=g) for t in ts)
        out.results.extend(rs)
    samples_drawn = drawn * (len(chosen[0][1]) if chosen else 0)
    out.metrics = {
        "train/num_gen_batches": float(num_batches),
        "train/groups_drawn": float(drawn),
        "train/groups_informative": float(len(kept)),
        "train/kept_drawn_ratio": informative_kept / max(drawn, 1),
        "train/groups_short": float(batch_size - informative_kept),
        "train/rollouts_per_kept_group": samples_drawn / max(informative_kept, 1),
    }
    return out


def sample_groups(
    rollout_fn, sampling, pool, data_iter, spec, step: int, timer, between_phases
) -> SampledStep:
    """The trainer's step: `spec.batch_size` prompts x `spec.n` samples from
    `rollout_fn(examples, n, sampling, request_id_base)`, scored by the reward pool; with
    `spec.dynamic_sampling`, up to `spec.max_num_gen_batches` generation batches. Request ids
    never repeat across steps or batches."""
    per_step = spec.max_num_gen_batches if spec.dynamic_sampling else 1

    def generate(examples, g):
        with timer("gen"):
            base = (step * per_step + g) * spec.batch_size
            return rollout_fn(examples, spec.n, sampling, base)

    difficulty = []  # per generation batch: data/difficulty/* of the prompts drawn

    def score(trajs):
        with timer("reward"):
            results = pool.score([t.grader_item() for t in trajs])
        difficulty.append(data_iter.record(trajs, results))  # {} without difficulty sampling
        return results

    out = sample_step(
        lambda: next(data_iter), generate, score, batch_size=spec.batch_size,
        max_num_gen_batches=per_step, between_phases=between_phases,
        zero_truncated=spec.advantage.truncated == "zero",
    )  # fmt: skip
    if not spec.dynamic_sampling:  # one batch: only how many of its groups carry signal
        out.metrics = {"train/groups_informative": out.metrics["train/groups_informative"]}
    for key in difficulty[0]:
        out.metrics[key] = float(sum(d[key] for d in difficulty) / len(difficulty))
    return out
