"""Adaptive entropy control (Skywork-OR1's AEC): an entropy bonus that switches on only while the
policy's entropy sits below a target, with a coefficient that walks towards holding it there.

A fixed `algorithm.entropy_coeff` on a small model either does nothing or blows entropy up; a
target instead says how much entropy to keep. After each step the coefficient c moves by
`delta` (up while the measured entropy is below `target`, down otherwise, clipped to
[0, max_coeff]); the next update's bonus weight is c while the last measured entropy was below
the target and 0 above it. The entropy is the one the update measured (`actor/entropy`: the
policy's mean token entropy over loss tokens, at the rollout temperature), so the switch lags
one step: an on-policy update has no pass before it that would measure it for free.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class EntropyController:
    """Immutable controller state; `update` returns a new one. `target` 0 = off."""

    target: float = 0.0
    delta: float = 0.005
    max_coeff: float = 0.05
    coeff: float = 0.0  # c: the bonus weight while entropy is below the target
    last_entropy: float | None = None  # the last step's measured entropy (None: none yet)

    def __post_init__(self):
        if self.target < 0 or self.delta <= 0 or self.max_coeff < 0:
            raise ValueError(
                "EntropyController: needs target >= 0, delta > 0, max_coeff >= 0, got "
                f"{self.target}, {self.delta}, {self.max_coeff}"
            )

    @property
    def enabled(self) -> bool:
        return self.target > 0

    @property
    def active_coeff(self) -> float:
        """The entropy bonus weight for the next update: c below the target, else 0."""
        below = self.last_entropy is not None and self.last_entropy < self.target
        return self.coeff if self.enabled and below else 0.0

    def update(self, entropy: float) -> EntropyController:
        """After a step whose update measured `entropy`."""
        if not self.enabled:
            return self
        step = self.delta if entropy < self.target else -self.delta
        coeff = min(max(self.coeff + step, 0.0), self.max_coeff)
        return dataclasses.replace(self, coeff=coeff, last_entropy=float(entropy))

    def state(self) -> dict:
        """What a checkpoint records (JSON: Python floats round-trip exactly)."""
        return {"coeff": self.coeff, "last_entropy": self.last_entropy}

    def restored(self, state: dict | None) -> EntropyController:
        """This controller with a checkpoint's state (None: a checkpoint from before it)."""
        if not state:
            return self
        last = state.get("last_entropy")
        return dataclasses.replace(
            self, coeff=float(state["coeff"]), last_entropy=None if last is None else float(last)
        )
