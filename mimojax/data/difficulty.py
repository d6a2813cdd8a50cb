"""Difficulty-aware prompt sampling: prompts the policy always or never solves are drawn less.

A GRPO group whose samples all pass or all fail has zero advantage: its rollouts buy nothing.
`DifficultyTracker` keeps each prompt's graded history (attempts, successes) across epochs; the
data iterator accepts a candidate prompt with probability `weight(index)`: 1 for prompts never
seen or solved sometimes, `floor` for prompts solved on every attempt or on none (so they still
come back now and then: the policy changes, and a floor of 0 would starve them forever).

The history is part of the iterator's checkpointed state (plain JSON), and acceptance draws
depend only on (seed, position), so a resumed run draws the same prompts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

# Buckets of a prompt's history before a draw, for the metrics of what was trained on.
BUCKETS = ("unseen", "never_solved", "mixed", "always_solved")


class DifficultyTracker:
    """Per-prompt (attempts, successes); a sample succeeds when its score >= `success_threshold`."""

    def __init__(self, floor: float = 0.1, success_threshold: float = 1.0):
        if not 0.0 < floor <= 1.0:
            raise ValueError(f"difficulty floor must be in (0, 1], got {floor}")
        self.floor, self.success_threshold = float(floor), float(success_threshold)
        self.stats: dict[int, list[int]] = {}  # dataset index -> [attempts, successes]

    def bucket(self, index: int) -> str:
        attempts, successes = self.stats.get(index, (0, 0))
        if attempts == 0:
            return "unseen"
        if successes == 0:
            return "never_solved"
        return "always_solved" if successes == attempts else "mixed"

    def weight(self, index: int) -> float:
        """Acceptance probability of a candidate prompt."""
        return self.floor if self.bucket(index) in ("never_solved", "always_solved") else 1.0

    def accept(self, index: int, seed: int, position: int) -> bool:
        """Whether the candidate at data `position` is drawn (deterministic in seed, position)."""
        w = self.weight(index)
        return w >= 1.0 or np.random.default_rng([seed, position, 0xD1FF]).random() < w

    def record(self, samples: Iterable[tuple[int, float, bool]]) -> dict[str, float]:
        """Adds (dataset index, score, valid) per graded sample (infra failures are not
        attempts); returns the share of the distinct prompts per history bucket before this."""
        samples = list(samples)
        before = {i: self.bucket(i) for i, _, _ in samples}
        for index, score, valid in samples:
            if valid:
                entry = self.stats.setdefault(index, [0, 0])
                entry[0] += 1
                entry[1] += int(score >= self.success_threshold)
        n = max(len(before), 1)
        rates = [s / a for a, s in self.stats.values() if a]
        return {
            **{f"data/difficulty/{b}": sum(v == b for v in before.values()) / n for b in BUCKETS},
            "data/difficulty/prompts_seen": float(len(self.stats)),
            "data/difficulty/mean_success_rate": float(np.mean(rates)) if rates else 0.0,
        }

    def get_state(self) -> dict[str, Any]:
        # JSON object keys are strings; sorted so equal histories save identical files.
        return {str(i): list(v) for i, v in sorted(self.stats.items())}

    def set_state(self, state: Mapping[str, Any]) -> None:
        self.stats = {int(i): [int(v[0]), int(v[1])] for i, v in state.items()}
