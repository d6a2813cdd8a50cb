"""RL algorithms as pure functions over arrays, registered by name.

from mimojax.algos import ADVANTAGE_ESTIMATORS, POLICY_LOSSES, KL_ESTIMATORS, agg_loss
adv_BxT, returns_BxT = ADVANTAGE_ESTIMATORS["grpo"](token_rewards_BxT=r, mask_BxT=m,
                                                   group_ids_B=g, norm_by_std=False)
loss, metrics = POLICY_LOSSES["vanilla"](logp_BxT=lp, old_logp_BxT=olp, adv_BxT=adv_BxT,
                                         mask_BxT=m, agg_mode="token-mean", clip_high=0.28)
out = advantage_stage(AdvantageSettings("grpo", filter_groups=True), AdvantageInputs(
    token_rewards_BxT=r, response_mask_BxT=m, scores_B=s, group_ids_B=g))
"""

# Importing the modules registers their functions.
from mimojax.algos import (  # noqa: F401
    advantages_otb,
    advantages_outcome,
    advantages_token,
    advantages_vectorized,
    policy_losses,
    policy_losses_cov,
    policy_losses_offpolicy,
)
from mimojax.algos.advantage_stage import (
    AdvantageInputs,
    AdvantageOutput,
    AdvantageSettings,
    advantage_stage,
    required_inputs,
)
from mimojax.algos.aggregation import agg_loss, global_counts
from mimojax.algos.batch_filters import (
    add_outcome_reward,
    apply_overlong_shaping,
    filter_groups,
    overlong_penalty,
)
from mimojax.algos.checks import AGG_MODES, check_shapes
from mimojax.algos.entropy_control import EntropyController
from mimojax.algos.kl import KLController, adaptive_kl_coef, apply_kl_penalty, kl_loss
from mimojax.algos.policy_base import register_policy_loss
from mimojax.algos.registry import (
    ADVANTAGE_ESTIMATORS,
    KL_ESTIMATORS,
    POLICY_LOSSES,
    EstimatorTraits,
    Registry,
    UnknownNameError,
)
from mimojax.algos.rollout_correction import bypass_mode_inputs, rollout_correction
from mimojax.algos.rollout_metrics import binary_kl, mismatch_metrics
from mimojax.algos.value_loss import entropy_from_logits, entropy_loss, value_loss

__all__ = [
    "ADVANTAGE_ESTIMATORS",
    "AGG_MODES",
    "KL_ESTIMATORS",
    "POLICY_LOSSES",
    "AdvantageInputs",
    "AdvantageOutput",
    "AdvantageSettings",
    "EntropyController",
    "EstimatorTraits",
    "KLController",
    "Registry",
    "UnknownNameError",
    "adaptive_kl_coef",
    "add_outcome_reward",
    "advantage_stage",
    "agg_loss",
    "apply_kl_penalty",
    "apply_overlong_shaping",
    "binary_kl",
    "bypass_mode_inputs",
    "check_shapes",
    "entropy_from_logits",
    "entropy_loss",
    "filter_groups",
    "global_counts",
    "kl_loss",
    "mismatch_metrics",
    "overlong_penalty",
    "register_policy_loss",
    "required_inputs",
    "rollout_correction",
    "value_loss",
]
