"""One GPU session's checks and timings: kernels, engine throughput, actor-update MFU.

A lent GPU comes for minutes, bare (no model files, no pip), so this script needs only JAX,
safetensors, torch and transformers, and makes its own models: transformers builds a randomly
initialised model of a published shape (SmolLM2-135M, Qwen2.5-0.5B/1.5B), saves it, and mimojax
loads the same files, so both sides run identical weights. Sections, most valuable first, each
skipped once the time budget is spent and each caught on error so one failure hides nothing:

  ceilings   bf16 matmul TFLOP/s (8192^3, random data) and copy GB/s: the denominators
  kernels    compiled (Triton) Pallas flash fwd/bwd and decode attention vs the jnp reference
             in float32 on upcast inputs (relative L2 error; padding, GQA, ragged lengths), and
             the model's logits with attention_impl=pallas vs xla
  agree      greedy tokens: mimojax engine vs transformers' generate, float32, same weights
  engine     decode tok/s, mimojax engine vs transformers' generate (bf16, greedy, eos off),
             step time vs the floor max(FLOPs / peak, bytes / bandwidth)
  train      actor update (forward + backward of the GRPO loss, head at response positions):
             tokens/s and MFU = model FLOPs / s / measured peak, per attention impl
  attention  scripts/bench_attention.py's tables at a reduced set of shapes

    python scripts/gpu_check.py --out $OUT            # on the GPU: ~6-8 min
    python scripts/gpu_check.py --smoke --out /tmp/g  # anywhere: tiny shapes, ~1-2 min (CPU)

Results go to OUT/gpu_check.json, the tables to stdout (markdown).
"""

from __future__ import annotations

import argparse
import datetime
import functools
import importlib.util
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time
import traceback

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))


def _import_package(name: str, folder: pathlib.Path) -> None:
    """Imports `name` from `folder` (a bare GPU box has no `pip install -e .`). The repo root
    stays off sys.path: its top-level kernels/ would shadow the `kernels` that transformers
    probes for, and that probe fails on some transformers versions (seen with 5.17)."""
    spec = importlib.util.spec_from_file_location(
        name, folder / "__init__.py", submodule_search_locations=[str(folder)]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)


if importlib.util.find_spec("mimojax") is None:
    _import_package("mimojax", ROOT / "mimojax")
    _import_package("mimojax.kernels", ROOT / "kernels")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from bench_attention import bench_decode, bench_training, markdown, time_call  # noqa: E402
from flax import nnx  # noqa: E402

from mimojax.engine import JaxEngine, SamplingParams, generate  # noqa: E402
from mimojax.kernels import (  # noqa: E402
    decode_attention,
    flash_attention,
    reference_attention,
    reference_decode_attention,
)
from mimojax.models.hf_io import load_hf_model  # noqa: E402

# Published shapes (HF config fields); the weights are random.
SHAPES = {
    "smollm2-135m": dict(
        model_type="llama", vocab_size=49152, hidden_size=576, intermediate_size=1536,
        num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3,
        tie_word_embeddings=True, rope_theta=100000.0, rms_norm_eps=1e-5,
        max_position_embeddings=8192,
    ),
    "qwen2.5-0.5b": dict(
        model_type="qwen2", vocab_size=151936, hidden_size=896, intermediate_size=4864,
        num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2,
        tie_word_embeddings=True, rope_theta=1000000.0, rms_norm_eps=1e-6,
        max_position_embeddings=32768,
    ),
    "qwen2.5-1.5b": dict(
        model_type="qwen2", vocab_size=151936, hidden_size=1536, intermediate_size=8960,
        num_hidden_layers=28, num_attention_heads=12, num_key_value_heads=2,
        tie_word_embeddings=True, rope_theta=1000000.0, rms_norm_eps=1e-6,
        max_position_embeddings=32768,
    ),
    # --smoke: a few-MB model of each family
    "tiny-llama": dict(
        model_type="llama", vocab_size=4096, hidden_size=64, intermediate_size=128,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        tie_word_embeddings=True, rope_theta=10000.0, rms_norm_eps=1e-5,
        max_position_embeddings=2048,
    ),
    "tiny-qwen2": dict(
        model_type="qwen2", vocab_size=4096, hidden_size=64, intermediate_size=128,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        tie_word_embeddings=True, rope_theta=10000.0, rms_norm_eps=1e-6,
        max_position_embeddings=2048,
    ),
}  # fmt: skip


class Budget:
    def __init__(self, seconds: float):
        self.start, self.seconds = time.perf_counter(), seconds

    def left(self) -> float:
        return self.seconds - (time.perf_counter() - self.start)


SKIP: set[str] = set()


def section(results: dict, name: str, budget: Budget, min_left: float, fn, *args):
    """Runs fn(*args) into results[name] unless under `min_left` seconds remain; never raises."""
    t0 = time.perf_counter()
    if name in SKIP:
        results[name] = {"skipped": "--skip"}
        return
    if budget.left() < min_left:
        results[name] = {"skipped": f"{budget.left():.0f} s left < {min_left:.0f} s"}
        print(f"\n## {name}: skipped ({budget.left():.0f} s left)", flush=True)
        return
    print(f"\n## {name} ({budget.left():.0f} s left)", flush=True)
    try:
        results[name] = fn(*args)
    except Exception as e:  # one broken section must not hide the others
        traceback.print_exc()
        results[name] = {"error": f"{type(e).__name__}: {str(e)[:400]}"}
    results.setdefault("section_s", {})[name] = round(time.perf_counter() - t0, 1)
    print(f"({name}: {time.perf_counter() - t0:.0f} s)", flush=True)


# ------------------------------------------------------------------ ceilings
def ceilings(smoke: bool) -> dict:
    n = 1024 if smoke else 8192
    ka, kb = jax.random.split(jax.random.key(0))
    a = jax.random.normal(ka, (n, n), jnp.bfloat16)
    b = jax.random.normal(kb, (n, n), jnp.bfloat16)
    mm = jax.jit(lambda a, b: a @ b)
    peak = 2 * n**3 / time_call(mm, a, b, min_iters=10) / 1e12
    x = jax.random.normal(ka, ((2**24 if smoke else 2**30),), jnp.bfloat16)
    copy = jax.jit(lambda x: x * 1.0001)
    bw = 2 * x.nbytes / time_call(copy, x, min_iters=10) / 1e9
    print(f"bf16 matmul {n}^3: {peak:.1f} TFLOP/s; copy: {bw:.0f} GB/s (read + write)")
    return {"peak_tflops": peak, "bandwidth_gbs": bw, "matmul_n": n}


# ------------------------------------------------------------------ kernels
def _rel(got, want) -> float:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if not np.all(np.isfinite(got)):
        return float("inf")
    return float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30))


def _fwd_bwd(attn, pos, valid, q, k, v, do):
    out, vjp = jax.vjp(lambda q, k, v: attn(q, k, v, pos, valid), q, k, v)
    return (out, *vjp(do))


REL_TOL = {"float32": 2e-3, "bfloat16": 2e-2}  # f32 dots may run as tf32 on the matrix units


def kernel_checks(smoke: bool) -> dict:
    """Compiled Pallas vs the float32 reference on upcast inputs: relative L2 error."""
    rng = np.random.default_rng(0)
    rows, ok = [], True
    flash_cases = [(2, 200, 8, 2, 64), (1, 1030, 16, 4, 128), (2, 96, 4, 4, 32)]
    decode_cases = [(8, 1000, 32, 8, 128), (3, 4100, 16, 2, 64)]
    if smoke:
        flash_cases, decode_cases = [(2, 40, 4, 2, 16)], [(4, 40, 8, 2, 16)]
    for dtype in ("float32", "bfloat16"):
        for b, t, h, kh, d in flash_cases:
            f32 = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
            q, k, v, do = f32(b, t, h, d), f32(b, t, kh, d), f32(b, t, kh, d), f32(b, t, h, d)
            # ragged right padding plus a fully masked first key on the last row
            valid = np.arange(t)[None] < np.linspace(t, t // 2 + 1, b).astype(int)[:, None]
            valid[-1, 0] = False
            pos = np.broadcast_to(np.arange(t), (b, t))

            cast = [jnp.asarray(x, dtype) for x in (q, k, v, do)]
            run = jax.jit(functools.partial(_fwd_bwd, flash_attention, pos, valid))
            got = run(*cast)
            want = _fwd_bwd(reference_attention, pos, valid, *[x.astype(jnp.float32) for x in cast])
            errs = {"fwd": _rel(got[0], want[0])}
            errs["dq/dk/dv"] = max(_rel(g, w) for g, w in zip(got[1:], want[1:]))
            for phase, err in errs.items():
                good = err <= REL_TOL[dtype]
                ok &= good
                shape = f"B{b} T{t} H{h} K{kh} D{d}"
                rows.append(["flash", phase, shape, dtype, f"{err:.1e}", "ok" if good else "FAIL"])
        for b, s, h, kh, d in decode_cases:
            q = jnp.asarray(rng.standard_normal((b, h, d)), dtype)
            k = jnp.asarray(rng.standard_normal((b, s, kh, d)), dtype)
            v = jnp.asarray(rng.standard_normal((b, s, kh, d)), dtype)
            lengths = jnp.asarray(np.linspace(1, s, b).astype(np.int32))
            got = jax.jit(decode_attention)(q, k, v, lengths)
            f = lambda x: x.astype(jnp.float32)  # noqa: E731
            err = _rel(got, reference_decode_attention(f(q), f(k), f(v), lengths))
            good = err <= REL_TOL[dtype]
            ok &= good
            shape = f"B{b} S{s} H{h} K{kh} D{d}"
            rows.append(["decode", "fwd", shape, dtype, f"{err:.1e}", "ok" if good else "FAIL"])
    print(markdown(["kernel", "phase", "shape", "dtype", "rel L2 err", "within tol"], rows))
    return {"rows": rows, "all_ok": bool(ok), "tolerance": REL_TOL}


# ------------------------------------------------------------------ models
def make_pair(shape: str, dtype: str, workdir: str):
    """(transformers model on the device, mimojax Decoder) with the same random weights."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    fields = dict(SHAPES[shape])
    hf_cfg = AutoConfig.for_model(fields.pop("model_type"), **fields)
    torch.manual_seed(0)
    hf = AutoModelForCausalLM.from_config(hf_cfg, dtype=getattr(torch, dtype))
    path = os.path.join(workdir, f"{shape}-{dtype}")
    hf.save_pretrained(path)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    hf = hf.to(dev).eval()
    ours = load_hf_model(path, dtype=dtype, param_dtype=dtype)
    return hf, ours, torch, dev


def random_prompts(n: int, vocab: int, lo: int, hi: int, seed: int = 0) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    return [rng.integers(10, vocab, int(rng.integers(lo, hi + 1))).tolist() for _ in range(n)]


def hf_generate(hf, torch, dev, prompts, new_tokens: int, pad: int = 0):
    """(seconds of generate(new_tokens), seconds of generate(1), tokens) on a left-padded batch."""
    b, t = len(prompts), max(map(len, prompts))
    ids = np.full((b, t), pad, np.int64)
    mask = np.zeros((b, t), np.int64)
    for i, p in enumerate(prompts):
        ids[i, t - len(p) :], mask[i, t - len(p) :] = p, 1
    kw = dict(
        input_ids=torch.from_numpy(ids).to(dev),
        attention_mask=torch.from_numpy(mask).to(dev),
        do_sample=False,
        pad_token_id=pad,
    )

    def run(n):
        if dev == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.inference_mode():
            out = hf.generate(**kw, max_new_tokens=n, min_new_tokens=n)
        if dev == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - t0, out[:, t:].tolist()

    run(2)
    first = min(run(1)[0] for _ in range(2))
    full, tokens = min((run(new_tokens) for _ in range(2)), key=lambda r: r[0])
    return full, first, tokens


def engine_generate(model, prompts, new_tokens: int):
    """(decode seconds after the prefills, steps, tokens, compile+warm-up s) of a JaxEngine."""
    longest = max(map(len, prompts))
    prefill = 1 << (longest - 1).bit_length()
    engine = JaxEngine(
        model,
        None,
        max_concurrent_decodes=len(prompts),
        max_prefill_length=prefill,
        max_cache_length=prefill + new_tokens,
    )
    greedy = SamplingParams(temperature=0.0, max_new_tokens=new_tokens, ignore_eos=True)
    t0 = time.perf_counter()
    generate(engine, prompts, sampling=greedy)  # compiles every bucket and width used below
    warm = time.perf_counter() - t0
    best = None
    for _ in range(2):
        stats: dict = {}
        t0 = time.perf_counter()
        out = generate(engine, prompts, sampling=greedy, stats=stats)
        wall = time.perf_counter() - t0
        if best is None or wall < best[0]:
            best = (wall, stats, out)
    wall, stats, out = best
    tokens = [c[0].token_ids for c in out]
    return wall - stats["prefill_s"], int(stats["decode_steps"]), tokens, warm, stats


def agreement(workdir: str, smoke: bool) -> dict:
    """Greedy tokens, mimojax vs transformers, float32 at full matmul precision on both."""
    shape = "tiny-llama" if smoke else "smollm2-135m"
    hf, ours, torch, dev = make_pair(shape, "float32", workdir)
    torch.backends.cuda.matmul.allow_tf32 = False
    prompts = random_prompts(4, SHAPES[shape]["vocab_size"], 20, 40, seed=1)
    with jax.default_matmul_precision("highest"):
        _, _, mine, _, _ = engine_generate(ours, prompts, 24)
    _, _, theirs = hf_generate(hf, torch, dev, prompts, 24)
    first_diff = [
        next((i for i, (a, b) in enumerate(zip(x, y)) if a != b), None)
        for x, y in zip(mine, theirs)
    ]
    same = sum(d is None for d in first_diff)
    print(f"{shape} float32 greedy, 4 rows x 24 tokens: {same}/4 identical; diffs {first_diff}")
    del hf
    return {"shape": shape, "rows_identical": same, "rows": 4, "first_diff": first_diff}


def engine_vs_hf(workdir: str, shape: str, batches: list[int], new_tokens: int, peak, bw) -> dict:
    hf, ours, torch, dev = make_pair(shape, "bfloat16", workdir)
    cfg = ours.config
    n_params = sum(x.size for x in jax.tree.leaves(nnx.state(ours, nnx.Param)))
    rows, out = [], {"shape": shape, "params": int(n_params), "new_tokens": new_tokens}
    for b in batches:
        prompts = random_prompts(b, cfg.vocab_size, 32, 64)
        dec_s, steps, tokens, warm, stats = engine_generate(ours, prompts, new_tokens)
        mj = b * (new_tokens - 1) / dec_s
        full, first, hf_tokens = hf_generate(hf, torch, dev, prompts, new_tokens)
        hf_tok_s = b * (new_tokens - 1) / (full - first)
        # floor per step: weights once + the valid KV once; FLOPs of b tokens
        context = float(np.mean([len(p) for p in prompts])) + new_tokens / 2
        matmul_params = n_params  # tied embedding: the head is the one use
        attn_flops = 4 * cfg.num_layers * cfg.num_heads * cfg.head_dim * context
        flops = b * (2 * matmul_params + attn_flops)
        kv = b * context * cfg.num_layers * 2 * cfg.num_kv_heads * cfg.head_dim * 2
        floor = max(flops / (peak * 1e12), (matmul_params * 2 + kv) / (bw * 1e9))
        step = stats["decode_s"] / steps
        agree = sum(x[:8] == y[:8] for x, y in zip(tokens, hf_tokens))
        row = dict(
            batch=b, mimojax_tok_s=mj, hf_tok_s=hf_tok_s, ratio=mj / hf_tok_s,
            step_ms=step * 1e3, floor_ms=floor * 1e3, step_over_floor=step / floor,
            prefill_ms=stats["prefill_s"] * 1e3, hf_ttft_ms=first * 1e3, warmup_s=warm,
            first8_identical=f"{agree}/{b}",
        )  # fmt: skip
        out[str(b)] = row
        rows.append(
            [
                str(b), f"{mj:.0f}", f"{hf_tok_s:.0f}", f"{mj / hf_tok_s:.2f}", f"{step * 1e3:.2f}",
                f"{floor * 1e3:.3f}", f"{step / floor:.1f}", f"{stats['prefill_s'] * 1e3:.0f}",
                f"{first * 1e3:.0f}", f"{agree}/{b}", f"{warm:.0f}",
            ]
        )  # fmt: skip
        print(rows[-1], flush=True)
    header = [
        "batch", "mimojax tok/s", "HF tok/s", "ratio", "step ms", "floor ms", "step/floor",
        "mimojax all-prefill ms", "HF TTFT ms", "first 8 tokens identical", "warm-up s",
    ]  # fmt: skip
    print(f"\n{shape} bf16, {new_tokens} new tokens, greedy, eos off, prompts 32-64 tokens\n")
    print(markdown(header, rows))
    del hf
    if dev == "cuda":
        torch.cuda.empty_cache()
    return out


# ------------------------------------------------------------------ actor update
def train_mfu(workdir: str, shape: str, impls, micro: int, prompt: int, response: int, peak):
    from bench_update import _batch

    from mimojax.train.step import ActorHParams, Counts, actor_grads

    rows, out = [], {"shape": shape, "micro": micro, "prompt": prompt, "response": response}
    _, model, torch, _ = make_pair(shape, "float32", workdir)
    t = prompt + response
    for impl in impls:
        cfg = model.config.replace(dtype="bfloat16", attention_impl=impl, remat="none")
        m = nnx.merge(*nnx.split(model))
        m.config = cfg
        graphdef, state = nnx.split(m)
        params = nnx.to_pure_dict(state)
        tb = _batch(2 * micro, prompt, response, cfg.vocab_size)
        counts = Counts.of(tb.response_mask_BxT)
        hp = ActorHParams(temperature=1.0, logprob_chunk=1024, on_policy=True)
        fn = jax.jit(actor_grads, static_argnames=("graphdef", "hp"))
        stack = tb.split_rows(micro)  # 2 micro-batches of `micro` rows: accumulation included
        try:
            t0 = time.perf_counter()
            jax.block_until_ready(fn(params, stack, counts, graphdef=graphdef, hp=hp))
            compile_s = time.perf_counter() - t0
            sec = time_call(functools.partial(fn, params, stack, counts, graphdef=graphdef, hp=hp))
        except Exception as e:
            rows.append([impl, f"error: {type(e).__name__}: {str(e)[:100]}", "", "", "", ""])
            continue
        e, v, layers = cfg.hidden_size, cfg.vocab_size, cfg.num_layers
        n_params = sum(int(np.prod(x.shape)) for x in jax.tree.leaves(params))
        body = n_params - e * v  # tied: the embedding table is the head
        tokens = 2 * micro * t
        attn = 4 * layers * cfg.num_heads * cfg.head_dim * t * t / 2 * 2 * micro  # causal fwd
        flops = 6 * tokens * body + 6 * 2 * micro * response * e * v + 3 * attn
        mfu = flops / sec / (peak * 1e12)
        out[impl] = dict(s=sec, tok_s=tokens / sec, tflops=flops / sec / 1e12, mfu=mfu,
                         compile_s=compile_s)  # fmt: skip
        rows.append(
            [impl, f"{sec * 1e3:.1f}", f"{tokens / sec:.0f}", f"{flops / sec / 1e12:.1f}",
             f"{mfu:.1%}", f"{compile_s:.0f}"]
        )  # fmt: skip
        print(rows[-1], flush=True)
    print(
        f"\n{shape}: f32 master weights, bf16 compute, remat none, 2 x {micro} rows x "
        f"(prompt {prompt} + response {response}), LM head at response positions\n"
    )
    print(markdown(["attention", "ms/update", "tokens/s", "TFLOP/s", "MFU", "compile s"], rows))
    return out


def attention_tables(peak, bw, budget: Budget, smoke: bool) -> dict:
    seqs, dims, ctx = ([128], [64], [256]) if smoke else ([1024, 4096], [128], [4096, 16384])
    deadline = time.perf_counter() + min(75.0, max(10.0, budget.left() - 60))
    train = bench_training(seqs, dims, peak, deadline)
    print(markdown(["seq", "D", "BxH/K", "pass", "impl", "ms", "TFLOP/s", "% peak"], train))
    dec = bench_decode(ctx, 16, bw, deadline)
    print(markdown(["context", "BxH/K", "impl", "us/step", "floor us", "vs floor"], dec))
    return {"training": train, "decode": dec}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", default=".", help="folder for gpu_check.json")
    p.add_argument("--budget-s", type=float, default=420.0)
    p.add_argument("--smoke", action="store_true", help="tiny shapes (any machine)")
    p.add_argument("--skip", default="", help="comma-separated sections not to run")
    args = p.parse_args(argv)
    budget = Budget(args.budget_s)
    SKIP.update(x for x in args.skip.split(",") if x)
    workdir = tempfile.mkdtemp(prefix="gpu_check_")
    results: dict = {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "devices": [f"{d.device_kind} ({d.platform})" for d in jax.devices()],
        "versions": {"jax": jax.__version__, "numpy": np.__version__},
    }
    try:
        smi = ["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.sm"]
        results["nvidia_smi"] = subprocess.run(
            [*smi, "--format=csv,noheader"], capture_output=True, text=True, timeout=20
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        results["nvidia_smi"] = None
    print(json.dumps({k: results[k] for k in ("date", "devices", "versions", "nvidia_smi")}))
    s = args.smoke
    section(results, "ceilings", budget, 0, ceilings, s)
    peak = results["ceilings"].get("peak_tflops", 790.0)
    bw = results["ceilings"].get("bandwidth_gbs", 4300.0)
    section(results, "kernels", budget, 30, kernel_checks, s)
    section(results, "agree", budget, 60, agreement, workdir, s)
    small, mid, big = ("tiny-llama", "tiny-qwen2", "tiny-qwen2") if s else (
        "smollm2-135m", "qwen2.5-0.5b", "qwen2.5-1.5b")  # fmt: skip
    section(results, "engine_small", budget, 60, engine_vs_hf, workdir, small,
            [1, 8] if s else [1, 32, 128], 16 if s else 128, peak, bw)  # fmt: skip
    impls = ["xla", "pallas"] if s else ["xla", "pallas", "cudnn"]
    shape_args = (2, 32, 16) if s else (8, 512, 512)
    section(results, "train", budget, 90, train_mfu, workdir, mid, impls, *shape_args, peak)
    section(results, "attention", budget, 60, attention_tables, peak, bw, budget, s)
    section(results, "engine_big", budget, 60, engine_vs_hf, workdir, big,
            [4] if s else [32, 128], 16 if s else 128, peak, bw)  # fmt: skip
    results["total_s"] = round(time.perf_counter() - budget.start, 1)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "gpu_check.json"), "w") as f:
        json.dump(results, f, indent=1, default=str)
    print(f"\ntotal {results['total_s']} s; wrote {args.out}/gpu_check.json")
    failed = results.get("kernels", {}).get("all_ok") is False
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
