"""Supervised fine-tuning on chat data, loss only on assistant tokens (`mimojax sft`).

MiMo's recipe starts RL from an SFT checkpoint: `mimojax sft` trains on rows of
{"messages": [{"role", "content"}, ...]} (JSONL) and writes WORKDIR/hf, an HF directory that a
run config's `model.name_or_path` can point at. Every assistant turn is a target; system, user
and tool turns are context only. A row with an `env` whose world has tools (a tool-use trace,
e.g. mimojax/envs/math/expert.py's) is rendered exactly as the tool agent renders it at RL time
(`ChatRenderer.tool_chat_ids`: that world's tool listing, the observation wrapping, the model's
own stop token), so the warm-up trains on the ids RL will sample and score.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from mimojax.algos.optimizer import OptimizerSettings, init_state, make_optimizer
from mimojax.data.prompts import DataError
from mimojax.models.loader import save_hf
from mimojax.models.logprobs import token_logprobs
from mimojax.models.tokenizer import encode_chat
from mimojax.observe.metrics import MetricsLogger
from mimojax.registry import UnknownNameError
from mimojax.rollout.batch import bucket
from mimojax.rollout.chat import ChatRenderer
from mimojax.rollout.tools import ToolSettings, make_tool_env


def read_chats(path: str) -> list[list[dict]]:
    """The `messages` of every row of a JSONL file; errors name the file and 1-based row."""
    return [row["messages"] for row in read_chat_rows(path)]


def read_chat_rows(path: str) -> list[dict]:
    """Every row of a chat JSONL file ({"messages", optional "env"}), checked; errors name the
    file and 1-based row."""
    chats = []
    with open(path) as f:
        for i, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise DataError(f"{path} row {i}: not JSON ({e.msg})") from None
            msgs = row.get("messages") if isinstance(row, dict) else None
            if not isinstance(msgs, list) or not msgs:
                raise DataError(f"{path} row {i}: needs a non-empty 'messages' list")
            for m in msgs:
                if not isinstance(m, dict) or not {"role", "content"} <= m.keys():
                    raise DataError(f"{path} row {i}: each message needs 'role' and 'content'")
            if not any(m["role"] == "assistant" for m in msgs):
                raise DataError(f"{path} row {i}: no assistant turn to learn from")
            env = row.get("env")
            if env is not None and not isinstance(env, str):
                raise DataError(f"{path} row {i}: 'env' must be a world name (string)")
            chats.append({"messages": msgs, "env": env, "where": f"{path} row {i}"})
    return chats


def tool_schemas(env: str) -> list[dict]:
    """The tool listing the tool agent gives `env`'s rows ([] for a world without tools)."""
    if env not in _SCHEMAS:
        try:
            tools = make_tool_env({"env": env}, ToolSettings())
        except UnknownNameError:  # no tools registered for this world: a plain chat
            _SCHEMAS[env] = []
        else:
            _SCHEMAS[env] = tools.schemas()
            tools.close()
    return _SCHEMAS[env]


_SCHEMAS: dict[str, list[dict]] = {}


def tokenize_row(
    tok, row: dict, renderer: ChatRenderer | None = None
) -> tuple[list[int], list[int]]:
    """(ids, loss_mask) of one chat row: a tool world's trace as the tool agent renders it, any
    other chat with the plain template (`tokenize_chat`)."""
    schemas = tool_schemas(row["env"]) if row.get("env") else []
    if not schemas:
        return tokenize_chat(tok, row["messages"])
    try:
        return (renderer or ChatRenderer(tok)).tool_chat_ids(row["messages"], schemas)
    except ValueError as e:
        raise DataError(f"{row.get('where', 'chat row')}: {e}") from None


def tokenize_chat(tok, messages: list[dict]) -> tuple[list[int], list[int]]:
    """(ids, loss_mask): mask 1 on the tokens of every assistant turn (incl. its end token)."""
    ids = encode_chat(tok, messages, add_generation_prompt=False)
    mask = [0] * len(ids)
    for i, m in enumerate(messages):
        if m["role"] != "assistant":
            continue
        start = len(encode_chat(tok, messages[:i], add_generation_prompt=True)) if i else 0
        end = len(encode_chat(tok, messages[: i + 1], add_generation_prompt=False))
        mask[start:end] = [1] * (end - start)
    return ids, mask


def sft_loss(params, ids_BxT, attn_BxT, mask_BxT, *, graphdef):
    """Mean negative log-likelihood over the assistant tokens of the batch."""
    model = nnx.merge(graphdef, params)
    logp_BxT, _ = token_logprobs(model, ids_BxT, attn_BxT)
    m = mask_BxT.astype(jnp.float32)
    return -(logp_BxT * m).sum() / jnp.maximum(m.sum(), 1.0)


def _step(state, ids, attn, mask, *, graphdef, optimizer):
    loss, grads = jax.value_and_grad(sft_loss)(state.params, ids, attn, mask, graphdef=graphdef)
    updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    return type(state)(params, opt_state, state.step + 1), loss, optax.global_norm(grads)


@dataclasses.dataclass(frozen=True)
class SftSettings:
    """What one fine-tuning run needs, as plain values (built from a run config by
    `mimojax.cli.sft.sft_settings`)."""

    train_files: tuple[str, ...]
    max_len: int  # chats longer than this many tokens are left out
    total_steps: int
    batch_size: int
    seed: int
    optimizer: OptimizerSettings


def train_chats(model, tok, settings: SftSettings, workdir: str, *, progress: bool = True) -> dict:
    """Trains `model` for total_steps batches of batch_size chats; writes WORKDIR/hf."""
    os.makedirs(workdir, exist_ok=True)
    files = list(settings.train_files)
    if not files:
        raise DataError("data.train_files is empty: give at least one chat .jsonl file")
    renderer = ChatRenderer(tok)
    examples = [tokenize_row(tok, row, renderer) for f in files for row in read_chat_rows(f)]
    limit = int(settings.max_len)
    kept = [e for e in examples if len(e[0]) <= limit]
    if not kept:
        raise DataError(
            f"every chat is longer than {limit} tokens (data.max_prompt_length + "
            "rollout.max_new_tokens)"
        )
    graphdef, state = nnx.split(model)
    total = int(settings.total_steps)
    optimizer = make_optimizer(settings.optimizer, total)
    train = init_state(nnx.to_pure_dict(state), optimizer)
    step_fn = jax.jit(
        functools.partial(_step, graphdef=graphdef, optimizer=optimizer), donate_argnums=(0,)
    )
    rng = np.random.default_rng(int(settings.seed))
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    B = int(settings.batch_size)
    metrics = {}
    with MetricsLogger(
        workdir, total_steps=total, jsonl=True, wandb_mode="disabled", progress=progress
    ) as logger:
        order = rng.permutation(len(kept))
        for step in range(1, total + 1):
            t0 = time.perf_counter()
            rows = [kept[order[(step * B + j) % len(kept)]] for j in range(B)]
            # coarse buckets: each new T recompiles the step (~10 s on 2 cores)
            T = bucket(max(len(r[0]) for r in rows), 64)
            ids = np.full((B, T), pad, np.int32)
            attn = np.zeros((B, T), np.int32)
            mask = np.zeros((B, T), np.int32)
            for b, (r_ids, r_mask) in enumerate(rows):
                ids[b, : len(r_ids)], attn[b, : len(r_ids)] = r_ids, 1
                mask[b, : len(r_ids)] = r_mask
            train, loss, norm = step_fn(train, ids, attn, mask)
            metrics = {
                "sft/loss": float(loss),
                "sft/grad_norm": float(norm),
                "perf/time_per_step": time.perf_counter() - t0,
            }
            logger.log(step, metrics)
    nnx.replace_by_pure_dict(state, train.params)
    save_hf(nnx.merge(graphdef, state), tok, os.path.join(workdir, "hf"))
    return metrics
