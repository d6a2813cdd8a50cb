"""Off-policy modes' per-step diagnostics: policy lag and the short-task bias.

`async/staleness/*`: the trainer's policy version when it trains a trajectory minus the version
that generated it (mean, max, min, histogram as fractions), reward and length per lag bucket.

An async pipeline trains first on what finishes first. If long responses (hard tasks, long tool
loops) are dropped for staleness, filtered, or left behind more often than short ones, the
trained batch holds fewer long tasks than the rollouts did and the policy drifts toward short
tasks. `async/long_share/sampled` is the share of long responses among everything generated for
a step (dropped batches and dynamic sampling's rejected groups included);
`async/long_share/trained` the share among the trajectories the update learned from (a token
in the loss mask). "Long" is above a fixed token count, or above the median length of the
step's sampled responses when none is set.

Partial rollouts (`trainer.partial_rollouts`): a trajectory in flight when new weights arrive
continues under them, so its tokens carry several versions. Its staleness above is its oldest
token's (the bound holds on it); `async/partial/*` report the mix: distinct versions per
trajectory, the share spanning more than one, and the token-level lag.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def long_share_metrics(
    sampled_lengths: Sequence[int], trained_lengths: Sequence[int], threshold: float = 0.0
) -> dict[str, float]:
    """async/long_share/{sampled,trained,bias,threshold}; threshold <= 0: the sampled median."""
    sampled = np.asarray(sampled_lengths, np.float64)
    trained = np.asarray(trained_lengths, np.float64)
    if sampled.size == 0:
        return {}
    cut = float(threshold) if threshold > 0 else float(np.median(sampled))
    share_sampled = float((sampled > cut).mean())
    share_trained = float((trained > cut).mean()) if trained.size else 0.0
    return {
        "async/long_share/sampled": share_sampled,
        "async/long_share/trained": share_trained,
        "async/long_share/bias": share_trained - share_sampled,  # < 0: short tasks favoured
        "async/long_share/threshold": cut,
    }


def trained_lengths(trajs, loss_mask_BxT) -> list[int]:
    """Response lengths of the rows the update learns from (any token in the loss mask)."""
    rows = np.asarray(loss_mask_BxT).reshape(len(trajs), -1).sum(axis=1) > 0
    return [len(t.response_ids) for t, keep in zip(trajs, rows, strict=True) if keep]


def staleness_metrics(trajs, scores, trainer_version: int, bound: int) -> dict[str, float]:
    """async/staleness/* (mean, max, histogram as fractions) and reward / length per bucket."""
    lag = np.array([trainer_version - t.policy_version for t in trajs], np.float64)
    if lag.size == 0:
        return {}
    lengths = np.array([len(t.response_ids) for t in trajs], np.float64)
    scores = np.asarray(scores, np.float64)
    out = {
        "async/staleness/mean": float(lag.mean()),
        "async/staleness/max": float(lag.max()),
        "async/staleness/min": float(lag.min()),
    }
    for s in range(max(bound, int(lag.max())) + 1):
        hit = lag == s
        out[f"async/staleness/hist_{s}"] = float(hit.mean())
        if hit.any():
            out[f"async/reward_by_staleness/{s}/mean"] = float(scores[hit].mean())
            out[f"async/response_length_by_staleness/{s}/mean"] = float(lengths[hit].mean())
    return out


def partial_metrics(trajs, trainer_version: int) -> dict[str, float]:
    """async/partial/*: versions per trajectory (model tokens), multi-version share, token lag."""
    per_traj, token_lag = [], []
    for t in trajs:
        model = [v for v, m in zip(t.versions(), t.response_mask, strict=True) if m]
        per_traj.append(len(set(model)) or 1)
        token_lag.extend(trainer_version - v for v in model)
    if not per_traj:
        return {}
    per_traj = np.asarray(per_traj, np.float64)
    out = {
        "async/partial/versions_per_traj": float(per_traj.mean()),
        "async/partial/versions_per_traj_max": float(per_traj.max()),
        "async/partial/multi_version_share": float((per_traj > 1).mean()),
    }
    if token_lag:
        out["async/partial/token_staleness/mean"] = float(np.mean(token_lag))
        out["async/partial/token_staleness/max"] = float(np.max(token_lag))
    return out


def async_step_metrics(
    produced,
    trajs,
    scores_B,
    loss_mask_BxT,
    trainer_version: int,
    bound: int,
    long_tokens: float = 0.0,
    partial: bool = False,
) -> dict[str, float]:
    """A consumed batch's async/* metrics: staleness at `trainer_version`, long-task shares,
    and with partial rollouts the per-token version mix."""
    sampled = [*produced.dropped_lengths, *produced.sampled.drawn_lengths]
    return {
        **staleness_metrics(trajs, scores_B, trainer_version, bound),
        **(partial_metrics(trajs, trainer_version) if partial else {}),
        **long_share_metrics(sampled, trained_lengths(trajs, loss_mask_BxT), long_tokens),
    }
