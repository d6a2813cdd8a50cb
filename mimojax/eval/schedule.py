"""When a run evaluates: every N steps and at given minutes of training wall time."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class EvalSchedule:
    """`due(step, wall_s)` is true once per listed minute reached, and every `every` steps;
    `done_at_minutes` goes into the checkpoint so a resumed run does not evaluate twice."""

    every: int = 0
    at_minutes: tuple[float, ...] = ()
    done_at_minutes: set[float] = dataclasses.field(default_factory=set)

    def due(self, step: int, wall_s: float) -> bool:
        """Whether step `step`, ending at `wall_s` seconds of training, evaluates."""
        if self.every > 0 and step % self.every == 0:
            return True
        fresh = {m for m in self.at_minutes if wall_s >= 60.0 * m} - self.done_at_minutes
        self.done_at_minutes |= fresh
        return bool(fresh)
