"""Bad requests and settings get one clear error naming the setting; overflow is counted."""

import pytest
from engine_fixtures import prompts, tiny_engine

from mimojax.engine import EngineError, SamplingError, SamplingParams, generate


def test_prompt_longer_than_max_prefill_length():
    engine, model = tiny_engine("qwen2", slots=2, prefill=16, cache=32)
    long_prompt, short = prompts(model.config.vocab_size, (20, 4))
    with pytest.raises(EngineError, match="max_prefill_length=16"):
        generate(engine, [short, long_prompt])
    stats = {}
    greedy = SamplingParams(temperature=0.0, max_new_tokens=4, ignore_eos=True)
    out = generate(
        engine, [short, long_prompt], sampling=greedy, prompt_overflow="truncate_left", stats=stats
    )
    assert stats["prompt_truncated"] == 1
    assert out[1][0].prompt_truncated == 4 and out[1][0].prompt_length == 16
    # Truncation keeps the most recent tokens.
    assert (
        out[1][0].token_ids
        == generate(engine, [long_prompt[4:]], sampling=greedy, request_ids=[1])[0][0].token_ids
    )
    with pytest.raises(EngineError, match="prompt_overflow"):
        generate(engine, [short], prompt_overflow="drop")


@pytest.mark.parametrize(
    "kwargs,field",
    [
        (dict(temperature=-1.0), "temperature"),
        (dict(top_p=0.0), "top_p"),
        (dict(top_p=1.5), "top_p"),
        (dict(top_k=-3), "top_k"),
        (dict(top_k=2.5), "top_k"),
        (dict(max_new_tokens=0), "max_new_tokens"),
        (dict(stop_sequences=[[]]), "stop_sequences"),
    ],
)
def test_invalid_sampling_params(kwargs, field):
    with pytest.raises(SamplingError, match=field):
        SamplingParams(**kwargs)


def test_engine_settings_and_requests():
    with pytest.raises(EngineError, match="max_cache_length=16 must exceed max_prefill_length=16"):
        tiny_engine("qwen2", prefill=16, cache=16)
    engine, _ = tiny_engine("qwen2", slots=2)
    with pytest.raises(EngineError, match="empty prompt"):
        generate(engine, [[]])
    with pytest.raises(EngineError, match="slot 5"):
        engine.insert(None, engine.init_decode_state(), 5)
    with pytest.raises(EngineError, match="2 SamplingParams for 1 prompts"):
        generate(engine, [[1, 2]], sampling=[SamplingParams(), SamplingParams()])


def test_more_requests_than_slots_are_queued_not_dropped():
    engine, model = tiny_engine("llama_tied", slots=2)
    ps = prompts(model.config.vocab_size, [3, 5, 7, 2, 9, 4, 6, 8, 3, 5])
    stats = {}
    out = generate(
        engine,
        ps,
        n=3,
        sampling=SamplingParams(temperature=1.0, max_new_tokens=5, ignore_eos=True),
        stats=stats,
    )
    assert [len(r) for r in out] == [3] * 10
    assert all(len(c.token_ids) == 5 for r in out for c in r)
    assert stats["finish_length"] == 30 and stats["prefills"] == 10
