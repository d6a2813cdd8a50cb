"""Covariance-selected policy losses: Clip-Cov and KL-Cov.

"The Entropy Mechanism of Reinforcement Learning for Reasoning Language Models"
(arXiv:2505.22617): entropy collapses through tokens whose log-probability and advantage
covary strongly. Both losses score every valid token by the centred product
cov_t = (A_t - mean A) * (log pi_t - mean log pi), means over the valid tokens of the arrays
passed in, and treat a few high-covariance tokens differently (verl
compute_policy_loss_clip_cov / compute_policy_loss_kl_cov).

Not micro-batch invariant, as in verl: the means and the token budget
k = max(1, floor(ratio * valid tokens)) are taken over the arrays of one call, so splitting
a batch changes which tokens are selected. Aggregation still uses `global_tokens` /
`global_seqs`, so a split batch gives the sum of per-micro-batch selections.
"""

from __future__ import annotations

from fractions import Fraction

import jax
import jax.numpy as jnp

from mimojax.algos.ops import masked_mean
from mimojax.algos.policy_base import clamped_log_ratio, clip_bounds, register_policy_loss, weighted

_INT32_MAX = 2**31 - 1


def centred_cov(logp_BxT, adv_BxT, mask_BxT):
    """(A - mean A) * (log pi - mean log pi) per token; means over the valid tokens."""
    logp = jax.lax.stop_gradient(logp_BxT)
    return (adv_BxT - masked_mean(adv_BxT, mask_BxT)) * (logp - masked_mean(logp, mask_BxT))


def token_budget(n_valid, ratio: float, max_tokens: int):
    """max(1, floor(ratio * n_valid)), verl's max(int(ratio * n), 1).

    Exact integer arithmetic when `ratio` is a small-denominator fraction (2e-4 = 1/5000);
    otherwise float32 with a 2.5e-7 relative guard so rounding of an exact product does not
    floor to one less. (verl's float64 product can itself land one below for ratios stored
    below their decimal value, e.g. int(100 * 0.29) = 28; we give 29.)
    """
    if not ratio > 0:
        raise ValueError(f"covariance token ratio must be > 0, got {ratio}")
    frac = Fraction(ratio).limit_denominator(1 << 16)
    n = jnp.asarray(n_valid).astype(jnp.int32)
    if float(frac) == ratio and frac.numerator * max_tokens <= _INT32_MAX:
        k = n * frac.numerator // frac.denominator
    else:
        k = jnp.floor(n.astype(jnp.float32) * ratio * (1.0 + 2.5e-7)).astype(jnp.int32)
    return jnp.maximum(k, 1)


def _ranks(priority_BxT):
    """Rank of every entry in ascending order of priority (ties: lower flat index first)."""
    flat = priority_BxT.reshape(-1)
    order = jnp.argsort(flat, stable=True)
    ranks = jnp.zeros(flat.shape, jnp.int32).at[order].set(jnp.arange(flat.size, dtype=jnp.int32))
    return ranks.reshape(priority_BxT.shape)


def clip_cov_select(logp, adv, mask, clipped, rng, ratio, cov_lb, cov_ub):
    """Tokens Clip-Cov detaches: a uniform random subset of size min(k, #candidates).

    Candidates are valid tokens not already clipped by PPO with lb < cov < ub.
    """
    cov = centred_cov(logp, adv, mask)
    valid = mask > 0
    cand = valid & ~clipped & (cov > cov_lb) & (cov < cov_ub)
    k = token_budget(jnp.sum(valid), ratio, mask.size)
    priority = jnp.where(cand, jax.random.uniform(rng, mask.shape), 2.0)
    return cand & (_ranks(priority) < k)


def kl_cov_select(logp, adv, mask, ratio):
    """Tokens KL-Cov penalises: the k valid tokens with the largest covariance."""
    cov = centred_cov(logp, adv, mask)
    valid = mask > 0
    k = token_budget(jnp.sum(valid), ratio, mask.size)
    priority = jnp.where(valid, -cov, jnp.inf)
    return valid & (_ranks(priority) < k)


@register_policy_loss("clip_cov")
def clip_cov(
    logp,
    old,
    adv,
    mask,
    is_w,
    *,
    rng=None,
    clip_ratio=0.2,
    clip_low=None,
    clip_high=None,
    clip_cov_ratio=2e-4,
    clip_cov_lb=1.0,
    clip_cov_ub=5.0,
):
    """Clip-Cov: PPO clip, plus zero loss (no gradient) on k random tokens with lb < cov < ub.

    k = max(1, floor(clip_cov_ratio * valid tokens)); candidates exclude tokens PPO already
    clips. `rng` (a jax.random key) drives the random choice: same key, same tokens (split
    it per micro-batch and per step). No dual clip, as verl. `actor/pg_clipfrac` is the
    fraction of covariance-detached tokens (verl's meaning). The ratio is clamped at e^±20
    like our other losses (verl leaves it unclamped).
    Source: verl compute_policy_loss_clip_cov; defaults from verl's PolicyLossConfig.
    """
    if rng is None:
        raise ValueError("policy loss 'clip_cov' needs rng=jax.random.key(...) for its selection")
    low, high = clip_bounds(clip_ratio, clip_low, clip_high)
    log_ratio = clamped_log_ratio(logp, old)
    ratio = jnp.exp(log_ratio)
    loss1 = -adv * ratio
    loss2 = -adv * jnp.clip(ratio, 1.0 - low, 1.0 + high)
    clipped = loss2 > loss1
    selected = clip_cov_select(
        logp, adv, mask, clipped, rng, clip_cov_ratio, clip_cov_lb, clip_cov_ub
    )
    pg = jnp.where(selected, 0.0, jnp.where(clipped, loss2, loss1))
    metrics = {
        "actor/pg_clipfrac": masked_mean(selected.astype(logp.dtype), mask),
        "actor/ppo_kl": masked_mean(-log_ratio, mask),
    }
    return weighted(pg, is_w), metrics


@register_policy_loss("kl_cov")
def kl_cov(logp, old, adv, mask, is_w, *, kl_cov_ratio=2e-4, ppo_kl_coef=0.1):
    """KL-Cov: -A r on every token, + coef * |log r| on the top-k tokens by covariance.

    k = max(1, floor(kl_cov_ratio * valid tokens)); ties go to the earlier token (row-major).
    No clipping; r is clamped at e^±20 (verl: unclamped). `actor/ppo_kl` is the mean |log r|
    (what verl's kl_cov reports).
    Source: verl compute_policy_loss_kl_cov; defaults from verl's PolicyLossConfig.
    """
    log_ratio = clamped_log_ratio(logp, old)
    selected = jax.lax.stop_gradient(kl_cov_select(logp, adv, mask, kl_cov_ratio))
    abs_kl = jnp.abs(logp - old)
    pg = -adv * jnp.exp(log_ratio) + jnp.where(selected, ppo_kl_coef * abs_kl, 0.0)
    return weighted(pg, is_w), {"actor/ppo_kl": masked_mean(abs_kl, mask)}
