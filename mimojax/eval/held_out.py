"""Held-out evaluation: greedy accuracy and sampled pass@k per env, as `val-core/*` metrics."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence

from mimojax.engine.sampling import SamplingParams
from mimojax.rollout.agent_loop import rollout, tool_use_metrics
from mimojax.rollout.agents import AgentSettings

# Held-out request ids live far from training ones so eval samples never share keys with them.
_EVAL_REQUEST_BASE = 1 << 30


def _by_env(trajs, results) -> dict[str, list[tuple[int, float, bool]]]:
    out = defaultdict(list)
    for t, r in zip(trajs, results):
        out[t.example["env"]].append((t.group, r.score, r.valid))
    return out


def evaluate(
    engine,
    tokenizer,
    examples: Sequence[dict],
    pool,
    *,
    greedy: SamplingParams,
    sampled: SamplingParams | None = None,
    pass_k: int = 0,
    agent: AgentSettings | None = None,
) -> dict[str, float]:
    """val-core/<env>/acc/greedy, val-core/<env>/pass@k and mean@k; infra failures count as
    wrong and are reported in val-aux/<env>/infra_failures."""
    t0 = time.perf_counter()
    metrics: dict[str, float] = {}
    runs = [("greedy", greedy, 1)]
    if pass_k > 0 and sampled is not None:
        runs.append(("sampled", sampled, pass_k))
    for kind, sp, n in runs:
        trajs = rollout(
            engine,
            tokenizer,
            examples,
            n,
            sp,
            agent or AgentSettings(),
            request_id_base=_EVAL_REQUEST_BASE,
        )
        results = pool.score([t.grader_item() for t in trajs])
        for env, items in _by_env(trajs, results).items():
            correct = defaultdict(list)
            for g, score, valid in items:
                correct[g].append(valid and score >= 1.0)
            if kind == "greedy":
                metrics[f"val-core/{env}/acc/greedy"] = sum(c[0] for c in correct.values()) / len(
                    correct
                )
                lengths = [len(t.response_ids) for t in trajs if t.example["env"] == env]
                metrics[f"val-aux/{env}/response_length/mean"] = sum(lengths) / len(lengths)
                pairs = [(t, r.score) for t, r in zip(trajs, results) if t.example["env"] == env]
                tool_use = tool_use_metrics([t for t, _ in pairs], [sc for _, sc in pairs])
                metrics.update({f"val-aux/{env}/{k}": v for k, v in tool_use.items()})
            else:
                metrics[f"val-core/{env}/pass@{n}"] = sum(any(c) for c in correct.values()) / len(
                    correct
                )
                metrics[f"val-core/{env}/mean@{n}"] = sum(
                    sum(c) / len(c) for c in correct.values()
                ) / len(correct)
            metrics[f"val-aux/{env}/infra_failures"] = metrics.get(
                f"val-aux/{env}/infra_failures", 0.0
            ) + float(sum(not v for _, _, v in items))
    metrics["timing_s/eval"] = time.perf_counter() - t0
    return metrics
