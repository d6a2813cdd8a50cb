"""Single-turn agent loop: one engine call per prompt, n samples each."""

from __future__ import annotations

from collections.abc import Sequence

from mimojax.engine.offline import generate
from mimojax.engine.sampling import SamplingParams
from mimojax.rollout.trajectory import Trajectory


def rollout_single_turn(
    engine,
    tokenizer,
    examples: Sequence[dict],
    n: int,
    sampling: SamplingParams,
    *,
    request_id_base: int = 0,
    prompt_overflow: str = "error",
    stats: dict | None = None,
) -> list[Trajectory]:
    """n trajectories per example, ordered (example 0 sample 0, ..., example 1 sample 0, ...).

    Request ids are `request_id_base + i`, so the sampling keys of a step depend only on the
    step (the trainer passes step * batch_size): a resumed run draws the same samples.
    """
    prompts = [ex["prompt_ids"] for ex in examples]
    ids = [request_id_base + i for i in range(len(prompts))]
    outs = generate(
        engine, prompts, n, sampling, request_ids=ids, prompt_overflow=prompt_overflow, stats=stats
    )
    trajs = []
    for g, (ex, completions) in enumerate(zip(examples, outs)):
        for j, c in enumerate(completions):
            # all requests are submitted at once: submit -> finished is when it was done
            trajs.append(Trajectory.from_completion(c, ex, g, j, tokenizer))
    return trajs
