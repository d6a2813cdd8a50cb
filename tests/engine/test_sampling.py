"""Temperature / top-k / top-p against a float64 numpy reference, and the sampler's law."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mimojax.engine.sampling import sample_tokens
from mimojax.models.logit_filters import process_logits


def _reference(logits, temperature, top_k, top_p):
    """Sort, keep top-k, then the smallest prefix of mass >= top_p (HF / vLLM order)."""
    x = logits.astype(np.float64) / (temperature if temperature > 0 else 1.0)
    order = np.argsort(-x, kind="stable")
    keep = np.zeros(x.shape, bool)
    k = top_k if top_k > 0 else x.size
    kept = order[:k]
    p = np.exp(x[kept] - x[kept].max())
    p /= p.sum()
    mass = 0.0
    for idx, prob in zip(kept, p):
        keep[idx] = True
        mass += prob
        if mass >= top_p:
            break
    out = np.where(keep, x, -np.inf)
    return out - np.log(np.exp(out[keep] - out[keep].max()).sum()) - out[keep].max()


def test_hand_computed_case():
    logits = np.log(np.array([[0.5, 0.2, 0.15, 0.1, 0.05]]))
    # top_p 0.7 keeps {0.5, 0.2} (mass 0.7); renormalised: 5/7, 2/7.
    got = jax.nn.log_softmax(process_logits(logits, [1.0], [0], [0.7]), -1)
    np.testing.assert_allclose(np.exp(np.asarray(got[0])), [5 / 7, 2 / 7, 0, 0, 0], atol=1e-6)
    # top_k 3 then top_p 0.9 over what is left: 0.5/.85, .2/.85 -> mass .82 < .9, add .15/.85.
    got = jax.nn.log_softmax(process_logits(logits, [1.0], [3], [0.9]), -1)
    np.testing.assert_allclose(
        np.exp(np.asarray(got[0])), [0.5 / 0.85, 0.2 / 0.85, 0.15 / 0.85, 0, 0], atol=1e-6
    )


@pytest.mark.parametrize(
    "temperature,top_k,top_p",
    [(1.0, 0, 1.0), (0.5, 0, 1.0), (1.3, 7, 1.0), (0.8, 0, 0.6), (0.7, 10, 0.85), (0.0, 3, 0.5)],
)
def test_process_logits_matches_numpy(temperature, top_k, top_p):
    logits = np.random.default_rng(0).normal(0, 2, (6, 50)).astype(np.float32)
    rows = logits.shape[0]
    got = jax.nn.log_softmax(
        process_logits(logits, [temperature] * rows, [top_k] * rows, [top_p] * rows), -1
    )
    for r in range(rows):
        np.testing.assert_allclose(
            np.asarray(got[r]), _reference(logits[r], temperature, top_k, top_p), atol=1e-5
        )


def test_rows_with_different_settings():
    logits = np.random.default_rng(1).normal(0, 2, (3, 40)).astype(np.float32)
    settings = [(1.0, 0, 1.0), (0.7, 5, 1.0), (1.2, 0, 0.5)]
    got = jax.nn.log_softmax(process_logits(logits, *map(list, zip(*settings))), -1)
    for r, s in enumerate(settings):
        np.testing.assert_allclose(np.asarray(got[r]), _reference(logits[r], *s), atol=1e-5)


def test_sampler_frequencies_follow_the_processed_distribution():
    logits = np.log(np.array([0.4, 0.3, 0.2, 0.06, 0.04], np.float32))
    n = 20000
    tokens, logps = sample_tokens(
        jnp.broadcast_to(jnp.asarray(logits), (n, 5)),
        jax.random.split(jax.random.PRNGKey(0), n),
        jnp.zeros(n, jnp.int32),
        jnp.ones(n),
        jnp.full(n, 3, jnp.int32),
        jnp.ones(n),
    )
    freq = np.bincount(np.asarray(tokens), minlength=5) / n
    np.testing.assert_allclose(freq, [4 / 9, 3 / 9, 2 / 9, 0, 0], atol=0.015)
    np.testing.assert_allclose(
        np.exp(np.asarray(logps)), np.array([4, 3, 2])[np.asarray(tokens)] / 9, atol=1e-6
    )
