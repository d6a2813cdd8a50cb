"""Many coroutines share one engine through the async client; abort stops a request."""

import asyncio

import pytest
from engine_fixtures import prompts, tiny_engine

from mimojax.engine import AsyncEngineClient, SamplingParams, generate

SAMPLED = SamplingParams(temperature=1.0, seed=4, max_new_tokens=6, ignore_eos=True)


def test_concurrent_requests_equal_offline_driver():
    engine, model = tiny_engine("qwen2", slots=3)
    ps = prompts(model.config.vocab_size, (4, 10, 2, 7, 5))

    async def agent(client, i):
        # An agent loop: two turns, the second prompt extends the first with its output.
        first = await client.generate(i, ps[i], SAMPLED)
        second = await client.generate(100 + i, ps[i] + first.token_ids + [1], SAMPLED)
        return first, second

    async def main():
        client = AsyncEngineClient(engine)
        results = await asyncio.gather(*(agent(client, i) for i in range(len(ps))))
        await client.aclose()
        return results

    results = asyncio.run(main())
    offline_first = generate(engine, ps, sampling=SAMPLED)
    for i, (first, second) in enumerate(results):
        assert first.token_ids == offline_first[i][0].token_ids
        expected = generate(
            engine, [ps[i] + first.token_ids + [1]], sampling=SAMPLED, request_ids=[100 + i]
        )[0][0]
        assert second.token_ids == expected.token_ids
        assert second.logprobs == pytest.approx(expected.logprobs, abs=1e-5)


def test_abort_and_cancel_in_flight_requests():
    engine, model = tiny_engine("llama_tied", slots=2, cache=512, prefill=16)
    ps = prompts(model.config.vocab_size, (4, 6, 8))
    long = SamplingParams(temperature=0.0, max_new_tokens=400, ignore_eos=True)

    async def main():
        client = AsyncEngineClient(engine)
        t_abort = asyncio.create_task(client.generate("a", ps[0], long))
        t_cancel = asyncio.create_task(client.generate("b", ps[1], long))
        t_short = asyncio.create_task(client.generate("c", ps[2], SAMPLED, n=2))
        while client.scheduler.stats["decode_steps"] < 3:
            await asyncio.sleep(0.01)
        client.abort("a")
        t_cancel.cancel()
        aborted = await t_abort
        with pytest.raises(asyncio.CancelledError):
            await t_cancel
        short = await t_short
        await client.aclose()
        return aborted, short, dict(client.scheduler.stats)

    aborted, short, stats = asyncio.run(main())
    assert aborted.finish_reason == "abort" and 0 < len(aborted.token_ids) < 400
    assert [len(c.token_ids) for c in short] == [6, 6]
    assert stats["finish_abort"] == 2
