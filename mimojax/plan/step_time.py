"""Seconds per RL step of a run on a card, by phase (`step_time`): a roofline, not a measurement.

FLOPs over the card's dense bf16 (or TF32 for float32 compute) rate at `MFU` (40%):
6 x params x tokens for a full update (4 x with LoRA: no weight gradients of the base; +2 x with
`remat=full`), 2 x params x tokens per extra forward pass (old log-probs, reference, critic values),
plus attention's T^2 terms; prefill once per prompt; decode steps bound by
max(FLOPs, weight + KV bytes / (`HBM_EFF` x bandwidth)) per step, every sample run to its full
response budget (an upper bound); fsdp all-gathers and tensor all-reduces at `LINK_EFF` of the
link rate (NVLink inside a node, the per-card network rate across nodes), overlapped with compute
(time = max). Card rates: `mimojax.plan.run_shape.CARDS`. Not measured on a GPU.
"""

from __future__ import annotations

from mimojax.plan.run_shape import Card, RunShape, _bytes, weights

MFU = 0.40  # fraction of peak FLOP/s that matmul-bound phases reach
HBM_EFF = 0.60  # fraction of HBM bandwidth that decode steps reach
LINK_EFF = 0.60  # fraction of the interconnect rate that collectives reach


def _link_gb_s(card: Card, devices: int) -> float:
    return (card.link_gb_s if devices <= card.per_node else card.node_link_gb_s) * LINK_EFF


def step_time(shape: RunShape, card: Card) -> dict:
    """Seconds per RL step on `card`s, by phase (see the module docstring for the model)."""
    m = shape.model
    mesh = dict(shape.mesh)
    n_dev = shape.devices
    w = weights(shape)
    c, pb = _bytes(m.dtype), _bytes(m.param_dtype)
    flops_s = card.tflops(m.dtype) * 1e12 * MFU
    link = _link_gb_s(card, n_dev) * 1e9
    fsdp, tensor = mesh["fsdp"], mesh["tensor"]
    layers = w.base_total - m.vocab_size * m.hidden_size - w.lm_head_total
    head = 2 * m.hidden_size * m.vocab_size
    attn = 4 * m.num_layers * m.num_heads * m.head_dim  # x context, per token
    t, p, r = shape.seq_len, shape.prompt_len, shape.response_len
    fwd = 2 * layers * t + head * r + attn * t * t  # one sample's forward FLOPs
    gathered = w.base_total * pb / tensor  # what fsdp all-gathers to every device per pass
    gather_s = gathered * (fsdp - 1) / fsdp / link if fsdp > 1 else 0.0

    def tp_s(tokens):  # two all-reduces of [tokens, E] per layer and direction
        if tensor == 1:
            return 0.0
        return 4 * m.num_layers * tokens * m.hidden_size * c * (tensor - 1) / tensor / link

    samples = shape.step_samples
    micro = max(1, samples // max(shape.micro_rows, 1))  # micro-batches per epoch
    out = {}
    # Generation: one prefill per prompt, then decode waves of `slots` samples.
    prefill = shape.prompts * (2 * layers * p + attn * p * p) / n_dev / flops_s
    dp = mesh["data"] * fsdp
    slots_dev = shape.slots / dp if shape.slots % dp == 0 else shape.slots
    ctx = p + r / 2
    kv_dev = slots_dev * ctx * m.num_layers * m.num_kv_heads * m.head_dim * 2 * c
    decode_flops = slots_dev * (2 * layers + head + attn * ctx) / tensor
    decode_bytes = gathered + kv_dev
    step = max(decode_flops / flops_s, decode_bytes / (card.hbm_tb_s * 1e12 * HBM_EFF), gather_s)
    waves = -(-samples // shape.slots)
    out["generation"] = prefill + waves * r * step
    # Forward-only passes: old log-probs, reference, critic values.
    passes = int(shape.old_logprobs) + int(shape.reference) + int(shape.critic)
    fwd_s = samples * fwd / n_dev / flops_s
    comm = micro * gather_s + tp_s(samples * t / dp) / 2
    out["log-prob passes"] = passes * max(fwd_s, comm)
    # The update: backward ~ 2 forwards (1 with LoRA: no base weight gradients), remat adds one.
    mult = (2 if shape.lora_rank > 0 else 3) + (1 if m.remat == "full" else 0)
    epochs = shape.ppo_epochs
    upd = epochs * mult * fwd_s
    comm = epochs * micro * (3 * gather_s) + epochs * tp_s(samples * t / dp)
    out["update"] = max(upd, comm)
    if shape.critic:
        out["critic update"] = max(epochs * (3 + (m.remat == "full")) * fwd_s, comm)
    out["weight sync"] = w.base * pb / (card.hbm_tb_s * 1e12 * HBM_EFF) * 2
    out["total"] = sum(out.values())
    out["tokens_per_s"] = samples * t / out["total"]
    return out
