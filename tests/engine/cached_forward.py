"""Runs the engine's cached forward by hand: a right-padded batched prefill, then decode steps."""

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from mimojax.engine.forward import cached_hidden, engine_params, init_layer_caches, logits_at


def prefill_then_decode(model, prompt_BxP, lengths_B, step_tokens_NxB, cache_length=32):
    """(prompt logits [B, P, V], [logits [B, V] at each row's last prompt token, then after
    each decode step])."""
    cfg = model.config
    params = engine_params(nnx.state(model, nnx.Param))

    @jax.jit
    def run(params, ids_BxT, caches):
        hidden_BxTxE, caches = cached_hidden(params, cfg, ids_BxT, caches)
        b, t, e = hidden_BxTxE.shape
        return logits_at(params, cfg, hidden_BxTxE.reshape(b * t, e)).reshape(b, t, -1), caches

    b = prompt_BxP.shape[0]
    caches = init_layer_caches(cfg, b, cache_length)
    logits_BxPxV, caches = run(params, jnp.asarray(prompt_BxP), caches)
    # Padded prompt positions were written too; advancing by the real lengths lets the decode
    # steps overwrite them.
    caches = caches._replace(lengths_B=jnp.asarray(lengths_B, jnp.int32))
    prompt_BxPxV = np.asarray(logits_BxPxV)
    out = [prompt_BxPxV[np.arange(b), np.asarray(lengths_B) - 1]]
    for tokens_B in step_tokens_NxB:
        logits_Bx1xV, caches = run(params, jnp.asarray(tokens_B)[:, None], caches)
        caches = caches._replace(lengths_B=caches.lengths_B + 1)
        out.append(np.asarray(logits_Bx1xV[:, 0]))
    return prompt_BxPxV, out
