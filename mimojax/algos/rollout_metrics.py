"""Diagnostics of the rollout/trainer mismatch, with verl's `rollout_corr/` metric names.

Follows verl's rollout_corr_helper (compute_offpolicy_metrics, compute_is_metrics,
compute_binary_kl_divergence). Sequence-level statistics average over sequences with at
least one valid token (verl also counts fully masked rows).
"""

from __future__ import annotations

import jax.numpy as jnp

from mimojax.algos.ops import masked_mean

SAFETY_BOUND = 20.0
P = "rollout_corr/"


def seq_stats(v_B, mask):
    """(mask of sequences with a valid token, mean / unbiased std / max / min over them)."""
    has = mask.sum(-1) > 0
    n = jnp.maximum(has.sum(), 1)
    mean = jnp.sum(jnp.where(has, v_B, 0.0)) / n
    var = jnp.sum(jnp.where(has, jnp.square(v_B - mean), 0.0)) / jnp.maximum(n - 1, 1)
    return {
        "mean": mean,
        "std": jnp.where(has.sum() > 1, jnp.sqrt(var), 0.0),
        "max": jnp.max(jnp.where(has, v_B, -jnp.inf)),
        "min": jnp.min(jnp.where(has, v_B, jnp.inf)),
    }


def mismatch_metrics(logp_BxT, rollout_logp_BxT, mask):
    """Perplexities, KL estimators and chi-square divergences between trainer and rollout.

    chi2_token = E_tok[rho^2] - 1, chi2_seq = E_seq[(prod_t rho_t)^2] - 1 with
    rho = pi_train / pi_rollout (log ratios clamped at +-20 before exp). Same as verl's
    compute_rollout_corr_metrics_from_logprobs when given the current logprobs.
    """
    lr = logp_BxT - rollout_logp_BxT
    lr_safe = jnp.clip(lr, -SAFETY_BOUND, SAFETY_BOUND)
    train_B = masked_mean(logp_BxT, mask, -1)
    roll_B = masked_mean(rollout_logp_BxT, mask, -1)
    diff_B = roll_B - train_B
    seq_lr = jnp.clip(jnp.sum(lr * mask, -1), -SAFETY_BOUND, SAFETY_BOUND)
    seq_mean = lambda v_B: seq_stats(v_B, mask)["mean"]
    diff = seq_stats(diff_B, mask)
    return {
        P + "logp_abs_diff_mean": masked_mean(jnp.abs(lr), mask),
        P + "logp_abs_diff_max": jnp.max(jnp.abs(lr) * mask),
        P + "kl": masked_mean(-lr, mask),
        P + "k3_kl": masked_mean(jnp.exp(lr_safe) - lr_safe - 1.0, mask),
        P + "training_ppl": seq_mean(jnp.exp(-train_B)),
        P + "training_log_ppl": seq_mean(-train_B),
        P + "rollout_ppl": seq_mean(jnp.exp(-roll_B)),
        P + "rollout_log_ppl": seq_mean(-roll_B),
        P + "log_ppl_diff": diff["mean"],
        P + "log_ppl_abs_diff": seq_mean(jnp.abs(diff_B)),
        P + "log_ppl_diff_max": diff["max"],
        P + "log_ppl_diff_min": diff["min"],
        P + "ppl_ratio": seq_mean(jnp.exp(diff_B)),
        P + "chi2_token": masked_mean(jnp.exp(2.0 * lr_safe), mask) - 1.0,
        P + "chi2_seq": seq_mean(jnp.exp(2.0 * seq_lr)) - 1.0,
    }


def is_diagnostics(w_BxT, raw_BxT, mask, threshold, threshold_lower=None):
    """Spread, effective sample size and per-sequence stats of the applied IS weights `w`.

    ESS (relative, in (0, 1]) = 1 / mean_tok[(w' / mean_tok w')^2] with w' = clip(w, 0, upper)
    (0 when every weight is 0). `raw` are the weights before truncation / IcePop.
    Source: verl compute_is_metrics.
    """
    lower = 1.0 / threshold if threshold_lower is None else threshold_lower
    wc = jnp.clip(w_BxT, 0.0, threshold)
    mean = masked_mean(wc, mask)
    var = masked_mean(jnp.square(wc), mask) - jnp.square(mean)
    norm2 = masked_mean(jnp.square(wc / (mean + 1e-8)), mask)
    seq_w = seq_stats(masked_mean(w_BxT, mask, -1), mask)
    has = mask.sum(-1) > 0
    raw_B = masked_mean(raw_BxT, mask, -1)
    frac = lambda x_B: jnp.sum(x_B & has) / jnp.maximum(has.sum(), 1)
    metrics = {
        P + "rollout_is_std": jnp.where(mask.sum() > 1, jnp.sqrt(jnp.maximum(var, 0.0)), 0.0),
        P + "rollout_is_eff_sample_size": jnp.where(norm2 > 0, 1.0 / norm2, 0.0),
        **{P + f"rollout_is_seq_{k}": v for k, v in seq_w.items()},
        P + "rollout_is_seq_max_deviation": jnp.maximum(seq_w["max"] - 1.0, 1.0 - seq_w["min"]),
        P + "rollout_is_seq_fraction_high": frac(raw_B > threshold),
        P + "rollout_is_seq_fraction_low": frac(raw_B < lower),
    }
    if threshold_lower is not None:  # IcePop: fraction of tokens zeroed out of bounds
        oob = (raw_BxT < threshold_lower) | (raw_BxT > threshold)
        metrics[P + "rollout_is_oob_ratio"] = masked_mean(oob, mask)
    return metrics


def binary_kl(log_p, log_q, eps=1e-6):
    """KL(Bern(p) || Bern(q)) of the sampled token, p and q clamped to [eps, 1 - eps].

    Source: verl compute_binary_kl_divergence (used by the KPop `binary_kl` rejection).
    """
    p = jnp.clip(jnp.exp(log_p), eps, 1.0 - eps)
    q = jnp.clip(jnp.exp(log_q), eps, 1.0 - eps)
    return p * jnp.log(p / q) + (1.0 - p) * jnp.log((1.0 - p) / (1.0 - q))
