"""verl's `*_vectorized` outcome estimators.

`grpo_vectorized` is the same math as `grpo` (verl re-implemented it with scatter-adds), so
it is an alias. `rloo_vectorized` differs from `rloo` on a sample alone in its group: it
gets advantage 0, where `rloo` keeps the raw reward.
"""

from __future__ import annotations

import jax

from mimojax.algos.advantages_common import broadcast, prepare
from mimojax.algos.advantages_outcome import (
    GROUP_STD_TRAITS,
    GROUP_TRAITS,
    grpo,
    leave_one_out_B,
)
from mimojax.algos.registry import ADVANTAGE_ESTIMATORS

# verl compute_grpo_vectorized_outcome_advantage: group_mean_std with eps=0 and the
# singleton fallback (mean 0, std 1), i.e. exactly grpo.
ADVANTAGE_ESTIMATORS.register("grpo_vectorized", traits=GROUP_STD_TRAITS)(grpo)


@ADVANTAGE_ESTIMATORS.register("rloo_vectorized", traits=GROUP_TRAITS)
def rloo_vectorized(
    token_rewards_BxT,
    mask_BxT,
    group_ids_B=None,
    values_BxT=None,
    gamma=1.0,
    lam=1.0,
    *,
    valid_B=None,
    num_groups=None,
):
    """RLOO n/(n-1) * (r - group mean), and 0 for a sample alone in its group.

    Source: verl compute_rloo_vectorized_outcome_advantage ((c r - sum) / max(c-1, 1) * [c>1]).
    """
    r, mask, valid, G = prepare(
        "rloo_vectorized",
        token_rewards_BxT,
        mask_BxT,
        group_ids_B,
        valid_B,
        num_groups,
        need_groups=True,
    )
    adv_B = leave_one_out_B(r.sum(-1), group_ids_B, valid, G, alone_B=0.0)
    adv_BxT = jax.lax.stop_gradient(broadcast(adv_B, mask))
    return adv_BxT, adv_BxT
