"""GGUF files written the way llama.cpp's converter writes them (Q/K rows permuted for llama),
for every supported architecture, load to the same logits as the transformers model."""

import jax.numpy as jnp
import numpy as np
import pytest
from hf_fixtures import make_hf_model, torch_logits

from mimojax.models.gguf_io import load_gguf_model

_HF_TO_GGUF = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.q_proj.bias": "attn_q.bias",
    "self_attn.k_proj.bias": "attn_k.bias",
    "self_attn.v_proj.bias": "attn_v.bias",
    "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}


def llama_cpp_permute(w, n_heads):
    """llama.cpp convert_hf_to_gguf.py's permute for llama Q/K (written from its formula)."""
    return (
        w.reshape(n_heads, 2, w.shape[0] // n_heads // 2, *w.shape[1:])
        .swapaxes(1, 2)
        .reshape(w.shape)
    )


def write_gguf(model, path):
    import gguf

    c = model.config
    arch = c.model_type
    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(c.num_hidden_layers)
    w.add_context_length(c.max_position_embeddings)
    w.add_embedding_length(c.hidden_size)
    w.add_feed_forward_length(c.intermediate_size)
    w.add_head_count(c.num_attention_heads)
    w.add_head_count_kv(c.num_key_value_heads)
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_rope_freq_base(c.rope_parameters["rope_theta"])
    w.add_layer_norm_rms_eps(c.rms_norm_eps)
    w.add_vocab_size(c.vocab_size)
    for name, t in model.state_dict().items():
        if name == "lm_head.weight" and c.tie_word_embeddings:
            continue
        arr = t.float().numpy()
        if name.startswith("model.layers."):
            layer, rest = name[len("model.layers.") :].split(".", 1)
            gname = f"blk.{layer}.{_HF_TO_GGUF[rest]}"
            if arch == "llama" and rest == "self_attn.q_proj.weight":
                arr = llama_cpp_permute(arr, c.num_attention_heads)
            if arch == "llama" and rest == "self_attn.k_proj.weight":
                arr = llama_cpp_permute(arr, c.num_key_value_heads)
        else:
            gname = _HF_TO_GGUF[name]
        w.add_tensor(gname, np.ascontiguousarray(arr))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.mark.parametrize("case,tied", [("llama", True), ("qwen2", False), ("qwen3", False)])
def test_gguf_from_every_architecture_matches_transformers(case, tied, tmp_path):
    ref = make_hf_model(case, tied)
    write_gguf(ref, tmp_path / "m.gguf")
    model = load_gguf_model(str(tmp_path / "m.gguf"))
    assert model.config.model_type == ref.config.model_type
    assert model.config.tie_word_embeddings == tied
    ids = np.random.default_rng(1).integers(0, ref.config.vocab_size, (2, 9))
    mask = np.ones_like(ids)
    got = np.asarray(model(jnp.asarray(ids)))
    assert np.abs(got - torch_logits(ref, ids, mask)).max() < 1e-4
