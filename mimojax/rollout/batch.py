"""Typed batches: Trajectories to padded arrays (`RolloutBatch`), and what an update sees
(`TrainBatch`), split into micro-batches by rows or by a token budget.

Layout: prompts left-padded to P, responses right-padded to R, T = P + R. Both lengths are rounded
up to a bucket, so a run sees a handful of shapes and the jitted steps compile once per shape
rather than once per batch. The prompt/response split at column P lets the actor skip the LM head
on prompt columns (`prompt_len`, a static field: part of the jit cache key).

Both classes are `flax.struct` pytrees whose array fields are named with their shape; a field
left as None is an empty subtree (an update that does not read it never ships it).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import jax
import numpy as np
from flax import struct

from mimojax.rollout.trajectory import Trajectory


def bucket(n: int, multiple: int = 16) -> int:
    """n rounded up to a multiple (at least one multiple)."""
    return max(multiple, -(-int(n) // multiple) * multiple)


class _Fields:
    """What both batch types share: the row count and taking rows."""

    @property
    def num_rows(self) -> int:
        """B, the leading axis of every *_BxT field (the second one in a micro-batch stack)."""
        return int(self.input_ids_BxT.shape[-2])

    def take(self, idx):
        """Rows `idx` of every array field."""
        return jax.tree.map(lambda x: x[idx], self)


@struct.dataclass
class RolloutBatch(_Fields):
    """A step's trajectories as padded numpy arrays; invalid samples have an all-zero
    response mask (and no rollout logprobs or reward)."""

    input_ids_BxT: np.ndarray
    attention_mask_BxT: np.ndarray
    response_mask_BxT: np.ndarray
    rollout_logp_BxT: np.ndarray
    # The score on the last model token; per-turn grader scores on each turn's last token.
    token_rewards_BxT: np.ndarray
    scores_B: np.ndarray
    valid_B: np.ndarray
    group_ids_B: np.ndarray
    response_len_B: np.ndarray
    prompt_len_B: np.ndarray
    # Weights version that sampled each response token (-1 off the response): partial rollouts
    # mix versions within a row; `rollout_logp_BxT` is each token's behaviour log-prob.
    versions_BxT: np.ndarray | None = None
    # True where the response was cut off by a token budget (Trajectory.truncated).
    truncated_B: np.ndarray | None = None
    prompt_len: int = struct.field(pytree_node=False, default=1)  # P


def map_rows(batch, micro: int, fn, params, **kw):
    """`fn(params, ids, attn, **kw)` over `micro`-row chunks of a batch, outputs concatenated as
    NumPy (the old-policy, reference and value passes: activation memory of one chunk)."""
    ids, attn = batch.input_ids_BxT, batch.attention_mask_BxT
    outs = [
        jax.tree.map(np.asarray, fn(params, ids[s : s + micro], attn[s : s + micro], **kw))
        for s in range(0, ids.shape[0], micro)
    ]
    return jax.tree.map(lambda *xs: np.concatenate(xs, axis=0), *outs)


def build_batch(
    trajs: Sequence[Trajectory],
    scores_B: Sequence[float],
    valid_B: Sequence[bool],
    *,
    pad_id: int,
    multiple: int = 16,
    response_len: int | None = None,
    turn_scores: Sequence[Sequence[float] | None] | None = None,
) -> RolloutBatch:
    """The padded RolloutBatch of `trajs`; invalid (infra-failed) samples get no loss tokens.

    `response_len` fixes R (the rollout's max_new_tokens rounded up to 8): one response shape,
    so one compile per P bucket. `turn_scores[b]`, when a grader gave them, adds each model
    turn's score on that turn's last token (credit to turns, for token-level estimators).
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
    versions = np.full((B, T), -1, np.int32)
    for b, t in enumerate(trajs):
        p, r = len(t.prompt_ids), len(t.response_ids)
        ids[b, P - p : P] = t.prompt_ids
        ids[b, P : P + r] = t.response_ids
        versions[b, P : P + r] = t.versions()
        attn[b, P - p : P + r] = 1
        if valid_B[b] and r > 0:
            resp[b, P : P + r] = t.response_mask
            logp[b, P : P + r] = t.rollout_logprobs
            ends = t.turn_ends or [r - 1]
            rewards[b, P + ends[-1]] = scores_B[b]  # the last model token (not an observation)
            per_turn = turn_scores[b] if turn_scores is not None else None
            for end, score in zip(ends, per_turn or ()):
                rewards[b, P + end] += score
    return RolloutBatch(
        input_ids_BxT=ids,
        attention_mask_BxT=attn,
        response_mask_BxT=resp,
        rollout_logp_BxT=logp,
        token_rewards_BxT=rewards,
        scores_B=np.asarray(scores_B, np.float32),
        valid_B=np.asarray(valid_B, bool),
        group_ids_B=np.asarray([t.group for t in trajs], np.int32),
        response_len_B=np.asarray([len(t.response_ids) for t in trajs], np.int32),
        prompt_len_B=np.asarray([len(t.prompt_ids) for t in trajs], np.int32),
        versions_BxT=versions,
        truncated_B=np.asarray([t.truncated for t in trajs], bool),
        prompt_len=P,
    )


@struct.dataclass
class TrainBatch(_Fields):
    """What a jitted update reads. `response_mask_BxT` is the loss mask (after filtering);
    fields an update does not use may be None (no old logprobs on-policy, no ref without a
    KL loss, no values / returns without a critic)."""

    input_ids_BxT: np.ndarray
    attention_mask_BxT: np.ndarray
    response_mask_BxT: np.ndarray
    rollout_logp_BxT: np.ndarray
    adv_BxT: np.ndarray | None = None
    old_logp_BxT: np.ndarray | None = None
    ref_logp_BxT: np.ndarray | None = None
    values_BxT: np.ndarray | None = None
    returns_BxT: np.ndarray | None = None
    prompt_len: int = struct.field(pytree_node=False, default=1)  # P

    def without_masked_rows(self, multiple: int = 1) -> TrainBatch:
        """The rows with a loss token, in order, padded with loss-free rows to a multiple of
        `multiple` (when the batch has them). A row without loss tokens adds nothing to the loss
        or its gradient (the terms are divided by the mini-batch's global `Counts`) but costs a
        full forward and backward: with filtered groups that is most of a step's update."""
        has_loss_B = np.asarray(self.response_mask_BxT).sum(-1) > 0
        keep = np.flatnonzero(has_loss_B)
        pad = np.flatnonzero(~has_loss_B)[: (-len(keep)) % max(int(multiple), 1)]
        if len(keep) + len(pad) == len(has_loss_B):
            return self
        return self.take(np.sort(np.concatenate([keep, pad])))

    def split_rows(self, micro: int) -> TrainBatch:
        """One stack of row micro-batches: every leaf reshaped to [B // micro, micro, ...]."""
        n = self.num_rows
        if micro <= 0 or n % micro:
            raise ValueError(f"{n} samples do not split into micro-batches of {micro}")
        return jax.tree.map(lambda x: x.reshape(n // micro, micro, *x.shape[1:]), self)

    def split_tokens(
        self, max_tokens: int, multiple: int = 16, *, trim_prompt: bool = False
    ) -> list[TrainBatch]:
        """Token-budget micro-batches (verl's use_dynamic_bsz), as a few same-shape stacks.

        See `pack_by_tokens`. Each stack is a TrainBatch with [M, rows, width] leaves and its own
        `prompt_len`; the mini-batch's gradient is the sum over all stacks' micro-batches. Rows
        are trimmed on the right of the response part; with `trim_prompt` also on the left of the
        prompt part (`prompt_len` shrinks to match), at the cost of more distinct shapes.
        """
        x = jax.tree.map(np.asarray, self)
        P, T = x.prompt_len, x.input_ids_BxT.shape[-1]
        p_need_B, r_need_B = row_extents(x.attention_mask_BxT, P)
        span = functools.partial(
            _span, prompt_len=P, total_len=T, multiple=multiple, trim_prompt=trim_prompt
        )
        groups = pack_by_tokens(p_need_B, r_need_B, max_tokens, span=span)
        by_shape: dict[tuple, list[TrainBatch]] = {}
        for g in groups:
            p_keep, r_keep = span(p_need_B[g], r_need_B[g])
            rows = _row_bucket(len(g), max_tokens // (p_keep + r_keep))
            mb = _trim(x.take(g), P - p_keep, P + r_keep, rows)
            by_shape.setdefault((rows, p_keep, r_keep), []).append(mb)
        return [jax.tree.map(lambda *xs: np.stack(xs), *by_shape[k]) for k in sorted(by_shape)]


def row_extents(attention_mask_BxT, prompt_len: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the columns its real tokens need left of P (prompt) and from P on (response)."""
    attn = np.asarray(attention_mask_BxT) > 0
    T = attn.shape[-1]
    cols = np.arange(T)
    first_B = np.where(attn, cols, T).min(-1)
    last_B = np.where(attn, cols, -1).max(-1)
    p_need_B = np.clip(prompt_len - first_B, 0, prompt_len)
    r_need_B = np.clip(last_B + 1 - prompt_len, 0, T - prompt_len)
    return p_need_B, r_need_B


def length_bucket(n: int, multiple: int = 16) -> int:
    """n rounded up to `multiple` x (1, 2, 3, 4, 6, 8, 12, 16, ...): at most ~1.5x padding and
    about two buckets per doubling of length, so trimmed widths take few distinct values."""
    k = max(1, -(-int(n) // multiple))
    p = 1 << (k - 1).bit_length()  # the power of two >= k
    if p >= 4 and k <= 3 * p // 4:
        p = 3 * p // 4
    return p * multiple


def _span(
    p_need, r_need, *, prompt_len: int, total_len: int, multiple: int, trim_prompt: bool
) -> tuple[int, int]:
    """The (prompt, response) columns a group of rows keeps, each on the length ladder."""
    p = prompt_len
    if trim_prompt:  # at least one prompt column: token 0 has no context to score it
        p = min(length_bucket(max(p_need, default=0), multiple), prompt_len)
    r = min(length_bucket(max(r_need, default=0), multiple), total_len - prompt_len)
    return p, r


def _row_bucket(n: int, max_rows: int) -> int:
    """n rounded up to a power of two, but never past what the budget allows (nor below n)."""
    return max(n, min(1 << (n - 1).bit_length(), max_rows))


def _trim(mb: TrainBatch, lo: int, hi: int, rows: int) -> TrainBatch:
    """Columns [lo, hi) of `mb`, rows padded to `rows` with copies of row 0 that carry no loss.

    Copies rather than empty rows: a row with no attended token is a fully masked softmax."""
    n = mb.num_rows
    pad = np.zeros(rows, np.int64)
    pad[:n] = np.arange(n)
    out = jax.tree.map(lambda x: x[pad, lo:hi], mb)
    loss_mask = out.response_mask_BxT.copy()
    loss_mask[n:] = 0
    return out.replace(response_mask_BxT=loss_mask, prompt_len=mb.prompt_len - lo)


def pack_by_tokens(p_need_B, r_need_B, max_tokens: int, *, span) -> list[np.ndarray]:
    """Row indices of each token-budget micro-batch.

    `span(p_need, r_need) -> (prompt columns, response columns)` is the trimmed width of a group
    of rows. Rows are sorted longest first and cut into consecutive groups, so each group holds
    rows of similar length and trims to little padding. A group's cost is its padded shape: rows
    (rounded up to a power of two, capped by the budget) x its width, and every group's cost is
    at most `max_tokens` — so its real tokens are too. A row whose own width exceeds `max_tokens`
    gets a micro-batch of its own rather than an error (one long outlier should not kill a run),
    so size the budget for the longest possible row: the longest prompt + max_new_tokens.
    """
    if max_tokens <= 0:
        raise ValueError(f"pack_by_tokens: max_tokens must be > 0, got {max_tokens}")
    p_need_B, r_need_B = np.asarray(p_need_B), np.asarray(r_need_B)
    width_B = np.asarray([sum(span(p_need_B[[b]], r_need_B[[b]])) for b in range(len(p_need_B))])
    order = np.lexsort((np.arange(len(width_B)), -(p_need_B + r_need_B), -width_B))
    groups, current = [], []
    for b in order:
        trial = current + [b]
        if current and len(trial) * sum(span(p_need_B[trial], r_need_B[trial])) > max_tokens:
            groups.append(np.asarray(current))
            trial = [b]
        current = trial
    groups.append(np.asarray(current))
    return [np.sort(g) for g in groups]


def stack_shapes(stacks: Sequence[TrainBatch]) -> list[tuple[int, ...]]:
    """(M, rows, width) of each micro-batch stack: the shapes an update compiles for."""
    return [tuple(s.input_ids_BxT.shape) for s in stacks]


__all__ = [
    "RolloutBatch",
    "TrainBatch",
    "bucket",
    "build_batch",
    "length_bucket",
    "pack_by_tokens",
    "row_extents",
    "stack_shapes",
]
