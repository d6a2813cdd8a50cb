"""Input handling shared by the advantage estimators."""

from __future__ import annotations

import jax.numpy as jnp

from mimojax.algos.checks import check_group_ids, check_shapes
from mimojax.algos.ops import as_float


def prepare(
    name: str,
    token_rewards_BxT,
    mask_BxT,
    group_ids_B=None,
    valid_B=None,
    num_groups=None,
    values_BxT=None,
    need_groups: bool = False,
    **extra,
):
    """Validate shapes; return float rewards, the mask with infra failures removed, valid_B, G.

    `extra` holds further named arrays (e.g. `rewards_BxK`) to check against the same dims.
    """
    sizes = check_shapes(
        token_rewards_BxT=token_rewards_BxT,
        mask_BxT=mask_BxT,
        group_ids_B=group_ids_B,
        valid_B=valid_B,
        values_BxT=values_BxT,
        **extra,
    )
    if need_groups and group_ids_B is None:
        raise ValueError(f"advantage estimator {name!r} needs group_ids_B")
    num_groups = sizes["B"] if num_groups is None else int(num_groups)
    check_group_ids(group_ids_B, num_groups)
    rewards = jnp.asarray(token_rewards_BxT)
    rewards = rewards.astype(jnp.result_type(rewards, jnp.float32))
    valid = jnp.ones(sizes["B"], rewards.dtype) if valid_B is None else as_float(valid_B, rewards)
    mask = as_float(mask_BxT, rewards) * valid[:, None]
    return rewards, mask, valid, num_groups


def broadcast(adv_B, mask_BxT):
    """Outcome advantage per sequence -> per token, zero on masked tokens."""
    return adv_B[:, None] * mask_BxT
