"""The engine with `attention_impl="pallas"` (interpret mode on CPU) matches `xla`."""

from engine_fixtures import prompts
from flax import nnx
from tiny_configs import TINY_CONFIGS

from mimojax.engine import JaxEngine, SamplingParams, generate
from mimojax.models import Decoder


def test_pallas_engine_matches_xla_engine():
    cfg = TINY_CONFIGS["qwen2"]
    ps = prompts(cfg.vocab_size, (3, 9, 14))
    sampling = SamplingParams(temperature=0.0, max_new_tokens=5, ignore_eos=True)
    outs = {}
    for impl in ("xla", "pallas"):
        model = Decoder(cfg.replace(attention_impl=impl), rngs=nnx.Rngs(0))
        engine = JaxEngine(
            model, None, max_concurrent_decodes=2, max_prefill_length=16, max_cache_length=32
        )
        outs[impl] = generate(engine, ps, sampling=sampling)
    for a, b in zip(outs["xla"], outs["pallas"]):
        assert a[0].token_ids == b[0].token_ids
        assert max(abs(x - y) for x, y in zip(a[0].logprobs, b[0].logprobs)) < 1e-4
