"""Logits parity with transformers' PyTorch Llama / Qwen2 / Qwen3 on random tiny configs."""

import json

import jax.numpy as jnp
import numpy as np
import pytest
from hf_fixtures import CASES, make_hf_model, save_hf_dir, torch_logits

from mimojax.models.hf_io import load_hf_model, read_hf_config


def _batch(vocab, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, vocab, size=(3, 11)).astype(np.int64)
    # Right padding of different lengths, one full row.
    mask = np.ones_like(ids)
    mask[1, 7:] = 0
    mask[2, 3:] = 0
    return ids, mask


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("tied", [False, True])
def test_logits_match_transformers(case, tied, tmp_path):
    ref = make_hf_model(case, tied)
    model = load_hf_model(save_hf_dir(ref, tmp_path))
    ids, mask = _batch(ref.config.vocab_size)
    expected = torch_logits(ref, ids, mask)
    got = np.asarray(model(jnp.asarray(ids), attention_mask=jnp.asarray(mask)))
    valid = mask.astype(bool)  # padded positions are unspecified in both implementations
    assert np.abs(got[valid] - expected[valid]).max() < 1e-4


def test_config_4x_and_5x_conventions_agree(tmp_path):
    ref = make_hf_model("llama3_rope", tied=False)
    path = save_hf_dir(ref, tmp_path)
    cfg5 = read_hf_config(path)
    with open(tmp_path / "config.json") as f:
        hf = json.load(f)
    # Rewrite as transformers 4.x would have: rope_theta + rope_scaling, no rope_parameters.
    params = hf.pop("rope_parameters")
    hf["rope_theta"] = params.pop("rope_theta")
    hf["rope_scaling"] = params
    with open(tmp_path / "config.json", "w") as f:
        json.dump(hf, f)
    cfg4 = read_hf_config(path)
    assert cfg4 == cfg5
    assert cfg4.rope_scaling.rope_type == "llama3" and cfg4.rope_scaling.factor == 8.0
    assert cfg4.rope_theta == 500000.0
