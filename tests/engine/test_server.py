"""`mimojax serve` through the official `openai` client on loopback: greedy chat (streamed and
not) equals `mimojax generate`, 32 concurrent clients, stop strings, n, and OpenAI-shaped 4xx
errors (bad fields, unknown model, over-context)."""

import asyncio
import json
import urllib.error
import urllib.request

import openai
import pytest

from mimojax.cli import main as cli
from tests.live_server import live_server

MODEL = "tiny-random-llama"
ARGS = ("--max-context", "192", "--max-prompt", "96", "--slots", "8")
PROMPTS = ["What is the capital of France?", "Write one word."]


@pytest.fixture(scope="module")
def url():
    with live_server(MODEL, *ARGS) as u:
        yield u


@pytest.fixture(scope="module")
def client(url):
    return openai.OpenAI(base_url=url, api_key="none", max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def reference():
    """Greedy token ids and log-probs of PROMPTS from the offline driver `mimojax generate` uses."""
    from mimojax.engine import JaxEngine, SamplingParams, generate
    from mimojax.models import load_model

    model, tok = load_model(MODEL)
    ids = [cli.encode_prompt(tok, p) for p in PROMPTS]
    engine = JaxEngine(model, tok, max_prefill_length=64, max_cache_length=96)
    out = generate(engine, ids, sampling=SamplingParams(temperature=0.0, max_new_tokens=12))
    eos = set(engine.eos_token_ids)
    refs = []
    for [c] in out:
        toks, lps = list(c.token_ids), list(c.logprobs)
        if c.finish_reason == "stop" and toks[-1] in eos:
            toks, lps = toks[:-1], lps[:-1]
        refs.append((toks, lps, tok.decode(toks, skip_special_tokens=True)))
    return refs


def _ids(entries):
    return [int(e.token.removeprefix("token_id:")) for e in entries]


def test_greedy_chat_matches_mimojax_generate(client, reference, capsys):
    for prompt, (ref_ids, ref_lps, ref_text) in zip(PROMPTS, reference):
        kw = dict(
            model=MODEL,
            messages=[{"role": "user", "content": prompt}],
            temperature=0,
            max_tokens=12,
            logprobs=True,
            extra_body={"return_tokens_as_token_ids": True},
        )
        r = client.chat.completions.create(**kw)
        choice = r.choices[0]
        assert _ids(choice.logprobs.content) == ref_ids
        assert [e.logprob for e in choice.logprobs.content] == pytest.approx(ref_lps, abs=1e-4)
        assert choice.message.content == ref_text
        assert r.usage.completion_tokens >= len(ref_ids)

        stream = client.chat.completions.create(**kw, stream=True)
        text, ids, finish = "", [], None
        for chunk in stream:
            for c in chunk.choices:
                text += c.delta.content or ""
                ids += _ids(c.logprobs.content) if c.logprobs else []
                finish = c.finish_reason or finish
        assert ids == ref_ids and text == ref_text and finish in ("stop", "length")

    # ... and the command line prints the same text
    assert (
        cli.main(["generate", "--model", MODEL, "--max-new-tokens", "12", "--prompt", PROMPTS[0]])
        == 0
    )
    assert capsys.readouterr().out == reference[0][2] + "\n"


def test_32_concurrent_clients_and_seeded_samples_reproduce(url, client):
    aclient = openai.AsyncOpenAI(base_url=url, api_key="none", max_retries=0, timeout=300)

    async def one(i):
        kw = dict(model=MODEL, messages=[{"role": "user", "content": f"Count to {i}."}],
                  temperature=1.0, seed=i, max_tokens=8 + i % 5)  # fmt: skip
        if i % 2:
            text = ""
            async for chunk in await aclient.chat.completions.create(**kw, stream=True):
                text += "".join(c.delta.content or "" for c in chunk.choices)
            return text
        r = await aclient.chat.completions.create(**kw)
        return r.choices[0].message.content

    async def main():
        try:
            return await asyncio.gather(*(one(i) for i in range(32)))
        finally:
            await aclient.close()

    texts = asyncio.run(main())
    assert len(texts) == 32 and all(isinstance(t, str) for t in texts)
    assert len(set(texts)) > 1
    for i in (0, 7, 30):  # a seeded request alone samples what it sampled in the crowd
        msgs = [{"role": "user", "content": f"Count to {i}."}]
        r = client.chat.completions.create(
            model=MODEL, temperature=1.0, seed=i, max_tokens=8 + i % 5, messages=msgs
        )
        assert r.choices[0].message.content == texts[i]


def test_stop_strings_cut_the_text_streamed_or_not(client):
    base = client.completions.create(model=MODEL, prompt="Once upon a time", max_tokens=16,
                                     temperature=1.0, seed=3)  # fmt: skip
    full = base.choices[0].text
    stop = full[len(full) // 2 : len(full) // 2 + 3]
    assert stop and len(full) > 6
    expected = full[: full.find(stop)]
    kw = dict(model=MODEL, prompt="Once upon a time", max_tokens=16, temperature=1.0, seed=3,
              stop=[stop], logprobs=0)  # fmt: skip
    r = client.completions.create(**kw)
    assert r.choices[0].text == expected and r.choices[0].finish_reason == "stop"
    # log-probs cover the tokens wholly before the stop string (it may start mid-token)
    joined = "".join(r.choices[0].logprobs.tokens)
    assert joined and expected.startswith(joined) and len(expected) - len(joined) < 16
    text = "".join(c.choices[0].text for c in client.completions.create(**kw, stream=True))
    assert text == expected


def test_n_samples_and_completion_logprobs(client):
    r = client.completions.create(model=MODEL, prompt=["a b c", "x y"], n=3, max_tokens=5,
                                  temperature=1.0, seed=1, logprobs=0)  # fmt: skip
    assert [c.index for c in r.choices] == list(range(6))
    for c in r.choices:
        assert len(c.logprobs.tokens) == 5 and all(lp <= 0 for lp in c.logprobs.token_logprobs)
    assert r.usage.completion_tokens == 30
    assert len({c.text for c in r.choices}) > 1
    models = client.models.list()
    assert [m.id for m in models.data] == [MODEL]


def _post(url, path, body):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(
        url + path, data=data, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_bad_requests_get_openai_shaped_4xx(url, client):
    msgs = [{"role": "user", "content": "hi"}]
    cases = [
        (dict(messages=msgs, temperature=5), "temperature"),
        (dict(messages=msgs, n=0), "n"),
        (dict(messages=msgs, max_tokens=0), "max_tokens"),
        (dict(messages=[]), "messages"),
        (dict(messages=[{"role": "wizard", "content": "x"}]), "messages[0].role"),
        (dict(messages=msgs, stop=["a", "b", "c", "d", "e"]), "stop"),
        (dict(messages=msgs, logprobs=True, top_logprobs=3), "top_logprobs"),
    ]
    for kw, param in cases:
        with pytest.raises(openai.BadRequestError) as e:
            client.chat.completions.create(model=MODEL, **kw)
        assert e.value.status_code == 400
        assert e.value.body["param"] == param and e.value.body["type"] == "invalid_request_error"
    with pytest.raises(openai.NotFoundError) as e:
        client.chat.completions.create(model="gpt-4o", messages=msgs)
    assert e.value.body["code"] == "model_not_found"
    # over the context: a long prompt, or a prompt plus max_tokens past 192, is refused
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "word " * 200}]
        )
    assert e.value.body["code"] == "context_length_exceeded"
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model=MODEL, prompt="hello", max_tokens=192)
    assert e.value.body["code"] == "context_length_exceeded"
    assert "192" in e.value.body["message"]
    status, body = _post(url, "/chat/completions", b"{not json")
    assert status == 400 and body["error"]["type"] == "invalid_request_error"
    status, body = _post(url, "/chat/completions", {"messages": msgs})
    assert status == 400 and body["error"]["param"] == "model"
    status, body = _post(url, "/embeddings", {"model": MODEL})
    assert status == 404 and "error" in body
    # the server still answers after all that
    ok = client.chat.completions.create(model=MODEL, messages=msgs, max_tokens=2)
    assert ok.choices[0].finish_reason in ("stop", "length")


@pytest.mark.smollm2
def test_smollm2_greedy_chat_matches_mimojax_generate(capsys):
    prompt = "What is 2 + 2?"
    assert cli.main(["generate", "--max-new-tokens", "10", "--prompt", prompt]) == 0
    expected = capsys.readouterr().out[:-1]
    with live_server("smollm2-135m-instruct", "--max-context", "128", "--max-prompt", "64") as u:
        c = openai.OpenAI(base_url=u, api_key="none", max_retries=0, timeout=120)
        r = c.chat.completions.create(model="smollm2-135m-instruct", temperature=0, max_tokens=10,
                                      messages=[{"role": "user", "content": prompt}])  # fmt: skip
    assert r.choices[0].message.content == expected
