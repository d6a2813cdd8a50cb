"""Partial rollouts on a real tiny engine: weights swapped between two decode steps reach the
samples in flight (no restart), every token records the version that sampled it, the tokens
before the swap are the ones a run without it samples, and the batch carries the versions.
Seconds on CPU."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from flax import nnx

from mimojax.engine import JaxEngine
from mimojax.engine.offline import generate
from mimojax.engine.sampling import SamplingParams
from mimojax.engine.scheduler import between_steps
from mimojax.models.loader import load_model
from mimojax.rollout.async_metrics import partial_metrics
from mimojax.rollout.batch import build_batch
from mimojax.rollout.single_turn import rollout_single_turn

SAMPLED = SamplingParams(temperature=1.0, seed=3, max_new_tokens=10, ignore_eos=True)


@pytest.fixture(scope="module")
def engines():
    """(engine, tokenizer, its weights, other weights: the same ones scaled)."""
    model, tok = load_model("tiny-random-qwen2")
    engine = JaxEngine(
        model, tok, max_concurrent_decodes=4, max_prefill_length=64, max_cache_length=128
    )
    base = nnx.to_pure_dict(nnx.state(model, nnx.Param))
    return engine, tok, base, jax.tree.map(lambda x: x * 1.5, base)


def _swap_after(engine, params, steps: int, version: int):
    """A step hook that loads `params` as `version` before scheduler step `steps`."""
    seen = [0]

    def hook():
        seen[0] += 1
        if seen[0] == steps + 1:
            engine.update_params(params, version=version)

    return hook


def test_in_flight_samples_continue_under_new_weights(engines):
    engine, _, base, other = engines
    engine.update_params(base, version=0)
    prompts = [[5, 6, 7, 8], [9, 10, 11]]
    plain = generate(engine, prompts, 2, SAMPLED, request_ids=[0, 1])
    with between_steps(_swap_after(engine, other, steps=4, version=1)):
        mixed = generate(engine, prompts, 2, SAMPLED, request_ids=[0, 1])
    engine.update_params(base, version=0)
    for plain_r, mixed_r in zip(plain, mixed, strict=True):
        for p, m in zip(plain_r, mixed_r, strict=True):
            assert len(m.token_versions) == len(m.token_ids) == 10  # not restarted
            # step 1 prefills (token 0) and decodes token 1; steps 2-4 tokens 2-4 under v0
            assert m.token_versions == [0] * 5 + [1] * 5
            assert m.token_ids[:5] == p.token_ids[:5]  # same keys, same weights so far
            assert m.logprobs[:5] == pytest.approx(p.logprobs[:5], abs=1e-5)
            assert m.policy_version == 0 and m.policy_version_last == 1
    # the new weights sample the rest: other tokens or at least other log-probs
    after = [(p.token_ids[5:], p.logprobs[5:], m.token_ids[5:], m.logprobs[5:])
             for r, q in zip(plain, mixed) for p, m in zip(r, q)]  # fmt: skip
    assert any(a != c or not np.allclose(b, d, atol=1e-4) for a, b, c, d in after)


def test_trajectories_and_batch_carry_token_versions(engines):
    engine, tok, base, other = engines
    engine.update_params(base, version=2)
    examples = [{"prompt_ids": [5, 6, 7, 8]}, {"prompt_ids": [9, 10, 11]}]
    with between_steps(_swap_after(engine, other, steps=6, version=3)):
        trajs = rollout_single_turn(engine, tok, examples, 2, SAMPLED, request_id_base=0)
    engine.update_params(base, version=2)
    for t in trajs:
        assert t.token_versions == [2] * 7 + [3] * 3
        assert t.policy_version == 2  # the oldest token's
    rb = build_batch(trajs, [0.0] * 4, [True] * 4, pad_id=0, response_len=10)
    P = rb.prompt_len
    np.testing.assert_array_equal(rb.versions_BxT[:, :P], -1)
    np.testing.assert_array_equal(rb.versions_BxT[:, P : P + 10], [[2] * 7 + [3] * 3] * 4)
    m = partial_metrics(trajs, trainer_version=4)
    assert m["async/partial/versions_per_traj"] == 2.0
    assert m["async/partial/multi_version_share"] == 1.0
    assert m["async/partial/token_staleness/mean"] == pytest.approx((7 * 2 + 3 * 1) / 10)
    assert m["async/partial/token_staleness/max"] == 2.0
