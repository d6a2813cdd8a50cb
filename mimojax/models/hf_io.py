"""HF model directories: config.json + (sharded) safetensors in, the same out."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

import numpy as np
from jax.sharding import Mesh
from safetensors import safe_open
from safetensors.numpy import save_file

from mimojax.models.config import ModelConfig, config_from_hf, config_to_hf
from mimojax.models.decoder import Decoder
from mimojax.models.hf_mapping import WeightLoadError
from mimojax.models.weights import build_model, export_tensors

_MAX_SHARD_BYTES = 2 * 1024**3


class SafetensorsReader:
    """Reads tensors by HF name from model.safetensors or a sharded index, one at a time."""

    def __init__(self, model_dir: str):
        single = os.path.join(model_dir, "model.safetensors")
        index = os.path.join(model_dir, "model.safetensors.index.json")
        if os.path.exists(index):
            with open(index) as f:
                weight_map = json.load(f)["weight_map"]
            self.files = {n: os.path.join(model_dir, fn) for n, fn in weight_map.items()}
        elif os.path.exists(single):
            with safe_open(single, "np") as f:
                self.files = {n: single for n in f.keys()}
        else:
            raise FileNotFoundError(
                f"{model_dir}: no model.safetensors or model.safetensors.index.json"
            )
        self.model_dir = model_dir

    def __call__(self, name: str) -> np.ndarray:
        if name not in self.files:
            raise WeightLoadError(f"{self.model_dir}: checkpoint has no tensor {name!r}")
        # bfloat16 tensors come back as ml_dtypes arrays.
        with safe_open(self.files[name], "np") as f:
            return f.get_tensor(name)


def read_hf_config(model_dir: str, **overrides) -> ModelConfig:
    """ModelConfig from `model_dir/config.json` (4.x or 5.x rope convention)."""
    path = os.path.join(model_dir, "config.json")
    if not os.path.exists(path):
        raise FileNotFoundError(f"{model_dir}: no config.json (is this an HF model directory?)")
    with open(path) as f:
        hf = json.load(f)
    gen_path = os.path.join(model_dir, "generation_config.json")
    if os.path.exists(gen_path) and "eos_token_id" not in overrides:
        with open(gen_path) as f:
            gen_eos = json.load(f).get("eos_token_id")
        if gen_eos is not None:
            overrides["eos_token_id"] = gen_eos
    return config_from_hf(hf, source=path, **overrides)


def load_hf_model(
    model_dir: str, mesh: Mesh | None = None, rules: Mapping | None = None, **overrides
) -> Decoder:
    """Loads weights from an HF directory, each tensor placed directly into its sharding."""
    cfg = read_hf_config(model_dir, **overrides)
    return build_model(cfg, SafetensorsReader(model_dir), mesh, rules)


def save_hf_model(model: Decoder, out_dir: str, max_shard_bytes: int = _MAX_SHARD_BYTES) -> None:
    """Writes config.json, generation_config.json and (sharded) safetensors transformers loads.

    Tensors stream from the devices one layer at a time and each shard is written as soon as
    it is full, so host memory holds at most one shard (<= max_shard_bytes).
    """
    os.makedirs(out_dir, exist_ok=True)
    cfg = model.config
    shard: dict[str, np.ndarray] = {}
    written: list[tuple[str, list[str]]] = []  # (temporary file, tensor names)
    total = 0

    def flush():
        tmp = os.path.join(out_dir, f".shard-{len(written):05d}.safetensors.tmp")
        save_file(shard, tmp, metadata={"format": "pt"})
        written.append((tmp, list(shard)))
        shard.clear()

    for name, arr in export_tensors(model):
        if shard and sum(a.nbytes for a in shard.values()) + arr.nbytes > max_shard_bytes:
            flush()
        shard[name] = arr
        total += arr.nbytes
    flush()
    if len(written) == 1:
        os.replace(written[0][0], os.path.join(out_dir, "model.safetensors"))
    else:
        weight_map = {}
        for i, (tmp, names) in enumerate(written):
            fn = f"model-{i + 1:05d}-of-{len(written):05d}.safetensors"
            os.replace(tmp, os.path.join(out_dir, fn))
            weight_map.update({n: fn for n in names})
        index = {"metadata": {"total_size": total}, "weight_map": weight_map}
        with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
            json.dump(index, f, indent=2)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config_to_hf(cfg), f, indent=2)
    gen = {k: getattr(cfg, k) for k in ("bos_token_id", "eos_token_id", "pad_token_id")}
    with open(os.path.join(out_dir, "generation_config.json"), "w") as f:
        json.dump({k: v for k, v in gen.items() if v is not None}, f, indent=2)
