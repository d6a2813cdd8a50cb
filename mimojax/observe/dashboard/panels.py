"""The dashboard's panels: which metrics each plots (regexes over metric names), in page order.

A panel whose metrics a run did not log shows "not logged" for that run. Kinds: "line" plots
each matching metric against the step; "stack" stacks them as bars per step (phase timing);
the "compare_*" and "table" kinds are drawn from the server's per-run summary.
"""

from __future__ import annotations

PANELS: list[dict] = [
    {"id": "compare_time", "title": "held-out accuracy vs training wall time (min)",
     "kind": "compare_time", "keys": []},
    {"id": "compare_cost", "title": "held-out accuracy vs cost ($, or device-hours unpriced)",
     "kind": "compare_cost", "keys": []},
    {"id": "reward", "title": "reward (critic/score)", "kind": "line",
     "keys": [r"^critic/score/(mean|min|max)$"]},
    {"id": "heldout", "title": "held-out score", "kind": "line",
     "keys": [r"^val-core/.+/(acc/greedy|pass@\d+)$"]},
    {"id": "length", "title": "response length (tokens)", "kind": "line",
     "keys": [r"^response_length/(mean|max|min)$"]},
    {"id": "entropy", "title": "policy entropy", "kind": "line", "keys": [r"^actor/entropy$"]},
    {"id": "kl", "title": "KL (actor vs old / reference / rollout)", "kind": "line",
     "keys": [r"^actor/(ppo_kl|kl_loss)$", r"^rollout_corr/kl$"]},
    {"id": "timing", "title": "seconds per phase per step", "kind": "stack",
     "keys": [r"^timing_s/(?!step$|eval$).+"]},
    {"id": "throughput", "title": "throughput (tokens/s)", "kind": "line",
     "keys": [r"^perf/throughput$"]},
    {"id": "lag", "title": "policy lag (steps)", "kind": "line",
     "keys": [r"^async/staleness/.+", r"^rollout/policy_version_lag$"]},
    {"id": "queues", "title": "queues (queue/*)", "kind": "line", "keys": [r"^queue/.+"]},
    # whatever else an async run logs: drops, reward / length by staleness, short-task bias
    {"id": "async", "title": "async (async/*, besides staleness)", "kind": "line",
     "keys": [r"^async/(?!staleness/).+"]},
    {"id": "utilisation", "title": "device utilisation", "kind": "line",
     "keys": [r"^perf/(mfu.*|.*util.*)$"]},
    {"id": "cost", "title": "cumulative cost ($, or device-hours unpriced)", "kind": "cost",
     "keys": []},
    {"id": "restarts", "title": "restarts and work lost", "kind": "line",
     "keys": [r"^restarts/(count|steps_redone|wall_s_lost)$"]},
    {"id": "summary", "title": "what the compute bought", "kind": "table", "keys": []},
]  # fmt: skip
