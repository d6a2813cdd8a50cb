"""Actor update (forward + backward of the GRPO loss) on the demo's shape: the LM head at every
position (`prompt_len=1`, the old path) vs only at response positions (`prompt_len=P`).

    python scripts/bench_update.py [--reps 3] [--micro 8] [--prompt 96] [--response 24] [--json P]

The default micro-batch (8 rows) is the demo's actor micro-batch (configs/grpo_arith_smollm2.py,
`trainer.micro_batch_size`). Also checks the two variants' gradients agree within 1e-5 relative.

Both variants are compiled up front and then timed alternately in one process (best of
`--reps`), so a shared machine's load hits both alike; the load average is printed beside the
numbers, which are indicative on a busy box. GFLOP/s are model FLOPs (6 x matmul params per
token for the body + 6 x E x V per head position; attention ignored) over the machine's measured
f32 GEMM rate (scripts/bench_machine.py).
"""

from __future__ import annotations

import argparse
import json
import os
import time

import jax
import numpy as np
from bench_machine import machine_rates  # sibling file in scripts/
from flax import nnx

from mimojax.models import load_model
from mimojax.rollout.batch import TrainBatch
from mimojax.train.step import ActorHParams, Counts, actor_grads


def _batch(b, p, r, vocab, seed=0):
    """A demo-shaped micro-batch: left-padded prompts of ~p/2 tokens, full responses."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(3, vocab, (b, p + r)).astype(np.int32)
    attn = np.zeros((b, p + r), np.int32)
    for i in range(b):
        attn[i, p - int(rng.integers(p // 3, p + 1)) :] = 1
    mask = attn.astype(np.float32)
    mask[:, :p] = 0
    z = lambda s: (rng.normal(size=(b, p + r)) * s * mask).astype(np.float32)  # noqa: E731
    return TrainBatch(
        input_ids_BxT=ids,
        attention_mask_BxT=attn,
        response_mask_BxT=mask,
        rollout_logp_BxT=z(0.1) - 2.0 * mask,
        adv_BxT=z(1.0),
        old_logp_BxT=z(0.1) - 2.0 * mask,
        ref_logp_BxT=z(0.1) - 2.0 * mask,
        values_BxT=z(1.0),
        returns_BxT=z(1.0),
        prompt_len=p,
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--micro", type=int, default=8, help="rows per micro-batch (demo: 8)")
    ap.add_argument("--prompt", type=int, default=96, help="prompt columns (demo: 96)")
    ap.add_argument("--response", type=int, default=24, help="response columns (demo: 24)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json", metavar="PATH", help="also write the results here")
    args = ap.parse_args()

    model, _ = load_model(args.model, dtype="float32", remat="none")
    cfg = model.config
    graphdef, state = nnx.split(model)
    params = nnx.to_pure_dict(state)
    b, p, r = args.micro, args.prompt, args.response
    tb = _batch(b, p, r, cfg.vocab_size)
    counts = Counts.of(tb.response_mask_BxT)
    hp = ActorHParams(temperature=0.7, logprob_chunk=1 << 30, on_policy=True)  # the demo's
    fn = jax.jit(actor_grads, static_argnames=("graphdef", "hp"))
    micro = {"old (head at all T)": tb.replace(prompt_len=1), "new (head at R)": tb}

    def run(name):
        out = fn(params, micro[name].split_rows(b), counts, graphdef=graphdef, hp=hp)
        return jax.block_until_ready(out)

    grads = {}
    for name in micro:  # compile both first
        out = run(name)
        grads[name] = out[1]  # (loss, grads, metrics)
    ga, gb = (np.concatenate([np.ravel(x) for x in jax.tree.leaves(g)]) for g in grads.values())
    grad_rel = float(np.linalg.norm(ga - gb) / max(np.linalg.norm(ga), 1e-30))
    best = dict.fromkeys(micro, float("inf"))
    for _ in range(args.reps):
        for name in micro:
            t0 = time.perf_counter()
            run(name)
            best[name] = min(best[name], time.perf_counter() - t0)

    rate = machine_rates("float32")["gemm_flops_per_s"]
    n_params = sum(int(np.prod(x.shape)) for x in jax.tree.leaves(params))
    ev = cfg.hidden_size * cfg.vocab_size
    body = n_params - (0 if cfg.tie_word_embeddings else ev) - ev  # minus the embedding table
    t = p + r
    heads = {"old (head at all T)": t - 1, "new (head at R)": r}
    print(f"model {args.model} | micro-batch {b} x (prompt {p} + response {r}) | f32")
    print(f"machine f32 GEMM: {rate / 1e9:.0f} GFLOP/s | load average {os.getloadavg()}")
    for name, s in best.items():
        flops = 6 * b * (t * body + heads[name] * ev)
        print(
            f"{name:22s} {s:7.3f} s  {b * t / s:8.0f} tok/s  {flops / s / 1e9:6.1f} GFLOP/s"
            f"  ({flops / s / rate:.0%} of GEMM)"
        )
    old, new = best.values()
    print(f"ratio new/old tokens/s: {old / new:.2f}x  (indicative: shared, loaded machine)")
    ok = grad_rel <= 1e-5
    print(
        f"gradients new vs old: {grad_rel:.2e} relative L2 (<= 1e-5: {'met' if ok else 'MISSED'})"
    )
    if args.json:
        tok = {n: b * t / s for n, s in best.items()}
        gf = {n: 6 * b * (t * body + heads[n] * ev) / s / 1e9 for n, s in best.items()}
        out = {
            "shape": [b, p, r],
            "gemm_gflop_s": rate / 1e9,
            "loadavg": os.getloadavg(),
            "old_tok_s": tok["old (head at all T)"],
            "new_tok_s": tok["new (head at R)"],
            "ratio": old / new,
            "new_gflop_s": gf["new (head at R)"],
            "new_gemm_frac": gf["new (head at R)"] * 1e9 / rate,
            "grad_rel": grad_rel,
        }
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
