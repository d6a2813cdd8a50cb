"""HF round trip: load -> save_hf -> load is exact, and transformers reloads our save."""

import jax.numpy as jnp
import numpy as np
import pytest
import transformers
from flax import nnx
from hf_fixtures import make_hf_model, save_hf_dir, torch_logits

from mimojax.models.hf_io import load_hf_model, save_hf_model
from mimojax.models.loader import save_hf


def _flat_params(model):
    return {p: np.asarray(v[...]) for p, v in nnx.to_flat_state(nnx.state(model, nnx.Param))}


@pytest.mark.parametrize("case,tied", [("qwen2", False), ("qwen3", True), ("llama", False)])
def test_round_trip_identical_and_transformers_reloads(case, tied, tmp_path):
    ref = make_hf_model(case, tied)
    first = load_hf_model(save_hf_dir(ref, tmp_path / "src"))
    save_hf_model(first, str(tmp_path / "out"))
    second = load_hf_model(str(tmp_path / "out"))
    a, b = _flat_params(first), _flat_params(second)
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=str(k))
    reloaded = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "out").eval()
    for name, p in ref.state_dict().items():
        np.testing.assert_array_equal(reloaded.state_dict()[name].numpy(), p.numpy(), err_msg=name)
    ids = np.arange(12).reshape(2, 6) % ref.config.vocab_size
    mask = np.ones_like(ids)
    np.testing.assert_allclose(
        np.asarray(second(jnp.asarray(ids))), torch_logits(reloaded, ids, mask), atol=1e-4
    )


def test_sharded_save_writes_index(tmp_path):
    ref = make_hf_model("llama", tied=False)
    model = load_hf_model(save_hf_dir(ref, tmp_path / "src"))
    save_hf_model(model, str(tmp_path / "out"), max_shard_bytes=40_000)
    assert (tmp_path / "out" / "model.safetensors.index.json").exists()
    assert len(list((tmp_path / "out").glob("model-*-of-*.safetensors"))) > 1
    again = load_hf_model(str(tmp_path / "out"))
    for k, v in _flat_params(model).items():
        np.testing.assert_array_equal(v, _flat_params(again)[k])


def test_bfloat16_params_round_trip(tmp_path):
    ref = make_hf_model("qwen3", tied=False)
    model = load_hf_model(save_hf_dir(ref, tmp_path / "src"), param_dtype="bfloat16")
    assert model.layers.q_proj[...].dtype == jnp.bfloat16
    save_hf(model, None, str(tmp_path / "out"))
    reloaded = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "out")
    w = reloaded.model.layers[0].self_attn.q_proj.weight
    assert str(w.dtype) == "torch.bfloat16"
    again = load_hf_model(str(tmp_path / "out"), param_dtype="bfloat16")
    for k, v in _flat_params(model).items():
        np.testing.assert_array_equal(v, _flat_params(again)[k])


def test_load_model_from_saved_dir_brings_tokenizer(tmp_path):
    from mimojax.models import load_model

    model, tok = load_model("tiny-random-qwen2", seed=4)
    save_hf(model, tok, str(tmp_path))
    again, tok2 = load_model(str(tmp_path))
    for k, v in _flat_params(model).items():
        np.testing.assert_array_equal(v, _flat_params(again)[k])
    text = "def f(x):\n    return x + 1"
    assert tok2.encode(text) == tok.encode(text)
    assert tok2.eos_token_id == tok.eos_token_id == again.config.eos_token_id
    assert tok2.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
    ) == tok.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
    )
