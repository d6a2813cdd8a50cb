"""Batched prefill equals one prompt at a time; decode over a cache-length bucket equals the
whole cache."""

import numpy as np
import pytest
from engine_fixtures import prompts, tiny_engine

from mimojax.engine import SamplingParams, generate, sample_key

LENGTHS = (3, 14, 1, 9, 5, 22)  # one call pads them all to the longest's bucket (32)
SAMPLERS = [
    SamplingParams(temperature=0.0),
    SamplingParams(temperature=1.0, seed=5),
    SamplingParams(temperature=0.7, top_k=4, top_p=0.9, seed=2),
]


def _keys(i, n, seed=0):
    return [sample_key(seed, i, j) for j in range(n)]


@pytest.mark.parametrize("name", ["qwen2", "qwen3"])  # bias; qk-norm (tied: below)
def test_prefill_batch_equals_one_at_a_time(name):
    engine, model = tiny_engine(name, slots=8)
    ps = prompts(model.config.vocab_size, LENGTHS, seed=1)
    params = engine.load_params()
    counts = [1, 2, 1, 3, 1, 1]
    samplers = [SAMPLERS[i % 3] for i in range(len(ps))]
    keys = [_keys(i, n) for i, n in enumerate(counts)]
    bp, offsets = engine.prefill_batch(params=params, prompts=ps, samplers=samplers, rng_keys=keys)
    assert offsets == [0, 1, 3, 4, 7, 8]
    for i, p in enumerate(ps):
        one, _ = engine.prefill_multisampling(
            params=params,
            padded_tokens=np.array(p),
            true_length=len(p),
            sampler=samplers[i],
            num_samples=counts[i],
            rng_keys=keys[i],
        )
        span = slice(offsets[i], offsets[i] + counts[i])
        assert np.asarray(bp.first_token_N)[span].tolist() == np.asarray(one.first_token_N).tolist()
        np.testing.assert_allclose(
            np.asarray(bp.first_logprob_N)[span], np.asarray(one.first_logprob_N), atol=1e-5
        )
        assert int(bp.lengths_B[i]) == int(one.true_length) == len(p)
        for k_b, k_one in zip(bp.k_L + bp.v_L, one.k_L + one.v_L):
            np.testing.assert_allclose(
                np.asarray(k_b)[i][:, : len(p)], np.asarray(k_one)[:, : len(p)], atol=2e-5
            )


def _run(engine, state, slots, steps, width_hint):
    params = engine.load_params()
    rows = {s: [] for s in slots}
    logps = {s: [] for s in slots}
    for _ in range(steps):
        hint = None if width_hint is None else width_hint()
        state, result = engine.generate(params, state, max_length=hint)
        result = result.convert_to_numpy()
        for s in slots:
            row = result.get_result_at_slot(s)
            rows[s].append(int(row.tokens[0, 0]))
            logps[s].append(float(row.log_prob[0, 0]))
    return rows, logps


def test_insert_batch_and_bucketed_decode_equal_insert_and_full_cache():
    engine, model = tiny_engine("qwen2", slots=4, prefill=32, cache=96, decode_length_buckets=(32,))
    assert engine.decode_width(10) == 32 and engine.decode_width(40) == 96
    ps = prompts(model.config.vocab_size, (7, 20, 12), seed=3)
    params = engine.load_params()
    samplers = [SAMPLERS[0], SAMPLERS[1], SAMPLERS[0]]
    keys = [_keys(i, 1) for i in range(3)]
    slots = [3, 0, 2]
    bp, offsets = engine.prefill_batch(params=params, prompts=ps, samplers=samplers, rng_keys=keys)
    batched = engine.insert_batch(bp, engine.init_decode_state(), slots, offsets)
    alone = engine.init_decode_state()
    for p, sp, k, slot in zip(ps, samplers, keys, slots):
        one, _ = engine.prefill_multisampling(
            params=params, padded_tokens=np.array(p), true_length=len(p), sampler=sp, rng_keys=k
        )
        alone = engine.insert(one, alone, slot)
    steps = 30  # the longest row grows from 20 to 50 tokens: widths 32, then 96
    step = {"n": 0}

    def longest():  # cached tokens of the longest live row before this step
        n = max(len(p) for p in ps) + step["n"]
        step["n"] += 1
        return n

    tokens_b, logp_b = _run(engine, batched, slots, steps, longest)
    tokens_a, logp_a = _run(engine, alone, slots, steps, None)
    assert tokens_b == tokens_a
    for s in slots:
        np.testing.assert_allclose(logp_b[s], logp_a[s], atol=1e-5)
    assert engine.compile_counts()["generate"] == 1
    assert engine.compiled_decode_widths() == (32, 96)


def test_scheduler_prefills_together_and_matches_alone():
    engine, model = tiny_engine("llama_tied", slots=6, prefill=32, cache=64)
    ps = prompts(model.config.vocab_size, (4, 19, 8, 30, 2), seed=4)
    sampling = SamplingParams(temperature=1.0, seed=9, max_new_tokens=6, ignore_eos=True)
    stats: dict = {}
    together = generate(engine, ps, n=2, sampling=sampling, stats=stats)
    # 6 slots, 2 samples each: requests 0-2 are prefilled together (one call per length
    # bucket: 16 and 32), then 3-4 once those finish.
    assert stats["prefill_batches"] == 4 and stats["prefills"] == 5
    alone = [
        generate(engine, [p], n=2, sampling=sampling, request_ids=[i])[0] for i, p in enumerate(ps)
    ]
    assert [[c.token_ids for c in r] for r in together] == [[c.token_ids for c in r] for r in alone]
