"""Greedy output of our engine equals transformers' PyTorch `generate`, token for token."""

import numpy as np
import pytest
import torch
from hf_fixtures import make_hf_model, save_hf_dir

from mimojax.engine import JaxEngine, SamplingParams, generate
from mimojax.models import load_model
from mimojax.models.hf_io import load_hf_model


def _hf_greedy(model, prompt, new_tokens):
    # No eos on the HF side either (min_new_tokens would instead forbid sampling eos).
    model.generation_config.eos_token_id = None
    with torch.no_grad():
        out = model.generate(
            torch.tensor([prompt]),
            do_sample=False,
            max_new_tokens=new_tokens,
            pad_token_id=0,
        )
    return out[0, len(prompt) :].tolist()


@pytest.mark.parametrize("case,tied", [("llama", True), ("qwen2", False), ("qwen3", False)])
def test_engine_greedy_equals_transformers(tmp_path, case, tied):
    hf = make_hf_model(case, tied, seed=3)
    model = load_hf_model(save_hf_dir(hf, tmp_path / case))
    engine = JaxEngine(
        model, None, max_concurrent_decodes=3, max_prefill_length=32, max_cache_length=64
    )
    rng = np.random.default_rng(1)
    prompts = [rng.integers(1, 96, n).tolist() for n in (3, 11, 17, 6, 1)]
    sampling = SamplingParams(temperature=0.0, max_new_tokens=12, ignore_eos=True)
    out = generate(engine, prompts, sampling=sampling)
    for prompt, (completion,) in zip(prompts, out):
        assert completion.token_ids == _hf_greedy(hf, prompt, 12), f"prompt length {len(prompt)}"
        assert completion.finish_reason == "length"


@pytest.mark.smollm2
def test_smollm2_engine_greedy_equals_transformers():
    import os

    from transformers import AutoModelForCausalLM

    from mimojax.models.registry import smollm2_gguf_path
    from mimojax.models.tokenizer import encode_chat

    model, tok = load_model("smollm2-135m-instruct", dtype="float32")
    path = smollm2_gguf_path()
    hf = AutoModelForCausalLM.from_pretrained(
        os.path.dirname(path), gguf_file=os.path.basename(path), dtype=torch.float32
    ).eval()
    texts = ["What is the capital of France?", "Write a haiku about rain.", "What is 12 + 30?"]
    prompts = [encode_chat(tok, [{"role": "user", "content": t}]) for t in texts]
    engine = JaxEngine(
        model, tok, max_concurrent_decodes=2, max_prefill_length=64, max_cache_length=128
    )
    out = generate(
        engine,
        prompts,
        sampling=SamplingParams(temperature=0.0, max_new_tokens=20, ignore_eos=True),
    )
    for prompt, (completion,) in zip(prompts, out):
        assert completion.token_ids == _hf_greedy(hf, prompt, 20), tok.decode(prompt)
    assert "Paris" in tok.decode(out[0][0].token_ids)
