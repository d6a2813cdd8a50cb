"""A later turn continues an earlier turn's KV (existing_prefix): same tokens as re-prefilling."""

import asyncio

import pytest
from engine_fixtures import prompts, tiny_engine

from mimojax.engine import AsyncEngineClient, EngineError, SamplingParams
from mimojax.engine.sampling import sample_key

GREEDY = SamplingParams(temperature=0.0, max_new_tokens=5, ignore_eos=True)
SAMPLED = SamplingParams(temperature=1.0, seed=3, max_new_tokens=5, ignore_eos=True)


def _three_turns(engine, ps, sampling, reuse: bool):
    """Three turns per prompt; turn t appends 3 observation tokens; (tokens, prefill tokens)."""

    async def agent(client, i):
        history, kv, cached, out = list(ps[i]), None, 0, []
        for turn in range(3):
            new = history[cached:] if kv is not None else history
            key = sample_key(sampling.seed, i, 0, turn)
            c = await client.generate(
                (i, turn), new, sampling, keys=[key], existing_prefix=kv, retain_kv=reuse
            )
            out.append(c.token_ids)
            history += c.token_ids + [7, 8, 9]
            kv, cached = c.kv, c.cached_length
            assert (kv is None) == (not reuse)
            if reuse:
                assert cached == len(history) - 4  # all but the last sampled token and the obs
        return out

    async def main():
        client = AsyncEngineClient(engine)
        res = await asyncio.gather(*(agent(client, i) for i in range(len(ps))))
        await client.aclose()
        return res, client.scheduler.stats["prompt_tokens"]

    return asyncio.run(main())


@pytest.mark.parametrize("sampling", [GREEDY, SAMPLED], ids=["greedy", "sampled"])
def test_continuing_kv_equals_reprefilling_history(sampling):
    engine, model = tiny_engine("qwen2", slots=2, prefill=32, cache=128)
    ps = prompts(model.config.vocab_size, (5, 11, 3))
    reused, reused_prefill = _three_turns(engine, ps, sampling, reuse=True)
    full, full_prefill = _three_turns(engine, ps, sampling, reuse=False)
    assert reused == full
    # Turn 1 prefills the prompt; later turns only the last sampled token + 3 observation ids.
    assert reused_prefill == sum(ps_len + 2 * 4 for ps_len in map(len, ps))
    assert full_prefill > reused_prefill


def test_continuation_that_does_not_fit_is_refused():
    engine, model = tiny_engine("qwen2", slots=1, prefill=16, cache=40)
    ps = prompts(model.config.vocab_size, (12,))
    long = SamplingParams(temperature=0.0, max_new_tokens=20, ignore_eos=True)

    async def main():
        client = AsyncEngineClient(engine)
        c = await client.generate("a", ps[0], long, retain_kv=True)
        assert c.cached_length == 12 + 19
        with pytest.raises(EngineError, match="do not fit behind 31 cached"):
            await client.generate("b", [1] * 10, long, existing_prefix=c.kv)
        await client.aclose()

    asyncio.run(main())
    assert engine.fits_continuation(10, 4) and not engine.fits_continuation(31, 10)
