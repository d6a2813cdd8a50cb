"""The offline driver: many prompts, n samples each, through continuous batching."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from tqdm import tqdm

from mimojax.engine.engine import EngineError, JaxEngine
from mimojax.engine.sampling import SamplingParams, sample_key
from mimojax.engine.scheduler import Completion, Scheduler


def generate(
    engine: JaxEngine,
    prompts: Sequence[Sequence[int]],
    n: int = 1,
    sampling: SamplingParams | Sequence[SamplingParams] | None = None,
    *,
    request_ids: Sequence[int] | None = None,
    prompt_overflow: str = "error",
    progress: bool = False,
    stats: dict | None = None,
    pipeline: bool | None = None,
) -> list[list[Completion]]:
    """out[i][j]: sample j of prompt i (token ids, processed log-probs, finish reason, version).

    Sample j of prompt i draws from the key (sampling.seed, request_ids[i], j), request_ids
    defaulting to the prompt index: a request's tokens do not depend on what else is in the
    batch, so any subset reproduces when given the same ids. `stats`, if given, receives the
    scheduler's counters (prefill/decode seconds, tokens, finish reasons, truncations).
    `pipeline` overrides the engine's `pipeline_decode` (Scheduler); the outputs are the same.
    """
    sampling = sampling if sampling is not None else SamplingParams()
    per_prompt = [sampling] * len(prompts) if isinstance(sampling, SamplingParams) else sampling
    if len(per_prompt) != len(prompts):
        raise EngineError(f"generate: {len(per_prompt)} SamplingParams for {len(prompts)} prompts")
    ids = list(range(len(prompts))) if request_ids is None else [int(r) for r in request_ids]
    if len(ids) != len(prompts):
        raise EngineError(f"generate: {len(ids)} request_ids for {len(prompts)} prompts")
    sched = Scheduler(engine, prompt_overflow, pipeline)
    requests = [
        sched.submit(i, prompt, sp, n, [sample_key(sp.seed, rid, j) for j in range(n)])
        for i, (prompt, sp, rid) in enumerate(zip(prompts, per_prompt, ids))
    ]
    bar = tqdm(
        total=len(prompts) * n,
        desc="generate",
        unit="sample",
        file=sys.stderr,
        disable=not progress,
    )
    while sched.busy:
        finished = sched.step()
        bar.update(sum(len(r.outputs) for r in finished))
        bar.set_postfix(tokens=sched.stats["completion_tokens"], refresh=False)
    bar.close()
    if stats is not None:
        stats.update(sched.stats)
    return [req.outputs for req in requests]
