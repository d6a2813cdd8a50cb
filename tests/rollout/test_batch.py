"""Typed batches: build_batch's padding layout, row and token-budget micro-batching."""

import numpy as np
import pytest

from mimojax.rollout.batch import (
    RolloutBatch,
    TrainBatch,
    build_batch,
    length_bucket,
    pack_by_tokens,
    row_extents,
    stack_shapes,
)
from mimojax.rollout.trajectory import Trajectory


def _traj(prompt, response, group=0, mask=None):
    return Trajectory(
        prompt_ids=list(prompt),
        response_ids=list(response),
        rollout_logprobs=[-0.5 - 0.1 * i for i in range(len(response))],
        response_mask=list(mask if mask is not None else [1] * len(response)),
        policy_version=0,
        finish_reason="stop",
        group=group,
        sample=0,
        example={},
    )


def test_build_batch_layout():
    trajs = [
        _traj([5, 6, 7], [8, 9], group=0),
        _traj([4] * 20, [3, 3, 3, 3], group=0, mask=[1, 0, 0, 1]),  # a tool span inside
        _traj([1, 2], [], group=1),  # no response at all
        _traj([1, 2], [7, 7, 7], group=1),  # infra-failed: no loss tokens, no reward
    ]
    b = build_batch(trajs, [1.0, 0.5, 0.0, 1.0], [True, True, True, False], pad_id=0)
    assert isinstance(b, RolloutBatch)
    P = b.prompt_len
    assert P == 32 and b.input_ids_BxT.shape == (4, 48)  # prompt 20 -> 32, response 4 -> 16
    assert b.input_ids_BxT.dtype == np.int32 and b.rollout_logp_BxT.dtype == np.float32
    np.testing.assert_array_equal(b.input_ids_BxT[0, P - 3 : P + 2], [5, 6, 7, 8, 9])
    assert not b.input_ids_BxT[0, : P - 3].any() and not b.input_ids_BxT[0, P + 2 :].any()
    np.testing.assert_array_equal(b.attention_mask_BxT.sum(-1), [5, 24, 2, 5])
    np.testing.assert_array_equal(b.response_mask_BxT[1, P : P + 4], [1, 0, 0, 1])
    np.testing.assert_array_equal(b.response_mask_BxT.sum(-1), [2, 2, 0, 0])
    np.testing.assert_allclose(b.rollout_logp_BxT[0, P : P + 2], [-0.5, -0.6])
    assert b.token_rewards_BxT[0, P + 1] == 1.0 and b.token_rewards_BxT[1, P + 3] == 0.5
    assert b.token_rewards_BxT.sum() == 1.5  # none for the empty or the failed sample
    np.testing.assert_array_equal(b.valid_B, [True, True, True, False])
    np.testing.assert_array_equal(b.group_ids_B, [0, 0, 1, 1])
    np.testing.assert_array_equal(b.response_len_B, [2, 4, 0, 3])
    np.testing.assert_array_equal(b.prompt_len_B, [3, 20, 2, 2])
    # rows keep the static prompt_len
    sub = b.take(np.array([3, 0]))
    assert sub.prompt_len == P and sub.scores_B.tolist() == [1.0, 1.0]


def test_build_batch_fixed_response_len():
    b = build_batch([_traj([1], [2, 3])], [1.0], [True], pad_id=9, response_len=20)
    assert b.prompt_len == 16 and b.input_ids_BxT.shape == (1, 16 + 24)  # R rounds up to 8
    with pytest.raises(ValueError, match="response_len"):
        build_batch([_traj([1], [2] * 30)], [1.0], [True], pad_id=9, response_len=20)


def _train_batch(seed=0, B=12, P=32, R=48):
    """Random prompt / response lengths in the build_batch layout; row b's ids all equal b."""
    rng = np.random.default_rng(seed)
    p_B = rng.integers(1, P + 1, B)
    r_B = rng.integers(0, R + 1, B)
    T = P + R
    ids = np.zeros((B, T), np.int32)
    attn = np.zeros((B, T), np.int32)
    for b in range(B):
        attn[b, P - p_B[b] : P + r_B[b]] = 1
        ids[b, P - p_B[b] : P + r_B[b]] = b + 1
    resp = attn.copy()
    resp[:, :P] = 0
    f = lambda: rng.normal(size=(B, T)).astype(np.float32) * resp  # noqa: E731
    tb = TrainBatch(ids, attn, resp, f(), adv_BxT=f(), old_logp_BxT=f(), prompt_len=P)
    return tb, p_B, r_B


def test_split_rows():
    tb, _, _ = _train_batch()
    s = tb.split_rows(4)
    assert s.input_ids_BxT.shape == (3, 4, 80) and s.prompt_len == 32
    assert s.ref_logp_BxT is None  # an unused field stays an empty subtree
    np.testing.assert_array_equal(s.adv_BxT.reshape(12, -1), tb.adv_BxT)
    with pytest.raises(ValueError, match="micro-batches of 5"):
        tb.split_rows(5)


def test_without_masked_rows_keeps_loss_rows_in_order_padded_to_the_multiple():
    tb, _, _ = _train_batch()
    mask = np.array(tb.response_mask_BxT)
    mask[[0, 3, 4, 5, 7, 8, 9]] = 0  # 4 rows keep loss tokens: 1, 2, 6, 10 (11 has none)
    tag_BxT = np.repeat(np.arange(12.0)[:, None], tb.adv_BxT.shape[1], 1)  # row b holds b
    tb = tb.replace(response_mask_BxT=mask, adv_BxT=tag_BxT)
    rows = lambda b: b.adv_BxT[:, 0].astype(int).tolist()  # noqa: E731
    assert rows(tb.without_masked_rows()) == [1, 2, 6, 10]
    # padded to 6 with the first loss-free rows (0, 3), row order kept
    assert rows(tb.without_masked_rows(3)) == [0, 1, 2, 3, 6, 10]
    assert rows(tb.without_masked_rows(4)) == [1, 2, 6, 10]
    full = tb.replace(response_mask_BxT=np.ones_like(mask))
    assert full.without_masked_rows(4) is full  # nothing to skip: the batch itself


def test_row_extents():
    tb, p_B, r_B = _train_batch()
    p, r = row_extents(tb.attention_mask_BxT, tb.prompt_len)
    np.testing.assert_array_equal(p, p_B)
    np.testing.assert_array_equal(r, r_B)


def test_length_bucket():
    got = sorted({length_bucket(n, 8) for n in range(0, 200)})
    assert got == [8, 16, 24, 32, 48, 64, 96, 128, 192, 256]


@pytest.mark.parametrize("trim_prompt", [False, True])
@pytest.mark.parametrize("max_tokens", [64, 160, 400, 10_000])
@pytest.mark.parametrize("seed", [0, 1])
def test_split_tokens_invariants(max_tokens, seed, trim_prompt):
    tb, p_B, r_B = _train_batch(seed, B=16)
    P, T = tb.prompt_len, tb.input_ids_BxT.shape[1]
    stacks = tb.split_tokens(max_tokens, multiple=8, trim_prompt=trim_prompt)
    ladder = {length_bucket(n, 8) for n in range(T)}
    seen = []
    for s in stacks:
        M, rows, width = s.input_ids_BxT.shape
        P2 = s.prompt_len
        # columns bucketed on both sides of P
        assert P2 == P if not trim_prompt else (P2 in ladder and P2 <= P)
        assert width - P2 in ladder | {T - P} and width - P2 <= T - P
        assert rows * width <= max_tokens or rows == 1  # budget, or one row too long for it
        assert rows & (rows - 1) == 0 or (rows + 1) * width > max_tokens  # 2^k, or capped
        for m in range(M):
            ids, attn, loss = s.input_ids_BxT[m], s.attention_mask_BxT[m], s.response_mask_BxT[m]
            for i in range(rows):
                if i > 0 and ids[i].max() == ids[0].max():  # a padding row: copy of row 0
                    assert not loss[i].any()
                    continue
                b = int(ids[i].max()) - 1
                seen.append(b)
                # nothing real was trimmed away, and the columns around P still line up
                assert attn[i].sum() == p_B[b] + r_B[b]
                np.testing.assert_array_equal(attn[i, P2 - p_B[b] : P2 + r_B[b]], 1)
                np.testing.assert_array_equal(
                    loss[i, P2:], tb.response_mask_BxT[b, P : P + width - P2]
                )
                np.testing.assert_array_equal(
                    s.adv_BxT[m, i, P2 : P2 + r_B[b]], tb.adv_BxT[b, P : P + r_B[b]]
                )
    assert sorted(seen) == list(range(16))  # every row exactly once
    keys = [(*shape, s.prompt_len) for shape, s in zip(stack_shapes(stacks), stacks, strict=True)]
    assert len(set(keys)) == len(keys)  # one stack per compiled shape


def test_split_tokens_long_row_alone():
    tb, p_B, r_B = _train_batch(3, B=8)
    stacks = tb.split_tokens(16, multiple=16)  # below any row's padded width
    assert sum(s.input_ids_BxT.shape[0] for s in stacks) == 8
    assert all(s.input_ids_BxT.shape[1] == 1 for s in stacks)


def test_pack_by_tokens_groups_similar_lengths():
    p = np.array([4, 4, 4, 4, 4, 4])
    r = np.array([60, 2, 58, 3, 61, 1])
    span = lambda p_, r_: (8, length_bucket(max(r_), 8))  # noqa: E731
    groups = pack_by_tokens(p, r, 200, span=span)
    assert sorted(np.concatenate(groups).tolist()) == list(range(6))
    long_group = next(g for g in groups if 4 in g)
    assert set(long_group.tolist()) <= {0, 2, 4}  # long rows are not padded-to by short ones
    with pytest.raises(ValueError, match="max_tokens"):
        pack_by_tokens(p, r, 0, span=span)
