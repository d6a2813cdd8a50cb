"""Random test batches: padding, uneven groups, masked (tool) tokens and infra failures.

A plain module (not conftest.py) so tests import it by a name no other test folder uses.
"""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass
class Batch:
    rewards: np.ndarray  # BxT, outcome reward on the last valid token
    mask: np.ndarray  # BxT float 0/1
    ids: np.ndarray  # B int, uneven groups, not contiguous
    valid: np.ndarray  # B bool, False = infra failure
    values: np.ndarray  # BxT
    logp: np.ndarray  # BxT
    old_logp: np.ndarray  # BxT
    adv: np.ndarray  # BxT


def make_batch(seed: int, B: int = 12, T: int = 9, binary: bool = False, empty_row=False):
    rng = np.random.default_rng(seed)
    sizes = [4, 3, 1, 2, 2]  # uneven, one singleton; cycled if B is larger
    ids = np.concatenate([np.full(sizes[g % 5], g) for g in range(B)])[:B]
    ids = rng.permutation(ids).astype(np.int32)
    lengths = rng.integers(2, T + 1, size=B)
    mask = (np.arange(T)[None, :] < lengths[:, None]).astype(np.float64)
    # a few tool-output tokens inside responses
    tool = (rng.random((B, T)) < 0.15) & (np.arange(T)[None, :] < lengths[:, None] - 1)
    mask[tool] = 0.0
    if empty_row:
        mask[0] = 0.0
    outcome = rng.integers(0, 2, B).astype(float) if binary else rng.normal(size=B)
    rewards = np.zeros((B, T))
    rewards[np.arange(B), lengths - 1] = outcome
    valid = np.ones(B, bool)
    valid[rng.choice(B, size=2, replace=False)] = False
    logp = -rng.exponential(1.0, (B, T))
    old_logp = logp + rng.normal(scale=0.3, size=(B, T))
    old_logp = np.minimum(old_logp, -1e-3)
    return Batch(
        rewards=rewards,
        mask=mask,
        ids=ids,
        valid=valid,
        values=rng.normal(size=(B, T)),
        logp=logp,
        old_logp=old_logp,
        adv=rng.normal(size=(B, T)),
    )
