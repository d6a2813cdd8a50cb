"""Pipelined decoding (step t+1 dispatched before step t's tokens are read) gives the same
completions as reading every step first: tokens, log-probs, finish reasons, versions, KV."""

import contextlib

import jax
import numpy as np
import pytest
from engine_fixtures import prompts, tiny_engine
from flax import nnx

from mimojax.engine import SamplingParams
from mimojax.engine.sampling import sample_key
from mimojax.engine.scheduler import Scheduler, between_steps

LENGTHS = (3, 14, 1, 9, 22, 5, 7)


@pytest.fixture(scope="module")
def setup():
    """One engine, its weights and others, the prompts. Decode widths 16, 32, 64: a step
    dispatched ahead must pick a width that holds the token it writes."""
    engine, model = tiny_engine("qwen2", slots=3, decode_length_buckets=(16, 32))
    base = nnx.to_pure_dict(nnx.state(model, nnx.Param))
    weights = (base, jax.tree.map(lambda x: x * 1.5, base))
    return engine, weights, prompts(model.config.vocab_size, LENGTHS)


@pytest.fixture
def engine(setup):
    """The engine at version 0 of the weights, before and after the test."""
    engine, weights, _ = setup
    engine.update_params(weights[0], version=0)
    yield engine
    engine.update_params(weights[0], version=0)


@pytest.fixture
def weights(setup):
    return setup[1]


@pytest.fixture
def ps(setup):
    return setup[2]


def _run(engine, pipeline, reqs, hook=None, abort=None):
    """reqs: dicts (id, prompt, sampling, n, kv); abort: (call, ids). -> (outputs, stats)."""
    sched = Scheduler(engine, pipeline=pipeline)
    out = [
        sched.submit(
            r["id"],
            r["prompt"],
            r["sampling"],
            r.get("n", 1),
            [sample_key(r["sampling"].seed, r["id"], j) for j in range(r.get("n", 1))],
            retain_kv=r.get("kv", False),
        )
        for r in reqs
    ]
    calls = 0
    with between_steps(hook) if hook else contextlib.nullcontext():
        while sched.busy:
            calls += 1
            if abort and calls == abort[0]:
                for rid in abort[1]:
                    sched.abort(rid)
            sched.step()
    return [r.outputs for r in out], sched.stats


def _swap_at(engine, params, call: int):
    """A step hook that loads `params` as version 1 at scheduler call `call`."""
    seen = [0]

    def hook():
        seen[0] += 1
        if seen[0] == call:
            engine.update_params(params, version=1)

    return hook


def _assert_same(a, b):
    for ra, rb in zip(a, b, strict=True):
        for x, y in zip(ra, rb, strict=True):
            fields = ("token_ids", "finish_reason", "token_versions", "policy_version")
            fields += ("policy_version_last", "prompt_length", "cached_length")
            assert {f: getattr(x, f) for f in fields} == {f: getattr(y, f) for f in fields}
            assert x.logprobs == pytest.approx(y.logprobs, abs=1e-5)
            assert (x.kv is None) == (y.kv is None)
            if x.kv is not None:
                n = x.cached_length
                assert int(x.kv.true_length) == int(y.kv.true_length) == n
                for kx, ky in zip(x.kv.k_L + x.kv.v_L, y.kv.k_L + y.kv.v_L, strict=True):
                    np.testing.assert_allclose(
                        np.asarray(kx)[:, :n], np.asarray(ky)[:, :n], 0, 1e-5
                    )


def test_mixed_requests_same_as_unpipelined(engine, ps):
    free = SamplingParams(temperature=1.0, seed=7, max_new_tokens=12, ignore_eos=True)
    probe, _ = _run(
        engine, False, [{"id": i, "prompt": p, "sampling": free} for i, p in enumerate(ps)]
    )
    reqs = []
    for i, p in enumerate(ps):
        toks = probe[i][0].token_ids
        sp = SamplingParams(
            temperature=(1.0, 0.0, 0.8)[i % 3],
            top_k=(0, 0, 5)[i % 3],
            seed=7,
            max_new_tokens=(12, 5, 9, 1, 60, 7, 12)[i],  # 60: the 22-token prompt fills the cache
            stop_token_ids=[toks[i % 4 + 1]] if i in (0, 2, 5) else [],
            stop_sequences=[toks[4:6]] if i == 6 else None,
            ignore_eos=True,
        )
        reqs.append({"id": i, "prompt": p, "sampling": sp, "n": (2, 1, 3, 1, 1, 2, 1)[i]})
        reqs[-1]["kv"] = i in (0, 1, 4, 6)
    plain, plain_stats = _run(engine, False, reqs)
    piped, stats = _run(engine, True, reqs)
    _assert_same(piped, plain)
    reasons = [c.finish_reason for r in piped for c in r]
    assert "stop" in reasons and "length" in reasons
    assert len(piped[4][0].token_ids) == 64 - 22 + 1  # ended by the cache, not max_new_tokens
    assert len(piped[3][0].token_ids) == 1  # ended by its first (prefill) token
    assert stats["decode_ahead"] > 0 and stats["slot_steps_discarded"] > 0
    assert plain_stats["decode_ahead"] == plain_stats["slot_steps_discarded"] == 0
    assert stats["slot_steps_used"] == plain_stats["slot_steps_used"]
    assert engine.compile_counts()["generate"] == 1
    assert engine.compiled_decode_widths() == (16, 32, 64)


def test_abort_mid_flight_same_as_unpipelined(engine, ps):
    long = SamplingParams(temperature=1.0, seed=3, max_new_tokens=30, ignore_eos=True)
    short = SamplingParams(temperature=0.0, max_new_tokens=6, ignore_eos=True)
    reqs = [
        {"id": 0, "prompt": ps[0], "sampling": long, "n": 2, "kv": True},
        {"id": 1, "prompt": ps[1], "sampling": short},
        {"id": 2, "prompt": ps[2], "sampling": long},  # queued when aborted
        {"id": 3, "prompt": ps[3], "sampling": short, "n": 2},
    ]
    plain, _ = _run(engine, False, reqs, abort=(4, [0, 2]))
    piped, _ = _run(engine, True, reqs, abort=(4, [0, 2]))
    _assert_same(piped, plain)
    # Inserted at call 1 (first token + a decode step), decoded at calls 2 and 3.
    assert [len(c.token_ids) for c in piped[0]] == [4, 4]
    assert piped[2][0].token_ids == [] and piped[2][0].finish_reason == "abort"
    assert all(len(c.token_ids) == 6 for c in piped[1] + piped[3])


def test_weight_swap_between_steps_same_versions(engine, weights, ps):
    sp = SamplingParams(temperature=1.0, seed=3, max_new_tokens=10, ignore_eos=True)
    reqs = [
        {"id": 0, "prompt": ps[0], "sampling": sp, "n": 2},
        {"id": 1, "prompt": ps[1], "sampling": sp},
    ]
    plain, _ = _run(engine, False, reqs, hook=_swap_at(engine, weights[1], 5))
    engine.update_params(weights[0], version=0)
    piped, _ = _run(engine, True, reqs, hook=_swap_at(engine, weights[1], 5))
    _assert_same(piped, plain)
    for c in (c for r in piped for c in r):  # tokens 0-1 at call 1, 2-4 at calls 2-4
        assert c.token_versions == [0] * 5 + [1] * 5 and c.policy_version_last == 1


def test_refilled_slots_record_the_weights_that_sampled(engine, weights, ps):
    """More samples than slots: refills land at other calls pipelined, so check each sample
    against a run of it alone with the swap at its own recorded token."""
    sp = lambda m: SamplingParams(temperature=1.0, seed=5, max_new_tokens=m, ignore_eos=True)
    lengths = (3, 8, 5, 9, 4, 7)
    reqs = [{"id": i, "prompt": ps[i], "sampling": sp(m)} for i, m in enumerate(lengths)]
    piped, _ = _run(engine, True, reqs, hook=_swap_at(engine, weights[1], 4))
    splits = set()
    for r, c in zip(reqs, (o[0] for o in piped), strict=True):
        assert c.token_versions == sorted(c.token_versions)
        a = c.token_versions.count(0)  # tokens before the swap
        splits.add(min(a, 1) + (a == len(c.token_ids)))
        assert a != 1  # the first token and the first decode step share a call
        engine.update_params(weights[a == 0], version=int(a == 0))
        hook = _swap_at(engine, weights[1], a) if 0 < a < len(c.token_ids) else None
        alone, _ = _run(engine, False, [r], hook=hook)
        _assert_same([[c]], alone)
        engine.update_params(weights[0], version=0)
    assert splits == {0, 1, 2}  # samples all before, across and all after the swap


def test_pipeline_knob(engine):
    assert Scheduler(engine).pipeline is True
    assert Scheduler(engine, pipeline=False).pipeline is False
    engine.pipeline_decode = False
    try:
        assert Scheduler(engine).pipeline is False
    finally:
        engine.pipeline_decode = True
