"""The algorithm registries (estimators, policy losses, KL estimators) and estimator traits."""

from __future__ import annotations

import dataclasses

from mimojax.registry import Registry, UnknownNameError

__all__ = [
    "ADVANTAGE_ESTIMATORS",
    "KL_ESTIMATORS",
    "POLICY_LOSSES",
    "EstimatorTraits",
    "Registry",
    "UnknownNameError",
]


@dataclasses.dataclass(frozen=True)
class EstimatorTraits:
    """What an advantage estimator needs from the trainer, declared where it is registered."""

    needs_groups: bool = False  # group_ids_B: n samples per prompt form a group (GRPO, RLOO ...)
    norm_by_std: bool = False  # takes `norm_by_std` (algorithm.norm_adv_by_std_in_grpo)
    needs_values: bool = False  # values_BxT from a critic (GAE)
    # baseline_rewards_B: the score of one extra greedy rollout per prompt (ReMax)
    needs_baseline_rollout: bool = False
    # old_logp_BxT and sum_pi_squared_BxT from the log-prob pass (optimal token baseline)
    needs_logprob_stats: bool = False
    # rewards_BxK: one outcome reward per grader dimension (RewardResult.dims), as GDPO takes
    takes_reward_dims: bool = False


ADVANTAGE_ESTIMATORS = Registry("advantage estimator", default_traits=EstimatorTraits())
POLICY_LOSSES = Registry("policy loss")
KL_ESTIMATORS = Registry("KL estimator")
