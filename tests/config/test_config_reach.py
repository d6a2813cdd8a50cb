"""The run config stops at the builders: during a real run, only cli/, config/, the planner and
the role builders read its keys; everything below gets plain settings built once from it.

Every ConfigDict key read (attribute, item, `.get`) is attributed to the mimojax module whose
code made it, by walking the Python stack past ml_collections' own frames.
"""

import collections
import json
import sys
from pathlib import Path

import pytest
from ml_collections import ConfigDict

from mimojax.config.loader import load_config

ROOT = Path(__file__).resolve().parents[2]
PKG = str(ROOT / "mimojax") + "/"

# The modules allowed to read a run config: the entry points, the config package, the planner,
# and the role builders that turn it into plain settings (cli/sft.py builds the fine-tuning's).
READERS = ("cli/", "config/", "plan/", "train/roles.py", "train/role_settings.py",
           "train/lora_roles.py")  # fmt: skip


@pytest.fixture
def config_reads(monkeypatch):
    """A Counter of 'mimojax/<module>.py' -> run-config key reads made from that module."""
    reads: collections.Counter = collections.Counter()

    def reader() -> None:
        frame = sys._getframe(2)
        while frame is not None and (
            "ml_collections" in frame.f_code.co_filename or frame.f_code.co_filename == __file__
        ):
            frame = frame.f_back
        if frame is not None and frame.f_code.co_filename.startswith(PKG):
            reads[frame.f_code.co_filename[len(PKG) :]] += 1

    for name in ("__getattr__", "__getitem__", "get"):
        original = getattr(ConfigDict, name)

        def wrapped(self, *args, _original=original, **kwargs):
            reader()
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(ConfigDict, name, wrapped)
    return reads


def outside(reads) -> dict:
    return {m: n for m, n in reads.items() if not m.startswith(READERS)}


def test_the_tracer_sees_a_read_below_the_builders(config_reads):
    """The check can fail: a module below the builders that reads a key is caught."""
    from mimojax.sharding import mesh_shape

    mesh_shape(ConfigDict({"data": 1, "fsdp": -1, "tensor": 1}), 2)  # a ConfigDict, not a dict
    assert list(outside(config_reads)) == ["sharding.py"]


def test_a_training_run_reads_its_config_only_in_the_builders(config_reads, tmp_path):
    from mimojax.train.trainer import Trainer

    cfg = load_config("configs/grpo_tiny.py", ["trainer.total_steps=1"])
    Trainer(cfg, str(tmp_path / "run"), progress=False).train()
    assert config_reads["train/roles.py"] > 0 and config_reads["train/role_settings.py"] > 0
    assert outside(config_reads) == {}


def test_fine_tuning_reads_its_config_only_in_its_builder(config_reads, tmp_path):
    from mimojax.cli.sft import run_sft

    chats = tmp_path / "chats.jsonl"
    chat = [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]
    chats.write_text(json.dumps({"messages": chat}) + "\n")
    cfg = load_config("configs/grpo_tiny.py", [f"data.train_files=('{chats}',)",
                                               "trainer.total_steps=2"])  # fmt: skip
    run_sft(cfg, str(tmp_path / "run"), progress=False)
    assert config_reads["cli/sft.py"] > 0
    assert outside(config_reads) == {}


def test_rejection_sampling_reads_its_config_only_in_the_builders(config_reads, tmp_path):
    """The path the issue followed: `run_rft` samples, grades and fine-tunes; every key read
    is in cli/sft.py or the role builders (engine, sampling, agent, reward pool, prompts)."""
    from mimojax.cli.sft import run_rft
    from tests.sft.test_rft import _tiny_rft_config  # registers its scripted grader

    cfg = _tiny_rft_config(tmp_path)
    cfg.sft.rft.steps, cfg.sft.rft.num_prompts = 2, 2
    run_rft(cfg, str(tmp_path / "run"), progress=False, log=lambda m: None)
    assert config_reads["cli/sft.py"] > 0 and config_reads["train/roles.py"] > 0
    assert outside(config_reads) == {}
