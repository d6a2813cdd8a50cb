"""The engine's log-probs equal the trainer's recomputation under the same processing."""

import jax.numpy as jnp
import numpy as np
import pytest
from engine_fixtures import prompts, tiny_engine

from mimojax.engine import SamplingParams, generate
from mimojax.models import token_logprobs


@pytest.mark.parametrize(
    "temperature,top_k,top_p",
    [(1.0, 0, 1.0), (0.7, 0, 1.0), (1.0, 20, 1.0), (0.9, 0, 0.8), (0.6, 12, 0.9), (0.0, 0, 1.0)],
)
def test_engine_logprobs_equal_token_logprobs(temperature, top_k, top_p):
    engine, model = tiny_engine("qwen3", slots=3)
    ps = prompts(model.config.vocab_size, (4, 9, 13))
    sampling = SamplingParams(
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        seed=5,
        max_new_tokens=10,
        ignore_eos=True,
    )
    out = generate(engine, ps, n=2, sampling=sampling)
    rows = [(p, c) for p, cs in zip(ps, out) for c in cs]
    t = max(len(p) + len(c.token_ids) for p, c in rows)
    ids = np.zeros((len(rows), t), np.int32)
    mask = np.zeros((len(rows), t), np.int32)
    for r, (p, c) in enumerate(rows):
        seq = p + c.token_ids
        ids[r, : len(seq)], mask[r, : len(seq)] = seq, 1
    # Greedy tokens are scored under temperature 1 (the engine's convention for temperature 0).
    logp, _ = token_logprobs(
        model,
        jnp.asarray(ids),
        jnp.asarray(mask),
        temperature=temperature or 1.0,
        top_k=top_k,
        top_p=top_p,
    )
    logp = np.asarray(logp)
    for r, (p, c) in enumerate(rows):
        expected = logp[r, len(p) : len(p) + len(c.token_ids)]
        np.testing.assert_allclose(np.array(c.logprobs), expected, atol=1e-4)
        assert np.isfinite(expected).all()  # every sampled token survived the filters
