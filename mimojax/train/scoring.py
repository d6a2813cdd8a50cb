"""The scoring passes of one RL step: what the advantage stage needs beyond rewards.

Old / reference log-probs, values, ReMax's greedy baseline and OTB's sum of squared probabilities,
each over the rollout batch in `micro_batch_size`-row chunks (the activation memory of one chunk).
"""

from __future__ import annotations

import numpy as np

from mimojax.rollout.batch import map_rows


def scoring_passes(roles, spec, traits, rb, examples, step: int, timer, rollout) -> dict:
    """`*_BxT` arrays (and ReMax's `baseline_rewards_B`) for `AdvantageInputs`, by what the
    estimator's `traits` and the built roles need; `rollout(examples, n, sampling, id_base)`."""
    actor, ref, critic, P, out = roles.actor, roles.reference, roles.critic, rb.prompt_len, {}
    micro = spec.micro_batch_size
    if traits.needs_baseline_rollout:  # ReMax: one greedy sample per prompt
        with timer("gen_max"):
            base_id = (1 << 29) + step * spec.batch_size
            greedy = rollout(examples, 1, roles.rollout.greedy, base_id)
            base = roles.reward.score([t.grader_item() for t in greedy])
        out["baseline_rewards_B"] = np.float32([base[g].score for g in rb.group_ids_B])
    if traits.needs_logprob_stats:
        with timer("old_log_prob"):
            out["old_logp_BxT"], out["sum_pi_squared_BxT"] = map_rows(
                rb, micro, actor.logprob_stats, actor.state.params, prompt_len=P
            )
    elif not actor.on_policy or spec.advantage.use_kl_in_reward:
        with timer("old_log_prob"):
            out["old_logp_BxT"] = map_rows(
                rb, micro, actor.logprobs, actor.state.params, prompt_len=P
            )
    if ref is not None:
        with timer("ref"):
            out["ref_logp_BxT"] = map_rows(rb, micro, ref.logprobs, ref.params, prompt_len=P)
    if critic is not None:
        with timer("values"):
            values = map_rows(rb, micro, critic.values, critic.state.params)
            out["values_BxT"] = values * rb.response_mask_BxT
    return out
