"""Per-device memory of a run, by phase (`memory`), and the actor update's part of it.

What it counts, per device, for the run a config describes (mimojax/train/roles.py builds the same
roles); the weight sets come from `mimojax.plan.run_shape.weights`:

- actor weights (with LoRA: the frozen base plus the adapters; only the adapters have
  gradients and optimizer state);
- Adam's two moments in the trainable weights' dtype; gradients during the update (a
  micro-batch's and the accumulator: 2x the trainable weights, plus one embedding-sized buffer
  when a tied embedding is trained);
- activations of one micro-batch (`trainer.micro_batch_size` rows, or `micro_batch_tokens`,
  split over `data` x `fsdp`) by `model.remat`: `none` keeps every residual of every layer,
  `dots` keeps each layer's input and the q/k/v/gate/up projections, `full` keeps each layer's
  input and recomputes one layer at a time in the backward pass; `xla` attention adds
  [heads, T, T] score arrays, `pallas` / `cudnn` do not;
- with fsdp > 1, what the update's all-gathers hold at once: the embedding and LM head and one
  layer, whole, and (full fine-tuning) their whole gradients before the reduce-scatter;
- the log-prob block: float32 logits of `model.logprob_chunk_size` response positions at a time;
- the engine's own weight copy (mimojax/engine/engine.py keeps one, in the weights' dtype; with
  LoRA the merged weights) and, while generating, its KV cache: `rollout.max_concurrent_decodes`
  slots x (data.max_prompt_length + response budget) x layers x kv heads x head_dim x 2 in the
  compute dtype, slots split over `data` x `fsdp`; a weight sync briefly holds a second copy;
- the reference policy's copy when a KL term is on (none with LoRA: the base is the reference);
- the critic (trunk copy, value head, its own Adam state and update) when the estimator needs
  values (`gae`); it trains all its weights, LoRA or not.

Resident state (weights, optimizer state, engine copy, reference, critic) stays for the whole
step; the phases (generation, the update, the critic update, a weight sync) each add their own
transient memory, and the peak is resident + the largest phase.

How good it is: the actor-update part (weights, optimizer state, gradients, activations, logits,
batch) is checked against XLA's own buffer assignment of the real jitted actor update
(`compile().memory_analysis()`: arguments + outputs - aliased + temporaries;
mimojax/plan/xla_check.py) on CPU, float32, within `mimojax.plan.run_shape.XLA_TOLERANCE`
(tests/plan/test_planner.py; `mimojax plan --xla` prints the comparison). The coefficients below
were fitted to those CPU numbers; GPU XLA fuses differently, and bfloat16 activations are assumed
to take half the float32 bytes (XLA:CPU computes bfloat16 elementwise ops in float32, so CPU
cannot check that). Nothing here has been measured on a GPU.
"""

from __future__ import annotations

import math

from mimojax.plan.run_shape import RunShape, _bytes, weights

# Fitted to XLA:CPU's buffer assignment of the actor update (float32; see the docstring).
NONE_RESIDUALS = 1.9  # x the minimal residual set of a layer (4E + 2(H+K)D + KD... below)
ATTN_SCORE_ARRAYS = 1.05  # [heads, T, T] (f32 scores + compute-dtype probs) kept per layer
LAYER_TRANSIENT = 1.2  # one layer's full residuals, live while remat recomputes it
LOGITS_ARRAYS = 4.0  # [rows, chunk, vocab] float32 arrays live in the log-prob block
APPLY_PEAK = 2.7  # x the trainable bytes, live during the optimizer step


def _tensor_split(shape: RunShape, axis: str, dim: int) -> int:
    """How many ways the `tensor` mesh axis splits an activation axis (1 if it does not)."""
    rule = dict(shape.rules).get(axis)
    names = () if rule is None else (rule if isinstance(rule, tuple) else (rule,))
    ways = math.prod(dict(shape.mesh)[n] for n in names if n == "tensor")
    return ways if dim % ways == 0 else 1


def rows_tokens(shape: RunShape, mesh: dict | None = None) -> tuple[float, float]:
    """(rows, tokens) of one micro-batch on one device."""
    mesh = dict(mesh or shape.mesh)
    dp = mesh["data"] * mesh["fsdp"]
    t = shape.seq_len
    if shape.micro_tokens > 0:
        tokens = max(shape.micro_tokens / dp, t)
        return tokens / t, tokens
    rows = max(1, -(-shape.micro_rows // dp))
    return rows, rows * t


def _layer_bytes_per_token(shape: RunShape) -> tuple[float, float, float, float]:
    """Per token and layer: (every residual, attention's share of it, dots' kept, full's kept)."""
    m = shape.model
    c = _bytes(m.dtype)
    th = _tensor_split(shape, "heads", m.num_heads)
    hd = m.num_heads * m.head_dim / th
    kd = m.num_kv_heads * m.head_dim / _tensor_split(shape, "kv_heads", m.num_kv_heads)
    mlp = m.intermediate_size / _tensor_split(shape, "mlp", m.intermediate_size)
    e, s = m.hidden_size, shape.seq_len
    minimal = 4 * e + 2 * hd + 2 * kd + 3 * mlp
    if m.attention_impl == "xla":
        attn = ATTN_SCORE_ARRAYS * (m.num_heads / th) * s * (4 + c)
    elif m.attention_impl == "cudnn":
        attn = s + 8 * m.num_heads / th  # the dense bool mask, log-sum-exp
    else:
        attn = 8 * m.num_heads / th
    every = NONE_RESIDUALS * c * minimal + attn
    return every, attn, c * (e + hd + 2 * kd + 2 * mlp), c * e


def activations(shape: RunShape, *, critic: bool = False, mesh: dict | None = None) -> dict:
    """Bytes of one micro-batch's forward/backward on one device: kept residuals, the remat
    transient of one layer, and the log-prob block (the critic's value head has none)."""
    m = shape.model
    rows, tokens = rows_tokens(shape, mesh)
    every, _, dots, full = _layer_bytes_per_token(shape)
    kept = {"none": every, "dots": dots, "full": full}[m.remat]
    saved = m.num_layers * tokens * kept
    transient = 0.0 if m.remat == "none" else LAYER_TRANSIENT * tokens * every
    hidden = tokens * m.hidden_size * _bytes(m.dtype)
    if critic:
        logits = 2 * hidden
    else:
        r = shape.response_len
        chunk = min(shape.logprob_chunk or r, r)
        vocab = m.vocab_size / _tensor_split(shape, "vocab", m.vocab_size)
        logits = LOGITS_ARRAYS * rows * chunk * vocab * 4 + hidden
    return {"saved": saved, "transient": transient, "logits": logits,
            "total": saved + max(transient, logits)}  # fmt: skip


def forward_pass(shape: RunShape, mesh: dict | None = None) -> float:
    """Bytes of one micro-batch's forward-only pass (old / reference log-probs, values)."""
    rows, tokens = rows_tokens(shape, mesh)
    every = _layer_bytes_per_token(shape)[0]
    m, r = shape.model, shape.response_len
    chunk = min(shape.logprob_chunk or r, r)
    vocab = m.vocab_size / _tensor_split(shape, "vocab", m.vocab_size)
    return tokens * every + LOGITS_ARRAYS / 2 * rows * chunk * vocab * 4


# ---------------------------------------------------------------- memory


def _kv_bytes(shape: RunShape, mesh: dict) -> float:
    """The engine's KV cache on one device: slots split over data x fsdp when they divide."""
    m = shape.model
    dp = mesh["data"] * mesh["fsdp"]
    slots = shape.slots / dp if shape.slots % dp == 0 else shape.slots
    per_slot = shape.cache_len * m.num_layers * m.num_kv_heads * m.head_dim * 2 * _bytes(m.dtype)
    scratch = 4 * m.vocab_size * 4  # float32 logits and the sampler's sorted copies, per slot
    return slots * (per_slot + scratch)


def fsdp_gathered(shape: RunShape) -> float:
    """Bytes the update's fsdp all-gathers hold at once on one device: the vocab-sized weights
    (embedding, LM head) and one layer, whole (tensor-sharded only), plus their whole gradients
    before the reduce-scatter when they train (not with LoRA)."""
    mesh = dict(shape.mesh)
    if mesh["fsdp"] == 1:
        return 0.0
    m = shape.model
    pb = _bytes(m.param_dtype)
    whole = weights(shape, {**mesh, "fsdp": 1})
    vocab = whole.embed + whole.lm_head
    layer = (whole.base - vocab) / m.num_layers
    return (vocab + layer) * pb * (1 if shape.lora_rank > 0 else 2)


def memory(shape: RunShape) -> dict:
    """Per-device bytes of the run: `resident` parts, each phase's transient `phases`, `peak`
    (resident + the largest phase) and `parts` (every component, for tables). With split
    roles, `rollout` holds the same for the engine's devices and `peak` is the larger one."""
    m = shape.model
    pb = _bytes(m.param_dtype)
    mesh = dict(shape.mesh)
    w = weights(shape)
    lora = shape.lora_rank > 0
    trainable = (w.lora if lora else w.base) * pb
    split = shape.rollout_devices > 0
    resident = {
        "weights": w.base * pb,  # LoRA: the frozen base
        "adapters": w.lora * pb,
        "optimizer": 2 * trainable,
        "reference": w.base * pb if shape.reference and not lora else 0,
        "critic": 3 * w.critic * pb if shape.critic else 0,  # weights + Adam moments
        "engine weights": 0 if split else w.base * pb,
    }
    grads = 2 * trainable + (w.embed * pb if m.tie_word_embeddings and not lora else 0)
    acts = activations(shape)
    dp = mesh["data"] * mesh["fsdp"]
    batch = shape.mini_samples * shape.seq_len * 5 * 4 / dp
    update = max(grads + acts["total"] + fsdp_gathered(shape), APPLY_PEAK * trainable) + batch
    phases = {"update": update}
    parts = {"gradients": grads, "activations": acts["saved"] + acts["transient"],
             "logits": acts["logits"], "batch": batch}  # fmt: skip
    if shape.critic:
        ca = activations(shape, critic=True)
        c_train = w.critic * pb
        phases["critic update"] = max(2 * c_train + ca["total"], APPLY_PEAK * c_train) + batch
    if shape.old_logprobs or shape.reference or shape.critic:
        phases["log-prob passes"] = forward_pass(shape)
    rollout = None
    if split:
        r_mesh = dict(shape.rollout_mesh)
        r_w = weights(shape, r_mesh)
        kv = _kv_bytes(shape, r_mesh)
        r_res = {"engine weights": r_w.base * pb}
        r_phases = {"generation": kv, "weight sync": r_w.base * pb}
        rollout = {"resident": r_res, "phases": r_phases,
                   "peak": sum(r_res.values()) + max(r_phases.values())}  # fmt: skip
        parts["kv cache"] = kv
        if lora:
            phases["weight sync"] = w.base * pb  # the merged weights, before the reshard
    else:
        kv = _kv_bytes(shape, mesh)
        phases["generation"] = kv
        phases["weight sync"] = w.base * pb * (2 if lora else 1)  # new copy (+ merged)
        parts["kv cache"] = kv
    peak_phase = max(phases, key=phases.get)
    peak = sum(resident.values()) + phases[peak_phase]
    out = {"resident": resident, "phases": phases, "parts": {**resident, **parts},
           "peak": peak, "peak_phase": peak_phase, "rollout": rollout}  # fmt: skip
    if rollout is not None and rollout["peak"] > peak:
        out["peak"], out["peak_phase"] = rollout["peak"], "rollout devices"
    return out


def actor_update_bytes(shape: RunShape) -> float:
    """What XLA's memory_analysis of the jitted actor update counts (arguments + outputs -
    aliased + temporaries): weights (LoRA: base and adapters), optimizer state, batch, and the
    update's transient memory."""
    mem = memory(shape)
    r = mem["resident"]
    return r["weights"] + r["adapters"] + r["optimizer"] + mem["phases"]["update"]
