"""Trajectories to padded arrays: prompts left-padded to P, responses right-padded to R.

Both lengths are rounded up to a bucket, so a run sees a handful of shapes and the jitted
steps compile once per shape rather than once per batch. The prompt/response split at column P
lets the actor skip the LM head on prompt columns (`prompt_len` in train_step).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mimojax.rollout.trajectory import Trajectory


def bucket(n: int, multiple: int = 16) -> int:
    """n rounded up to a multiple (at least one multiple)."""
    return max(multiple, -(-int(n) // multiple) * multiple)


def build_batch(
    trajs: Sequence[Trajectory],
    scores_B: Sequence[float],
    valid_B: Sequence[bool],
    *,
    pad_id: int,
    multiple: int = 16,
    response_len: int | None = None,
) -> dict[str, np.ndarray]:
    """Numpy arrays for the update; invalid (infra-failed) samples get an all-zero response mask.

    Keys: input_ids_BxT, attention_mask_BxT, response_mask_BxT, rollout_logp_BxT,
    token_rewards_BxT (score on the last response token), scores_B, valid_B, group_ids_B,
    response_len_B, prompt_len_B; plus `prompt_len` P (int). `response_len` fixes R (the
    rollout's max_new_tokens rounded up to 8): one response shape, so one compile per P bucket.
    """
    B = len(trajs)
    P = bucket(max(len(t.prompt_ids) for t in trajs), multiple)
    longest = max(max(len(t.response_ids) for t in trajs), 1)
    R = bucket(longest, multiple) if response_len is None else bucket(response_len, 8)
    if longest > R:
        raise ValueError(f"build_batch: a response has {longest} tokens > response_len {R}")
    T = P + R
    ids = np.full((B, T), pad_id, np.int32)
    attn = np.zeros((B, T), np.int32)
    resp = np.zeros((B, T), np.int32)
    logp = np.zeros((B, T), np.float32)
    rewards = np.zeros((B, T), np.float32)
    for b, t in enumerate(trajs):
        p, r = len(t.prompt_ids), len(t.response_ids)
        ids[b, P - p : P] = t.prompt_ids
        ids[b, P : P + r] = t.response_ids
        attn[b, P - p : P + r] = 1
        if valid_B[b] and r > 0:
            resp[b, P : P + r] = t.response_mask
            logp[b, P : P + r] = t.rollout_logprobs
            rewards[b, P + r - 1] = scores_B[b]
    return {
        "input_ids_BxT": ids,
        "attention_mask_BxT": attn,
        "response_mask_BxT": resp,
        "rollout_logp_BxT": logp,
        "token_rewards_BxT": rewards,
        "scores_B": np.asarray(scores_B, np.float32),
        "valid_B": np.asarray(valid_B, bool),
        "group_ids_B": np.asarray([t.group for t in trajs], np.int32),
        "response_len_B": np.asarray([len(t.response_ids) for t in trajs], np.int32),
        "prompt_len_B": np.asarray([len(t.prompt_ids) for t in trajs], np.int32),
        "prompt_len": P,
    }


def micro_batches(arrays: dict[str, np.ndarray], idx: np.ndarray, micro: int) -> dict:
    """Rows `idx` of every *_BxT / *_B array, reshaped to [M, micro, ...]."""
    n = len(idx)
    if n % micro:
        raise ValueError(f"{n} samples do not split into micro-batches of {micro}")
    out = {}
    for k, v in arrays.items():
        if k.endswith("_BxT") or k.endswith("_B"):
            rows = v[idx]
            out[k] = rows.reshape(n // micro, micro, *rows.shape[1:])
    return out
