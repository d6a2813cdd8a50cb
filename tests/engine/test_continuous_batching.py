"""Continuous batching gives each request the tokens it would get alone, and queues overflow."""

import pytest
from engine_fixtures import prompts, tiny_engine

from mimojax.engine import SamplingParams, generate

LENGTHS = (3, 14, 1, 9, 22, 5, 7)


def _alone(engine, prompt_list, n, sampling_for):
    """Each request by itself, with its own request id (so the same sampling keys)."""
    return [
        generate(engine, [p], n=n, sampling=sampling_for(i), request_ids=[i])[0]
        for i, p in enumerate(prompt_list)
    ]


@pytest.mark.parametrize(
    "sampling",
    [
        SamplingParams(temperature=0.0, max_new_tokens=9),
        SamplingParams(temperature=1.0, seed=7, max_new_tokens=9),
        SamplingParams(temperature=0.8, top_k=5, top_p=0.9, seed=3, max_new_tokens=9),
    ],
    ids=["greedy", "sampled", "top_k_top_p"],
)
def test_batched_equals_alone(sampling):
    engine, model = tiny_engine("qwen2", slots=3)
    ps = prompts(model.config.vocab_size, LENGTHS)
    # Early stops: each request stops at a different token id, so slots free up mid-run.
    probe = generate(engine, ps, sampling=sampling)
    per_request = [
        SamplingParams(**{**sampling.__dict__, "stop_token_ids": [c[0].token_ids[i % 4 + 1]]})
        for i, c in enumerate(probe)
    ]
    batched = generate(engine, ps, n=2, sampling=per_request)
    alone = _alone(engine, ps, 2, lambda i: per_request[i])
    assert [[c.token_ids for c in r] for r in batched] == [[c.token_ids for c in r] for r in alone]
    for r_b, r_a in zip(batched, alone):
        for c_b, c_a in zip(r_b, r_a):
            assert c_b.logprobs == pytest.approx(c_a.logprobs, abs=1e-5)
    reasons = {c.finish_reason for r in batched for c in r}
    assert "stop" in reasons  # some requests really ended early
    # 7 requests x 2 samples through 3 slots: everything queued was served, none dropped.
    assert all(len(r) == 2 and all(c is not None for c in r) for r in batched)
    assert engine.compile_counts()["generate"] == 1


def test_samples_of_a_group_differ_and_reproduce():
    engine, model = tiny_engine("llama_tied", slots=4)
    ps = prompts(model.config.vocab_size, (6,))
    sampling = SamplingParams(temperature=1.0, seed=11, max_new_tokens=8, ignore_eos=True)
    a = generate(engine, ps, n=4, sampling=sampling)[0]
    b = generate(engine, ps, n=4, sampling=sampling)[0]
    assert [c.token_ids for c in a] == [c.token_ids for c in b]
    assert len({tuple(c.token_ids) for c in a}) > 1
    c = generate(engine, ps, n=4, sampling=SamplingParams(**{**sampling.__dict__, "seed": 12}))[0]
    assert [x.token_ids for x in c] != [x.token_ids for x in a]


def test_stop_sequence_and_cache_length():
    engine, model = tiny_engine("qwen3", slots=2, prefill=16, cache=24)
    ps = prompts(model.config.vocab_size, (5, 16))
    free = generate(
        engine, ps, sampling=SamplingParams(temperature=0.0, max_new_tokens=30, ignore_eos=True)
    )
    # The cache holds 24 tokens: a 16-token prompt gets 24 - 16 + 1 = 9 new tokens.
    assert len(free[1][0].token_ids) == 9 and free[1][0].finish_reason == "length"
    assert len(free[0][0].token_ids) == 20
    seq = free[0][0].token_ids[3:5]
    stopped = generate(
        engine,
        ps[:1],
        sampling=SamplingParams(
            temperature=0.0, max_new_tokens=30, ignore_eos=True, stop_sequences=[seq]
        ),
    )[0][0]
    first = next(i for i in range(1, 20) if free[0][0].token_ids[i - 1 : i + 1] == seq)
    assert stopped.token_ids == free[0][0].token_ids[: first + 1]
    assert stopped.finish_reason == "stop"


def test_eos_from_config_stops():
    engine, model = tiny_engine("qwen2", slots=2)
    ps = prompts(model.config.vocab_size, (4,))
    greedy = generate(
        engine, ps, sampling=SamplingParams(temperature=0.0, max_new_tokens=8, ignore_eos=True)
    )[0][0].token_ids
    engine.eos_token_ids = (greedy[2],)
    out = generate(engine, ps, sampling=SamplingParams(temperature=0.0, max_new_tokens=8))[0][0]
    assert out.token_ids == greedy[: greedy.index(greedy[2]) + 1]
    assert out.finish_reason == "stop"
