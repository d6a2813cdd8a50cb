"""Token-level advantage estimators: GAE, REINFORCE++ and ReMax.

Each returns `(adv_BxT, returns_BxT)`, zero on masked tokens. Samples with
`valid_B == False` (infra failures) get zero advantage and stay out of the whitening stats.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from mimojax.algos.advantages_common import prepare
from mimojax.algos.checks import check_shapes
from mimojax.algos.ops import masked_whiten
from mimojax.algos.registry import ADVANTAGE_ESTIMATORS, EstimatorTraits


def _reverse_scan(step, init, *xs_BxT):
    """Run `step(carry, x_B...)` from the last token to the first; outputs stacked as BxT."""
    xs = tuple(jnp.swapaxes(x, 0, 1) for x in xs_BxT)
    _, out_TxB = jax.lax.scan(lambda c, x: step(c, *x), init, xs, reverse=True)
    return jnp.swapaxes(out_TxB, 0, 1)


@ADVANTAGE_ESTIMATORS.register("gae", traits=EstimatorTraits(needs_values=True))
def gae(
    token_rewards_BxT,
    mask_BxT,
    group_ids_B=None,
    values_BxT=None,
    gamma=1.0,
    lam=1.0,
    *,
    valid_B=None,
    num_groups=None,
    whiten=True,
):
    """GAE(gamma, lambda); masked tokens (tool output) are skipped, not treated as steps.

    returns = advantages + values; advantages are then whitened over the valid tokens.
    """
    if values_BxT is None:
        raise ValueError("advantage estimator 'gae' needs values_BxT")
    r, mask, _, _ = prepare(
        "gae", token_rewards_BxT, mask_BxT, None, valid_B, num_groups, values_BxT=values_BxT
    )
    v = jnp.asarray(values_BxT, r.dtype)

    def step(carry, r_B, v_B, m_B):
        next_v, last = carry
        delta = r_B + gamma * next_v - v_B
        new = delta + gamma * lam * last
        next_v = v_B * m_B + (1 - m_B) * next_v
        last = new * m_B + (1 - m_B) * last
        return (next_v, last), last

    zeros = jnp.zeros(r.shape[0], r.dtype)
    adv = _reverse_scan(step, (zeros, zeros), r, v, mask)
    returns = (adv + v) * mask
    if whiten:
        adv = masked_whiten(adv, mask)
    return jax.lax.stop_gradient(adv * mask), jax.lax.stop_gradient(returns)


@ADVANTAGE_ESTIMATORS.register("reinforce_plus_plus", traits=EstimatorTraits())
def reinforce_plus_plus(
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
    """REINFORCE++: discounted reward-to-go per token, whitened over the batch's valid tokens.

    The running return resets at every masked token, as verl.
    """
    r, mask, _, _ = prepare(
        "reinforce_plus_plus", token_rewards_BxT, mask_BxT, None, valid_B, num_groups
    )

    def step(running, r_B, m_B):
        g = r_B + gamma * running
        return g * m_B, g

    returns = _reverse_scan(step, jnp.zeros(r.shape[0], r.dtype), r, mask) * mask
    adv = masked_whiten(returns, mask) * mask
    return jax.lax.stop_gradient(adv), jax.lax.stop_gradient(returns)


@ADVANTAGE_ESTIMATORS.register("remax", traits=EstimatorTraits(needs_baseline_rollout=True))
def remax(
    token_rewards_BxT,
    mask_BxT,
    group_ids_B=None,
    values_BxT=None,
    gamma=1.0,
    lam=1.0,
    *,
    valid_B=None,
    num_groups=None,
    baseline_rewards_B=None,
):
    """ReMax: undiscounted reward-to-go minus the greedy rollout's reward `baseline_rewards_B`."""
    if baseline_rewards_B is None:
        raise ValueError("advantage estimator 'remax' needs baseline_rewards_B (greedy reward)")
    check_shapes(token_rewards_BxT=token_rewards_BxT, baseline_rewards_B=baseline_rewards_B)
    r, mask, _, _ = prepare("remax", token_rewards_BxT, mask_BxT, None, valid_B, num_groups)
    returns = jnp.flip(jnp.cumsum(jnp.flip(r * mask, -1), -1), -1) * mask
    adv = returns - jnp.asarray(baseline_rewards_B, r.dtype)[:, None] * mask
    return jax.lax.stop_gradient(adv), jax.lax.stop_gradient(returns)
