"""The Engine API used by hand: chunked prefill through existing_prefix, bulk_insert."""

import numpy as np
from engine_fixtures import prompts, tiny_engine

from mimojax.engine import SamplingParams, generate, sample_key

GREEDY = SamplingParams(temperature=0.0, max_new_tokens=6, ignore_eos=True)


def _decode(engine, prefix, steps, slots=(0,)):
    params = engine.load_params()
    state = engine.bulk_insert(prefix, engine.init_decode_state(), list(slots))
    rows = [[int(t)] for t in np.asarray(prefix.first_token_N)[: len(slots)]]
    for _ in range(steps):
        state, result = engine.generate(params, state)
        result = result.convert_to_numpy()
        for row, slot in zip(rows, slots):
            row.append(int(result.get_result_at_slot(slot).tokens[0, 0]))
    return rows


def test_prefill_on_an_existing_prefix_equals_one_prefill():
    engine, model = tiny_engine("qwen3", slots=2, prefill=16, cache=48)
    head, tail = prompts(model.config.vocab_size, (7, 5))
    params = engine.load_params()
    first, _ = engine.prefill(params=params, padded_tokens=np.array(head), true_length=len(head))
    both, _ = engine.prefill(
        params=params, existing_prefix=first, padded_tokens=np.array(tail), true_length=len(tail)
    )
    assert int(both.true_length) == len(head) + len(tail)
    expected = generate(engine, [head + tail], sampling=GREEDY)[0][0].token_ids
    assert _decode(engine, both, 5)[0] == expected


def test_bulk_insert_feeds_a_group_from_one_prefill():
    engine, model = tiny_engine("llama_tied", slots=3)
    (prompt,) = prompts(model.config.vocab_size, (9,))
    sampling = SamplingParams(temperature=1.0, seed=3, max_new_tokens=5, ignore_eos=True)
    keys = [sample_key(sampling.seed, 0, j) for j in range(3)]  # the driver's keys
    prefix, first = engine.prefill_multisampling(
        params=engine.load_params(),
        padded_tokens=np.array(prompt),
        true_length=len(prompt),
        sampler=sampling,
        num_samples=3,
        rng_keys=keys,
    )
    assert np.asarray(first.data).shape == (3, 3)
    by_hand = _decode(engine, prefix, 4, slots=(2, 0, 1))
    driver = generate(engine, [prompt], n=3, sampling=sampling)[0]
    assert by_hand == [c.token_ids for c in driver]
