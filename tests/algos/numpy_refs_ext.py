"""Float64 NumPy references, continued from numpy_refs.py (split for length).

Written from the formulas with plain loops; nothing is imported from mimojax.
"""

from __future__ import annotations

import math

import numpy as np
from numpy_refs import _valid, groups_of


def _tokens(mask):
    return [(i, t) for i in range(mask.shape[0]) for t in range(mask.shape[1]) if mask[i, t]]


# ---------------------------------------------------------------- Clip-Cov / KL-Cov / UP


def centred_cov(logp, adv, mask):
    toks = _tokens(mask)
    mean_a = sum(adv[i, t] for i, t in toks) / len(toks)
    mean_l = sum(logp[i, t] for i, t in toks) / len(toks)
    return {(i, t): (adv[i, t] - mean_a) * (logp[i, t] - mean_l) for i, t in toks}


def budget(n_valid, ratio):
    return max(1, int(n_valid * ratio))


def _ppo_pair(lp, old, a, low, high):
    r = math.exp(lp - old)
    return -a * r, -a * min(max(r, 1 - low), 1 + high)


def clip_cov_candidates(logp, old, adv, mask, low, high, lb, ub):
    """Valid tokens not clipped by PPO with lb < cov < ub."""
    cov = centred_cov(logp, adv, mask)
    out = []
    for (i, t), c in cov.items():
        l1, l2 = _ppo_pair(logp[i, t], old[i, t], adv[i, t], low, high)
        if not l2 > l1 and lb < c < ub:
            out.append((i, t))
    return out


def clip_cov_token_losses(logp, old, adv, low, high, selected):
    out = np.zeros(logp.shape)
    for i in range(logp.shape[0]):
        for t in range(logp.shape[1]):
            l1, l2 = _ppo_pair(logp[i, t], old[i, t], adv[i, t], low, high)
            out[i, t] = 0.0 if (i, t) in selected else max(l1, l2)
    return out


def kl_cov_selected(logp, adv, mask, ratio):
    """The budget's worth of valid tokens with the largest covariance (ties: row-major first)."""
    cov = centred_cov(logp, adv, mask)
    order = sorted(cov, key=lambda it: (-cov[it], it[0] * mask.shape[1] + it[1]))
    return set(order[: budget(len(cov), ratio)])


def kl_cov_token_losses(logp, old, adv, coef, selected):
    out = np.zeros(logp.shape)
    for i in range(logp.shape[0]):
        for t in range(logp.shape[1]):
            lr = logp[i, t] - old[i, t]
            out[i, t] = -adv[i, t] * math.exp(lr) + (coef * abs(lr) if (i, t) in selected else 0)
    return out


def up_token_losses(logp, old, adv, low, high, c):
    out = np.zeros(logp.shape)
    for i in range(logp.shape[0]):
        for t in range(logp.shape[1]):
            a = adv[i, t]
            if a > 0:
                out[i, t] = -a
                continue
            l1, l2 = _ppo_pair(logp[i, t], old[i, t], a, low, high)
            out[i, t] = min(max(l1, l2), -a * c) if a < 0 else max(l1, l2)
    return out


# ---------------------------------------------------------------- advantage estimators


def rloo_vectorized(rewards, mask, ids, valid=None):
    B = rewards.shape[0]
    valid = _valid(valid, B)
    scores = rewards.sum(1)
    out = np.zeros(mask.shape)
    for idx in groups_of(ids, valid).values():
        for i in idx:
            others = [scores[j] for j in idx if j != i]
            out[i] = (scores[i] - np.mean(others) if others else 0.0) * mask[i]
    return out


def _otb_inputs(rewards, mask, old_logp, sum_pi_sq, is_w):
    """Reward-to-go G and cumulative path variance W over the valid tokens of each row."""
    B, T = rewards.shape
    G, W = np.zeros((B, T)), np.zeros((B, T))
    for i in range(B):
        running = 0.0
        for t in range(T):
            w = 1 - 2 * math.exp(old_logp[i, t]) + sum_pi_sq[i, t]
            if is_w is not None:
                w *= is_w[i, t] ** 2
            running += w * mask[i, t]
            W[i, t] = running
            G[i, t] = sum(rewards[i, s] * mask[i, s] for s in range(t, T))
    return G, W


def _baselines(idx, G, W, m, zero_tail, eps):
    """b[i][t] for the group members idx (rows of G, W, m aligned by column)."""
    T = G.shape[1]
    if len(idx) == 1:
        return {idx[0]: np.zeros(T)}
    b = np.zeros(T)
    for t in range(T):
        num = sum(G[i, t] * W[i, t] * m[i, t] for i in idx)
        den = sum(W[i, t] * m[i, t] for i in idx)
        b[t] = num / (den + eps)
    out = {i: b.copy() for i in idx}
    if zero_tail:
        lengths = sorted(((m[i].sum(), i) for i in idx), reverse=True)
        (l_max, i_max), (l_second, _) = lengths[0], lengths[1]
        if l_max > l_second:
            out[i_max][int(l_second) :] = 0.0
    return out


def otb(rewards, mask, ids, old_logp, sum_pi_sq, is_w=None, valid=None, zero_tail=True, eps=1e-8):
    B, T = rewards.shape
    valid = _valid(valid, B)
    m = mask * valid[:, None]
    G, W = _otb_inputs(rewards, m, old_logp, sum_pi_sq, is_w)
    adv = np.zeros((B, T))
    for idx in groups_of(ids, valid).values():
        for i, b in _baselines(idx, G, W, m, zero_tail, eps).items():
            adv[i] = (G[i] - b) * m[i]
    return adv, G * m


def tir_otb(rewards, mask, ids, old_logp, sum_pi_sq, is_w=None, valid=None, zero_tail=True):
    """Each row's valid tokens are packed to the left before the per-column baseline."""
    B, T = rewards.shape
    valid = _valid(valid, B)
    m = mask * valid[:, None]
    G, W = _otb_inputs(rewards, m, old_logp, sum_pi_sq, is_w)
    pos = [[t for t in range(T) if m[i, t]] for i in range(B)]
    Gc, Wc, mc = np.zeros((B, T)), np.zeros((B, T)), np.zeros((B, T))
    for i in range(B):
        for k, t in enumerate(pos[i]):
            Gc[i, k], Wc[i, k], mc[i, k] = G[i, t], W[i, t], 1.0
    adv = np.zeros((B, T))
    members = valid & (m.sum(1) > 0)
    for idx in groups_of(ids, members).values():
        for i, b in _baselines(idx, Gc, Wc, mc, zero_tail, 1e-8).items():
            for k, t in enumerate(pos[i]):
                adv[i, t] = Gc[i, k] - b[k]
    return adv, G * m


# ---------------------------------------------------------------- rollout-correction metrics


def _seq_means(x, mask):
    """Per-sequence masked means of the sequences with a valid token."""
    out = []
    for i in range(mask.shape[0]):
        n = mask[i].sum()
        if n:
            out.append(sum(x[i, t] for t in range(mask.shape[1]) if mask[i, t]) / n)
    return np.array(out)


def chi2(logp, rollout, mask):
    toks = _tokens(mask)
    tok = sum(math.exp(2 * (logp[i, t] - rollout[i, t])) for i, t in toks) / len(toks) - 1
    seq = []
    for i in range(mask.shape[0]):
        if mask[i].sum():
            s = sum(logp[i, t] - rollout[i, t] for t in range(mask.shape[1]) if mask[i, t])
            seq.append(math.exp(2 * s))
    return tok, float(np.mean(seq)) - 1


def ppl_metrics(logp, rollout, mask):
    lt, lr = _seq_means(logp, mask), _seq_means(rollout, mask)
    d = lr - lt
    return {
        "training_ppl": np.mean(np.exp(-lt)),
        "training_log_ppl": np.mean(-lt),
        "rollout_ppl": np.mean(np.exp(-lr)),
        "rollout_log_ppl": np.mean(-lr),
        "log_ppl_diff": d.mean(),
        "log_ppl_abs_diff": np.abs(d).mean(),
        "log_ppl_diff_max": d.max(),
        "log_ppl_diff_min": d.min(),
        "ppl_ratio": np.exp(d).mean(),
    }


def is_ess_and_std(w, mask, upper):
    vals = [min(max(w[i, t], 0.0), upper) for i, t in _tokens(mask)]
    mean = sum(vals) / len(vals)
    std = math.sqrt(max(sum(v * v for v in vals) / len(vals) - mean**2, 0.0))
    ess = 1.0 / (sum((v / mean) ** 2 for v in vals) / len(vals))
    return ess, std


def binary_kl(log_p, log_q, eps=1e-6):
    p = min(max(math.exp(log_p), eps), 1 - eps)
    q = min(max(math.exp(log_q), eps), 1 - eps)
    return p * math.log(p / q) + (1 - p) * math.log((1 - p) / (1 - q))
