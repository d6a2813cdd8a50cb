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
            trajs.append(
                Trajectory(
                    prompt_ids=list(ex["prompt_ids"])[len(ex["prompt_ids"]) - c.prompt_length :],
                    response_ids=list(c.token_ids),
                    rollout_logprobs=list(c.logprobs),
                    response_mask=[1] * len(c.token_ids),
                    policy_version=min(c.token_versions, default=c.policy_version),
                    finish_reason=c.finish_reason,
                    group=g,
                    sample=j,
                    example=ex,
                    response_text=tokenizer.decode(c.token_ids, skip_special_tokens=True),
                    # all requests are submitted at once: submit -> finished is when it was done
                    # (queue/group_wait_s: how long a group waits for its slowest member)
                    stats={"wall_s": float(c.latency_s)},
                    token_versions=list(c.token_versions),
                )
            )
    return trajs
