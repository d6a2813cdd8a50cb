"""The tool-use warm-up before agentic RL: scripted-expert traces, then SFT on them.

MiMo starts agentic RL from a checkpoint distilled for tool use, not from the raw model. At our
scale the expert is a script: a world's `expert.py` (e.g. mimojax/envs/math/expert.py) writes
chats that call its tools in the exact format the tool agent parses, with the tools' real
outputs. The traces come from the world's own generators, never from the run's
`data.train_files`: the warm-up teaches the tool's use, not the answers.

The warm-up lives in WORKDIR/warmup: `expert_data.jsonl` (the traces), `hf/` (the fine-tuned
model RL starts from) and `done.json`, written last. A warm-up killed before `done.json` exists
is redone from scratch, and it is deterministic (traces from `seed`, SFT order from `seed`), so
the model RL starts from is bitwise the same as an uninterrupted run's.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import shutil

from mimojax.data.prompts import DataError

DONE = "done.json"


@dataclasses.dataclass(frozen=True)
class WarmupSettings:
    """`warmup.*` of a run config: the expert's world and the fine-tuning's size."""

    expert: str = ""  # the world whose scripted expert writes the traces ("math"); "" = none
    num_chats: int = 512  # traces written
    steps: int = 40  # fine-tuning steps
    batch_size: int = 8  # chats per step
    lr: float = 2e-5  # fine-tuning learning rate (constant after the run's warm-up schedule)
    seed: int = 0  # traces and their order
    eval_base: bool = True  # evaluate the base model first ("held-out before")

    @classmethod
    def from_dict(cls, d: dict) -> WarmupSettings:
        """Settings from the `warmup` group; an unknown key or a bad value names `warmup.KEY`."""
        fields = {f.name: f for f in dataclasses.fields(cls)}
        for key in d:
            if key not in fields:
                raise DataError(f"warmup.{key}: unknown key; known: {', '.join(fields)}")
        s = cls(**d)
        for key in ("num_chats", "steps", "batch_size"):
            if int(getattr(s, key)) < 1:
                raise DataError(f"warmup.{key} must be >= 1 (got {getattr(s, key)})")
        if not float(s.lr) > 0:
            raise DataError(f"warmup.lr must be > 0 (got {s.lr})")
        return s

    @property
    def enabled(self) -> bool:
        return bool(self.expert)


def expert_module(world: str):
    """`mimojax.envs.<world>.expert`; an error names `warmup.expert` and the worlds that have
    one."""
    try:
        return importlib.import_module(f"mimojax.envs.{world}.expert")
    except ModuleNotFoundError as e:
        if e.name not in (f"mimojax.envs.{world}", f"mimojax.envs.{world}.expert"):
            raise
    envs = os.path.dirname(importlib.import_module("mimojax.envs").__file__)
    have = sorted(w for w in os.listdir(envs) if os.path.exists(os.path.join(envs, w, "expert.py")))
    raise DataError(f"warmup.expert={world!r}: no scripted expert; worlds with one: {have}")


def write_expert_rows(settings: WarmupSettings, path: str) -> int:
    """Writes `settings.num_chats` expert traces of `settings.expert` as chat JSONL; the count."""
    rows = expert_module(settings.expert).expert_chats(int(settings.num_chats), int(settings.seed))
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    os.replace(tmp, path)
    return len(rows)


def read_done(warmup_dir: str) -> dict | None:
    """The finished warm-up's record, or None when it has not finished."""
    path = os.path.join(warmup_dir, DONE)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def write_done(warmup_dir: str, record: dict) -> None:
    """Marks the warm-up finished (atomically: a kill leaves it absent, never half-written)."""
    path = os.path.join(warmup_dir, DONE)
    with open(path + ".tmp", "w") as f:
        json.dump(record, f, indent=1, sort_keys=True)
    os.replace(path + ".tmp", path)


def restart(warmup_dir: str) -> None:
    """Clears an unfinished warm-up (killed part-way), so it is redone from the start."""
    if os.path.isdir(warmup_dir):
        shutil.rmtree(warmup_dir)
    os.makedirs(warmup_dir)
