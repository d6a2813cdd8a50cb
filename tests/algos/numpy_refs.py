"""Float64 NumPy references written from the published formulas, with plain loops.

Independent of mimojax.algos: nothing here is imported from the package.
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np

EPS = 1e-6


def groups_of(ids, valid):
    out = defaultdict(list)
    for i, g in enumerate(ids):
        if valid[i]:
            out[int(g)].append(i)
    return out


def _valid(valid, B):
    return np.ones(B, bool) if valid is None else np.asarray(valid, bool)


def whiten(x, mask):
    """Masked mean, Bessel-corrected variance, (x - mean) / sqrt(var + 1e-8)."""
    vals = [x[i, t] for i in range(x.shape[0]) for t in range(x.shape[1]) if mask[i, t]]
    n = len(vals)
    mean = sum(vals) / n
    var = sum((v - mean) ** 2 for v in vals) / n * n / (n - 1)
    return (x - mean) / math.sqrt(var + 1e-8)


def _mean_std(vals):
    if len(vals) == 1:
        return 0.0, 1.0
    return float(np.mean(vals)), float(np.std(vals, ddof=1))


def _finish(adv_B, mask, valid):
    out = np.zeros(mask.shape)
    for i in range(mask.shape[0]):
        if valid[i]:
            out[i] = adv_B[i] * mask[i]
    return out


def grpo(rewards, mask, ids, valid=None, norm_by_std=True, eps=EPS):
    B = rewards.shape[0]
    valid = _valid(valid, B)
    scores = rewards.sum(1)
    adv = np.zeros(B)
    for idx in groups_of(ids, valid).values():
        mean, std = _mean_std([scores[i] for i in idx])
        for i in idx:
            adv[i] = (scores[i] - mean) / (std + eps) if norm_by_std else scores[i] - mean
    return _finish(adv, mask, valid)


def grpo_passk(rewards, mask, ids, valid=None, norm_by_std=True, eps=EPS):
    B = rewards.shape[0]
    valid = _valid(valid, B)
    scores = rewards.sum(1)
    adv = np.zeros(B)
    for idx in groups_of(ids, valid).values():
        if len(idx) < 2:
            continue
        order = sorted(idx, key=lambda i: -scores[i])
        best, second = order[0], order[1]
        gap = scores[best] - scores[second]
        if norm_by_std:
            gap /= np.std([scores[i] for i in idx], ddof=1) + eps
        adv[best] = gap
    return _finish(adv, mask, valid)


def rloo(rewards, mask, ids, valid=None):
    B = rewards.shape[0]
    valid = _valid(valid, B)
    scores = rewards.sum(1)
    adv = np.zeros(B)
    for idx in groups_of(ids, valid).values():
        for i in idx:
            others = [scores[j] for j in idx if j != i]
            adv[i] = scores[i] - np.mean(others) if others else scores[i]
    return _finish(adv, mask, valid)


def opo(rewards, mask, ids, valid=None):
    B = rewards.shape[0]
    valid = _valid(valid, B)
    scores = rewards.sum(1)
    lengths = mask.sum(1)
    adv = np.zeros(B)
    for idx in groups_of(ids, valid).values():
        if len(idx) == 1:
            base = 0.0
        else:
            base = sum(lengths[i] * scores[i] for i in idx) / sum(lengths[i] for i in idx)
        for i in idx:
            adv[i] = scores[i] - base
    return _finish(adv, mask, valid)


def gpg(rewards, mask, ids, valid=None, f_norm=1.0):
    B = rewards.shape[0]
    valid = _valid(valid, B)
    scores = rewards.sum(1)
    n_valid = sum(valid)
    n_nonzero = sum(1 for i in range(B) if valid[i] and scores[i] != 0)
    alpha = n_valid / max(n_nonzero, 1)
    adv = np.zeros(B)
    for idx in groups_of(ids, valid).values():
        mean, _ = _mean_std([scores[i] for i in idx])
        for i in idx:
            adv[i] = alpha * (scores[i] - mean) / f_norm
    return _finish(adv, mask, valid)


def reinforce_pp_baseline(rewards, mask, ids, valid=None):
    B = rewards.shape[0]
    valid = _valid(valid, B)
    scores = rewards.sum(1)
    adv = np.zeros(B)
    for idx in groups_of(ids, valid).values():
        mean, _ = _mean_std([scores[i] for i in idx])
        for i in idx:
            adv[i] = scores[i] - mean
    m = mask * valid[:, None]
    return whiten(_finish(adv, mask, valid), m) * m


def gdpo(rewards_BxK, mask, ids, weights, valid=None, norm_by_std=True, eps=EPS):
    B, K = rewards_BxK.shape
    valid = _valid(valid, B)
    total = np.zeros(B)
    for k in range(K):
        for idx in groups_of(ids, valid).values():
            mean, std = _mean_std([rewards_BxK[i, k] for i in idx])
            for i in idx:
                a = rewards_BxK[i, k] - mean
                total[i] += weights[k] * (a / (std + eps) if norm_by_std else a)
    m = mask * valid[:, None]
    return whiten(_finish(total, mask, valid), m) * m


def gae(rewards, values, mask, gamma, lam, valid=None):
    """GAE over each sequence's valid tokens only (masked tokens are not steps)."""
    B, T = rewards.shape
    valid = _valid(valid, B)
    m = mask * valid[:, None]
    adv = np.zeros((B, T))
    for i in range(B):
        steps = [t for t in range(T) if m[i, t]]
        running = 0.0
        for k in reversed(range(len(steps))):
            t = steps[k]
            next_v = values[i, steps[k + 1]] if k + 1 < len(steps) else 0.0
            delta = rewards[i, t] + gamma * next_v - values[i, t]
            running = delta + gamma * lam * running
            adv[i, t] = running
    returns = (adv + values) * m
    return whiten(adv, m) * m, returns


def reinforce_pp(rewards, mask, gamma, valid=None):
    """Discounted reward-to-go within each contiguous run of valid tokens, then whitened."""
    B, T = rewards.shape
    valid = _valid(valid, B)
    m = mask * valid[:, None]
    returns = np.zeros((B, T))
    for i in range(B):
        for t in reversed(range(T)):
            if not m[i, t]:
                continue
            follow = returns[i, t + 1] if t + 1 < T and m[i, t + 1] else 0.0
            returns[i, t] = rewards[i, t] + gamma * follow
    return whiten(returns, m) * m, returns


def remax(rewards, mask, baseline, valid=None):
    B, T = rewards.shape
    valid = _valid(valid, B)
    m = mask * valid[:, None]
    returns = np.zeros((B, T))
    adv = np.zeros((B, T))
    for i in range(B):
        for t in range(T):
            if m[i, t]:
                returns[i, t] = sum(rewards[i, s] * m[i, s] for s in range(t, T))
                adv[i, t] = returns[i, t] - baseline[i]
    return adv, returns


# ---------------------------------------------------------------- aggregation and KL


def agg(loss, mask, mode, global_tokens=None, global_seqs=None, scale=None):
    B, T = loss.shape
    if mode == "token-mean":
        n = mask.sum() if global_tokens is None else global_tokens
        return sum(loss[i, t] * mask[i, t] for i in range(B) for t in range(T)) / n
    if mode == "token-sum":
        return float((loss * mask).sum())
    seq_vals = []
    for i in range(B):
        n_i = mask[i].sum()
        if n_i == 0:
            continue
        s = sum(loss[i, t] * mask[i, t] for t in range(T))
        seq_vals.append(s / n_i if mode == "seq-mean-token-mean" else s)
    n = len(seq_vals) if global_seqs is None else global_seqs
    out = sum(seq_vals) / n
    if mode == "seq-mean-token-sum-norm":
        out /= T if scale is None else scale
    return out


def kl(logp, ref, name):
    d = logp - ref
    if name in ("k1", "kl"):
        return d
    if name == "abs":
        return np.abs(d)
    if name in ("k2", "mse"):
        return 0.5 * d**2
    if name in ("k3", "low_var_kl"):
        x = np.clip(-d, -20, 20)
        return np.clip(np.exp(x) - x - 1, -10, 10)
    raise KeyError(name)


# ---------------------------------------------------------------- policy losses (per token)


def ppo_token_losses(logp, old, adv, low, high, c):
    """Per-token PPO-clip loss with dual clip, plus clipped / dual-clipped indicators."""
    r = np.exp(np.clip(logp - old, -20, 20))
    unclipped = -adv * r
    clipped = -adv * np.clip(r, 1 - low, 1 + high)
    loss = np.maximum(unclipped, clipped)
    is_clipped = clipped > unclipped
    is_dual = np.zeros_like(is_clipped)
    if c is not None:
        is_dual = (adv < 0) & (loss > -adv * c)
        loss = np.where(is_dual, -adv * c, loss)
    return loss, is_clipped, is_dual


def ppo_token_grads(logp, old, adv, low, high, c):
    """d loss_t / d logp_t: -A r where the unclipped branch is active, else 0."""
    r = np.exp(logp - old)
    _, is_clipped, is_dual = ppo_token_losses(logp, old, adv, low, high, c)
    return np.where(is_clipped | is_dual, 0.0, -adv * r)


def gspo_token_losses(logp, old, adv, mask, low, high):
    B, T = logp.shape
    out = np.zeros((B, T))
    for i in range(B):
        n = max(mask[i].sum(), 1)
        s = math.exp(min(sum((logp[i, t] - old[i, t]) * mask[i, t] for t in range(T)) / n, 10))
        for t in range(T):
            out[i, t] = max(-adv[i, t] * s, -adv[i, t] * min(max(s, 1 - low), 1 + high))
    return out


def cispo_token_losses(logp, old, adv, low, high):
    r = np.exp(np.clip(logp - old, -20, 20))
    return -np.clip(r, 1 - low, 1 + high) * adv * logp


def sapo_token_losses(logp, old, adv, tau_pos, tau_neg):
    r = np.exp(np.clip(logp - old, -20, 20))
    tau = np.where(adv > 0, tau_pos, tau_neg)
    return -adv * (4 / tau) / (1 + np.exp(-tau * (r - 1)))


def gmpo_seq_losses(logp, old, adv, mask, low, high):
    """Per sequence: -mean_t(A) * exp(mean_t of the sign-aware clipped log ratio)."""
    B, T = logp.shape
    out = np.zeros(B)
    for i in range(B):
        n = mask[i].sum()
        total, a_total = 0.0, 0.0
        for t in range(T):
            if not mask[i, t]:
                continue
            lr = logp[i, t] - old[i, t]
            a = adv[i, t]
            if a > 0:
                lr = min(lr, high)
            elif a < 0:
                lr = max(lr, -low)
            else:
                lr = 0.0
            total += lr
            a_total += a
        out[i] = -(a_total / n) * math.exp(total / n) if n else 0.0
    return out


def dppo_token_losses(logp, old, adv, low, high, c, kind):
    r = np.exp(np.clip(logp - old, -20, 20))
    p, q = np.exp(logp), np.exp(old)
    if kind == "tv":
        keep = np.where(adv > 0, p - q <= high, p - q >= -low)
    else:
        bkl = q * (old - logp) + (1 - q) * np.log((1 - q + 1e-8) / (1 - p + 1e-8))
        keep = np.where(adv > 0, (bkl <= high) | (p <= q), (bkl <= low) | (p >= q))
    return -adv * np.minimum(r, c) * logp * keep, keep


def value_losses(vpred, values, returns, clip):
    l1 = (vpred - returns) ** 2
    l2 = (np.clip(vpred, values - clip, values + clip) - returns) ** 2
    return np.maximum(l1, l2), l2 > l1


# ---------------------------------------------------------------- rollout correction / filters


def token_tis(logp, rollout, mask, cap):
    return np.minimum(np.exp(logp - rollout), cap) * mask


def seq_tis(logp, rollout, mask, cap):
    B, T = logp.shape
    out = np.zeros((B, T))
    for i in range(B):
        w = math.exp(sum((logp[i, t] - rollout[i, t]) * mask[i, t] for t in range(T)))
        out[i] = min(w, cap) * mask[i]
    return out


def overlong(lengths, max_len, buffer, factor):
    start = max_len - buffer
    return np.array([min(-(n - start) / buffer * factor, 0.0) for n in lengths])


def filter_groups(values, ids, valid=None):
    valid = _valid(valid, len(values))
    keep = np.zeros(len(values), bool)
    for idx in groups_of(ids, valid).values():
        vals = {values[i] for i in idx}
        if len(idx) == 1 or len(vals) > 1:
            keep[idx] = True
    return keep
