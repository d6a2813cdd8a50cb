"""JetStream 0.2.2's own orchestrator, driving our engine, returns what our offline driver does."""

import sys

import jax
import numpy as np
import pytest
from flax import nnx

pytest.importorskip(
    "jetstream",
    reason="JetStream not installed: pip install 'mimojax[jetstream]' && "
    "pip install --no-deps google-jetstream==0.2.2",
)

from mimojax.engine import JaxEngine, SamplingParams, generate  # noqa: E402
from mimojax.engine import jetstream_adapter as ja  # noqa: E402
from mimojax.models import load_model  # noqa: E402
from mimojax.models.tokenizer import stop_token_ids  # noqa: E402

GREEDY = dict(temperature=0.0)


def _offline(engine, prompt_ids, max_tokens):
    """Our offline driver's ids, cut where JetStream stops: it drops the stop token itself."""
    sampling = SamplingParams(max_new_tokens=max_tokens, **GREEDY)
    stops = set(stop_token_ids(engine.tokenizer))
    out = []
    for (completion,) in generate(engine, prompt_ids, sampling=sampling):
        ids = completion.token_ids
        out.append(ids[:-1] if ids and ids[-1] in stops else ids)
    return out


def _roughen(model, std=0.3, seed=1):
    # A fresh tiny model repeats one token, which would hide an off-by-one in the first-token
    # hand-off; noise on every weight makes its greedy output vary from step to step.
    params = nnx.state(model, nnx.Param)
    leaves, treedef = jax.tree.flatten(params)
    keys = jax.random.split(jax.random.PRNGKey(seed), len(leaves))
    noisy = [x + std * jax.random.normal(k, x.shape, x.dtype) for k, x in zip(keys, leaves)]
    nnx.update(model, jax.tree.unflatten(treedef, noisy))
    return model


@pytest.fixture(scope="module")
def tiny():
    model, tok = load_model("tiny-random-llama")
    engine = JaxEngine(
        _roughen(model), tok, max_concurrent_decodes=3, max_prefill_length=64, max_cache_length=96
    )
    driver = ja.build_driver(engine, SamplingParams(**GREEDY))
    yield engine, driver
    driver.stop()


def test_token_prompts_match_offline_driver(tiny):
    engine, driver = tiny
    rng = np.random.default_rng(0)
    # Lengths straddle JetStream's 16/32 prefill buckets, 1 token included; five requests on
    # three slots, so JetStream must recycle slots mid-run.
    prompts = [rng.integers(3, 49152, n).tolist() for n in (1, 5, 16, 17, 32)]
    expected = _offline(engine, prompts, 12)
    got = ja.decode(driver, prompts, max_tokens=12)
    assert [g.token_ids for g in got] == expected
    assert all(len(set(ids)) > 3 for ids in expected), "degenerate output proves nothing"


def test_text_prompts_match_offline_driver(tiny):
    engine, driver = tiny
    tok = engine.tokenizer
    texts = ["Hello world, this is a test", "Why?"]
    expected = _offline(engine, [tok.encode(t) for t in texts], 10)
    got = ja.decode(driver, texts, max_tokens=10)
    assert [g.token_ids for g in got] == expected
    # Server-side detokenization is per token: random ids may split UTF-8 characters.
    assert [g.text for g in got] == ["".join(tok.decode([t]) for t in ids) for ids in expected]


def test_too_long_prompt_is_refused_before_jetstream(tiny):
    _, driver = tiny
    with pytest.raises(ValueError, match="max_prefill_length"):
        ja.decode(driver, [[5] * 65], max_tokens=2)  # 64 is the limit


def test_missing_jetstream_names_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "jetstream.core", None)
    monkeypatch.delitem(sys.modules, "mimojax.engine.jetstream_adapter")
    with pytest.raises(ImportError, match="--no-deps google-jetstream==0.2.2"):
        import mimojax.engine.jetstream_adapter  # noqa: F401


@pytest.mark.smollm2
def test_smollm2_text_matches_offline_driver():
    model, tok = load_model("smollm2-135m-instruct", dtype="float32")
    engine = JaxEngine(
        model, tok, max_concurrent_decodes=2, max_prefill_length=64, max_cache_length=96
    )
    # Short prompts (one 16-token prefill bucket: one compile); one as ids, two as text.
    ids = tok.encode("Q: What is the capital of Germany?\nA:")
    texts = ["The capital of France is", "Water boils at"]
    expected = _offline(engine, [ids, *(tok.encode(t) for t in texts)], 12)
    driver = ja.build_driver(engine, SamplingParams(**GREEDY))
    try:
        got = ja.decode(driver, [ids, *texts], max_tokens=12)
    finally:
        driver.stop()
    assert [g.token_ids for g in got] == expected
    assert [g.text for g in got[1:]] == [tok.decode(e) for e in expected[1:]]
    assert "Paris" in got[1].text
