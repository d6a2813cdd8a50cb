"""Benchmark multi-turn prefill: carrying the KV across turns vs re-prefilling the whole history.

A tool agent's turn k sees the prompt, every earlier model turn and every tool observation.
Re-prefilling all of it each turn (what a stateless engine does) costs O(turns^2) prompt
tokens; continuing the previous turn's KV (`existing_prefix`) prefills only what is new: the
last sampled token and the observation. This script runs the same trajectories both ways on
SmolLM2-135M-Instruct through the real engine and async client:

  prompt        the code world's first task with its tools listed (~450 tokens)
  turn k        the model generates --turn-tokens greedily (real tokens), then a fixed
                observation of ~60 tokens (a tool response in the chat template) is appended
  trajectories  --trajectories of them at once (one asyncio task each), --turns turns each

and prints prefill tokens per trajectory, prefill seconds and trajectory wall seconds for
both modes, their ratio, and whether the generated tokens are identical (they must be).

    python scripts/bench_agent_prefill.py                 # 4 trajectories x 4 turns: ~1-2 min
    python scripts/bench_agent_prefill.py --turns 6 --json /tmp/prefill.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1]))  # repo root last: no shadowing

OBSERVATION = (
    "exit_code: 0\nstdout:\n3 passed, 1 failed\nFAILED: assert add(-4, 10) == 6 "
    "(got 14)\nstderr:\n(empty)"
)


async def _trajectory(client, renderer, tok, prompt_ids, sampling, turns, reuse, tag):
    from mimojax.engine.sampling import sample_key

    history, kv, cached, model_tokens, prefill, t0 = list(prompt_ids), None, 0, [], 0, time.time()
    for turn in range(turns):
        new = history[cached:] if kv is not None else history
        prefill += len(new)
        c = await client.generate(
            (tag, turn), new, sampling, keys=[sample_key(0, tag, turn)],
            existing_prefix=kv, retain_kv=reuse,
        )  # fmt: skip
        model_tokens.append(list(c.token_ids))
        stop = tok.decode(c.token_ids[-1:]) if c.token_ids else None
        history += list(c.token_ids) + renderer.observation_ids([OBSERVATION], stop)
        kv, cached = (c.kv, c.cached_length) if reuse else (None, 0)
    return model_tokens, prefill, time.time() - t0


def _run(engine, tok, prompt_ids, args, reuse: bool) -> dict:
    from mimojax.engine.client import AsyncEngineClient
    from mimojax.engine.sampling import SamplingParams
    from mimojax.rollout.chat import ChatRenderer

    sampling = SamplingParams(temperature=0.0, max_new_tokens=args.turn_tokens, ignore_eos=True)
    renderer = ChatRenderer(tok)

    async def main():
        client = AsyncEngineClient(engine)
        out = await asyncio.gather(*(
            _trajectory(client, renderer, tok, prompt_ids, sampling, args.turns, reuse, i)
            for i in range(args.trajectories)
        ))  # fmt: skip
        await client.aclose()
        return out, dict(client.scheduler.stats)

    t0 = time.time()
    results, stats = asyncio.run(main())
    return {
        "tokens": [r[0] for r in results],
        "prefill_tokens_per_trajectory": sum(r[1] for r in results) / len(results),
        "prefill_s": stats["prefill_s"],
        "trajectory_wall_s": sum(r[2] for r in results) / len(results),
        "total_s": time.time() - t0,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--turns", type=int, default=4)
    p.add_argument("--turn-tokens", type=int, default=32)
    p.add_argument("--trajectories", type=int, default=4)
    p.add_argument("--json", type=str, default=None)
    args = p.parse_args()

    from mimojax.engine import JaxEngine
    from mimojax.envs.code.tasks import DATA_DIR
    from mimojax.models.loader import load_model
    from mimojax.rollout.chat import ChatRenderer
    from mimojax.rollout.tools import ToolSettings, make_tool_env

    model, tok = load_model("smollm2-135m-instruct")
    row = json.loads((DATA_DIR / "code_train.jsonl").read_text().splitlines()[0])
    env = make_tool_env(row, ToolSettings())
    prompt = ChatRenderer(tok).prompt_ids([{"role": "user", "content": row["prompt"]}],
                                          env.schemas())  # fmt: skip
    env.close()
    budget = len(prompt) + args.turns * (args.turn_tokens + 80)
    engine = JaxEngine(
        model, tok, max_concurrent_decodes=args.trajectories,
        max_prefill_length=1 << (budget - 1).bit_length(), max_cache_length=2 * budget,
    )  # fmt: skip
    del model
    print(f"prompt {len(prompt)} tokens; {args.trajectories} trajectories x {args.turns} turns "
          f"x {args.turn_tokens} generated + {OBSERVATION.count(' ') + 20}-ish observation tokens",
          flush=True)  # fmt: skip
    _run(engine, tok, prompt, args, reuse=True)  # warm-up: compiles both paths' shapes
    _run(engine, tok, prompt, args, reuse=False)
    full = _run(engine, tok, prompt, args, reuse=False)
    kept = _run(engine, tok, prompt, args, reuse=True)
    rows = [("re-prefill history", full), ("continue the KV", kept)]
    print(f"{'mode':<20} {'prefill tok/traj':>17} {'prefill s':>10} {'traj wall s':>12}")
    for name, r in rows:
        print(f"{name:<20} {r['prefill_tokens_per_trajectory']:>17.0f} {r['prefill_s']:>10.2f} "
              f"{r['trajectory_wall_s']:>12.2f}")  # fmt: skip
    ratio = full["prefill_tokens_per_trajectory"] / kept["prefill_tokens_per_trajectory"]
    same = full["tokens"] == kept["tokens"]
    print(f"prefill tokens {ratio:.1f}x fewer; prefill seconds "
          f"{full['prefill_s'] / max(kept['prefill_s'], 1e-9):.1f}x fewer; "
          f"trajectory wall {full['trajectory_wall_s'] / kept['trajectory_wall_s']:.2f}x; "
          f"generated tokens identical: {same}")  # fmt: skip
    if args.json:
        out = {name: {k: v for k, v in r.items() if k != "tokens"} for name, r in rows}
        Path(args.json).write_text(json.dumps({**out, "identical_tokens": same}, indent=1))


if __name__ == "__main__":
    main()
