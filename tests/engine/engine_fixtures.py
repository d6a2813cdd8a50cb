"""Small engines over tiny random models, shared by the engine tests."""

from flax import nnx
from tiny_configs import TINY_CONFIGS

from mimojax.engine import JaxEngine
from mimojax.models import Decoder


def tiny_engine(name="qwen2", seed=0, slots=4, prefill=32, cache=64, **kwargs):
    """(engine, model) over a random tiny model; no tokenizer (eos comes from the config)."""
    model = Decoder(TINY_CONFIGS[name], rngs=nnx.Rngs(seed))
    engine = JaxEngine(
        model,
        None,
        max_concurrent_decodes=slots,
        max_prefill_length=prefill,
        max_cache_length=cache,
        **kwargs,
    )
    return engine, model


def prompts(vocab, lengths, seed=0):
    """Random prompts of the given lengths."""
    import numpy as np

    rng = np.random.default_rng(seed)
    return [rng.integers(1, vocab, n).tolist() for n in lengths]
