"""Prompt data for the RL trainer: JSONL/Parquet rows -> chat-templated prompt ids -> batches.

Each row holds ``prompt`` (a string, key configurable) or ``messages`` (chat turns), plus
``ground_truth``, ``env`` (the grader name), an optional ``extra`` dict and an optional
``agent`` (the agent loop that runs it: ``single_turn``, ``tool_agent``). The training
iterator is infinite, reshuffles every epoch and checkpoints as a small JSON dict, so
``--resume`` continues with exactly the batches an uninterrupted run would have seen.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

import grain

from mimojax.data.difficulty import DifficultyTracker
from mimojax.models.tokenizer import encode_chat

log = logging.getLogger(__name__)

JSONL_EXTS = (".jsonl",)
PARQUET_EXTS = (".parquet",)


class DataError(ValueError):
    """Bad prompt data: names the file and 1-based row where there is one."""


def read_rows(
    path: str, *, prompt_key: str = "prompt", default_env: str | None = None
) -> list[dict]:
    """Read and validate one JSONL or Parquet file into normalized row dicts."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise DataError(f"{path}: data file does not exist")
    if path.endswith(JSONL_EXTS):
        raw = _read_jsonl(path)
    elif path.endswith(PARQUET_EXTS):
        raw = _read_parquet(path)
    else:
        raise DataError(
            f"{path}: unknown data file extension (expected {', '.join(JSONL_EXTS + PARQUET_EXTS)})"
        )
    return [_normalize(row, f"{path} row {n}", f"{path}:{n}", prompt_key, default_env)
            for n, row in raw]  # fmt: skip


def _read_jsonl(path: str) -> list[tuple[int, Any]]:
    rows = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue  # blank lines (e.g. a trailing newline) are not rows
            try:
                rows.append((n, json.loads(line)))
            except json.JSONDecodeError as e:
                raise DataError(f"{path} row {n}: malformed JSON: {e}") from e
    return rows


def _read_parquet(path: str) -> list[tuple[int, Any]]:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except Exception as e:  # pyarrow raises several unrelated types for a bad file
        raise DataError(f"{path}: cannot read Parquet: {e}") from e
    return list(enumerate(table.to_pylist(), start=1))


def _normalize(row: Any, where: str, source: str, prompt_key: str, default_env) -> dict:
    if not isinstance(row, Mapping):
        raise DataError(f"{where}: expected a JSON object, got {type(row).__name__}")
    # Parquet fills absent columns with None, so None counts as missing throughout.
    prompt, messages = row.get(prompt_key), row.get("messages")
    if isinstance(prompt, list) and messages is None:
        prompt, messages = None, prompt  # verl-style files keep the chat under "prompt"
    if prompt is not None and messages is not None:
        raise DataError(f"{where}: has both {prompt_key!r} and 'messages'; keep one")
    out: dict[str, Any] = {}
    if prompt is not None:
        if not isinstance(prompt, str):
            raise DataError(
                f"{where}: {prompt_key!r} must be a string, got {type(prompt).__name__}"
            )
        out["prompt"] = prompt
    elif messages is not None:
        out["messages"] = _check_messages(messages, where)
    else:
        raise DataError(f"{where}: missing {prompt_key!r} and 'messages'")
    gt = row.get("ground_truth")
    if gt is None:
        raise DataError(f"{where}: missing 'ground_truth'")
    if isinstance(gt, bool) or not isinstance(gt, str | int | float):
        raise DataError(
            f"{where}: 'ground_truth' must be a string or number, got {type(gt).__name__}"
        )
    env = row.get("env")
    if env is None:
        env = default_env
    if env is None:
        raise DataError(f"{where}: missing 'env' (the grader name) and no default_env given")
    if not isinstance(env, str) or not env:
        raise DataError(f"{where}: 'env' must be a non-empty string, got {env!r}")
    extra = row.get("extra")
    if extra is None:
        extra = {}
    if not isinstance(extra, Mapping):
        raise DataError(f"{where}: 'extra' must be an object, got {type(extra).__name__}")
    agent = row.get("agent")
    if agent is not None and (not isinstance(agent, str) or not agent):
        raise DataError(f"{where}: 'agent' must be an agent loop name, got {agent!r}")
    out.update(ground_truth=str(gt), env=env, extra=dict(extra), source=source, agent=agent)
    return out


def _check_messages(messages: Any, where: str) -> list[dict]:
    if not isinstance(messages, list) or not messages:
        raise DataError(f"{where}: 'messages' must be a non-empty list of {{role, content}}")
    out = []
    for i, m in enumerate(messages):
        if not (isinstance(m, Mapping) and isinstance(m.get("role"), str)
                and isinstance(m.get("content"), str)):  # fmt: skip
            raise DataError(f"{where}: messages[{i}] must have string 'role' and 'content'")
        out.append({"role": m["role"], "content": m["content"]})
    return out


def chat_messages(row: Mapping, system_prompt: str | None = None) -> list[dict]:
    """The chat a row is rendered from, with ``system_prompt`` first unless one is present."""
    messages = (
        list(row["messages"]) if "messages" in row else [{"role": "user", "content": row["prompt"]}]
    )
    if system_prompt is not None and not any(m["role"] == "system" for m in messages):
        messages.insert(0, {"role": "system", "content": system_prompt})
    return messages


class PromptDataset:
    """All rows of some prompt files, tokenized, with over-long prompts dropped."""

    def __init__(
        self,
        files: str | Sequence[str],
        tokenizer,
        *,
        max_prompt_length: int,
        batch_size: int,
        prompt_key: str = "prompt",
        shuffle: bool = True,
        seed: int = 0,
        system_prompt: str | None = None,
        default_env: str | None = None,
        difficulty: dict | None = None,
    ):
        """`difficulty`: DifficultyTracker's keyword arguments to draw prompts by their graded
        history (mimojax/data/difficulty.py); None draws every prompt once per epoch."""
        self.difficulty = None if difficulty is None else dict(difficulty)
        files = [files] if isinstance(files, str | os.PathLike) else list(files)
        if not files:
            raise DataError("no data files given")
        if batch_size < 1 or max_prompt_length < 1:
            raise DataError(f"batch_size ({batch_size}) and max_prompt_length "
                            f"({max_prompt_length}) must be positive")  # fmt: skip
        if not 0 <= seed < 2**32:
            raise DataError(f"seed must be in [0, 2**32), got {seed}")
        self.files, self.batch_size, self.shuffle, self.seed = files, batch_size, shuffle, seed
        self.max_prompt_length = max_prompt_length
        self.num_dropped = 0
        self._rows: list[dict] = []
        longest = 0
        for path in files:
            for row in read_rows(path, prompt_key=prompt_key, default_env=default_env):
                messages = chat_messages(row, system_prompt)
                ids = encode_chat(tokenizer, messages)
                if len(ids) > max_prompt_length:
                    self.num_dropped += 1
                    longest = max(longest, len(ids))
                    continue
                self._rows.append({
                    "prompt_ids": ids, "ground_truth": row["ground_truth"], "env": row["env"],
                    "extra": row["extra"], "source": row["source"], "index": len(self._rows),
                    # Multi-turn agents re-render the chat with their tools listed.
                    "messages": messages, "agent": row["agent"],
                })  # fmt: skip
        if self.num_dropped:
            log.warning(
                "data: dropped %d of %d prompts longer than max_prompt_length=%d tokens "
                "(longest %d) from %s", self.num_dropped, self.num_dropped + len(self._rows),
                max_prompt_length, longest, ", ".join(map(str, files)),
            )  # fmt: skip
        if not self._rows:
            raise DataError(
                f"{', '.join(map(str, files))}: no prompts left ({self.num_dropped} dropped as "
                f"longer than max_prompt_length={max_prompt_length})"
            )

    def __len__(self) -> int:
        return len(self._rows)

    def all_rows(self) -> list[dict]:
        """Every kept example in file order (for evaluation)."""
        return [_copy(ex) for ex in self._rows]

    def iterator(self) -> PromptIterator:
        """An infinite, checkpointable iterator of batches of ``batch_size`` examples."""
        return PromptIterator(self)


def _copy(ex: dict, **kw) -> dict:
    # Callers may mutate what they get; the dataset's own rows must stay as read.
    return {**ex, "prompt_ids": list(ex["prompt_ids"]), "extra": dict(ex["extra"]), **kw}


class PromptIterator:
    """Batches over endless epochs; the position is one global index, saved as JSON."""

    def __init__(self, dataset: PromptDataset):
        self._ds = dataset
        n = len(dataset)
        # grain's MapDataset is random access: index epoch*n + k of range(n).shuffle(seed) is
        # element k of epoch e's own permutation (seeded seed+e), and range wraps past n. So
        # the whole checkpointable state is the global position; no iterator state to pickle.
        order = grain.MapDataset.range(n)
        if dataset.shuffle:
            order = order.shuffle(seed=dataset.seed)
        self._order = order
        self._pos = 0
        d = dataset.difficulty
        self.difficulty = None if d is None else DifficultyTracker(**d)

    def __iter__(self) -> PromptIterator:
        return self

    def __next__(self) -> list[dict]:
        n, batch, tracker = len(self._ds), [], self.difficulty
        while len(batch) < self._ds.batch_size:
            pos, self._pos = self._pos, self._pos + 1
            index = int(self._order[pos])
            if tracker is None or tracker.accept(index, self._ds.seed, pos):
                batch.append(_copy(self._ds._rows[index], epoch=pos // n))
        return batch

    def record(self, trajs, results) -> dict[str, float]:
        """Graded samples into the difficulty history (no-op without difficulty sampling)."""
        if self.difficulty is None:
            return {}
        graded = zip(trajs, results, strict=True)
        return self.difficulty.record((t.example["index"], r.score, r.valid) for t, r in graded)

    def get_state(self) -> dict:
        """The position (and the difficulty history, when on) as a JSON-serializable dict."""
        n = len(self._ds)
        state = {"epoch": self._pos // n, "offset": self._pos % n, "seed": self._ds.seed,
                 "shuffle": self._ds.shuffle, "num_rows": n}  # fmt: skip
        if self.difficulty is not None:
            state["difficulty"] = self.difficulty.get_state()
        return state

    def set_state(self, state: Mapping) -> None:
        """Continue from a ``get_state`` dict; DataError if the data changed since."""
        mine = self.get_state()
        try:
            epoch, offset = int(state["epoch"]), int(state["offset"])
        except (KeyError, TypeError, ValueError) as e:
            raise DataError(f"data iterator state {dict(state)!r} is malformed: {e}") from e
        for key in ("num_rows", "seed", "shuffle"):
            if key in state and state[key] != mine[key]:
                raise DataError(
                    f"data iterator state has {key}={state[key]!r} but the data now has "
                    f"{key}={mine[key]!r}: the prompt files or data config changed since the "
                    "checkpoint, so the saved position means nothing"
                )
        if epoch < 0 or not 0 <= offset < mine["num_rows"]:
            raise DataError(f"data iterator state {dict(state)!r} is out of range")
        self._pos = epoch * mine["num_rows"] + offset
        if self.difficulty is not None:
            self.difficulty.set_state(state.get("difficulty", {}))
