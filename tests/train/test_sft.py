"""SFT: assistant-only loss mask, the loss falls on a memorisable set, and the HF dir reloads."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mimojax.cli.sft import run_sft
from mimojax.config.loader import load_config
from mimojax.data.prompts import DataError
from mimojax.models.loader import load_model
from mimojax.models.tokenizer import encode_chat
from mimojax.observe.metrics import read_metrics
from mimojax.sft.chat_sft import read_chats, tokenize_chat

CHAT = [
    {"role": "user", "content": "What is 2 + 3?"},
    {"role": "assistant", "content": "5"},
    {"role": "user", "content": "And 4 + 4?"},
    {"role": "assistant", "content": "8"},
]


def test_mask_covers_exactly_the_assistant_turns():
    _, tok = load_model("tiny-random-llama")
    ids, mask = tokenize_chat(tok, CHAT)
    assert len(ids) == len(mask)
    masked_text = tok.decode([i for i, m in zip(ids, mask) if m])
    assert "5" in masked_text and "8" in masked_text
    assert "What is" not in masked_text and "And 4" not in masked_text
    # the context before the first answer is unmasked
    prefix = encode_chat(tok, CHAT[:1], add_generation_prompt=True)
    assert not any(mask[: len(prefix)]) and mask[len(prefix)] == 1


def test_bad_rows_name_file_and_row(tmp_path):
    f = tmp_path / "chats.jsonl"
    f.write_text(json.dumps({"messages": CHAT}) + "\n" + json.dumps({"messages": CHAT[:1]}) + "\n")
    with pytest.raises(DataError, match=r"chats.jsonl row 2: no assistant turn"):
        read_chats(str(f))


def test_sft_lowers_loss_and_writes_hf_dir(tmp_path):
    f = tmp_path / "chats.jsonl"
    f.write_text("".join(json.dumps({"messages": CHAT}) + "\n" for _ in range(4)))
    cfg = load_config(
        "configs/grpo_tiny.py",
        [f"data.train_files=('{f}',)", "trainer.total_steps=20", "optimizer.lr=1e-2"],
    )
    run_sft(cfg, str(tmp_path / "run"), progress=False)
    losses = [r["sft/loss"] for r in read_metrics(str(tmp_path / "run"))]
    assert len(losses) == 20 and losses[-1] < 0.5 * losses[0], losses
    model, _ = load_model(str(tmp_path / "run" / "hf"))
    assert np.isfinite(np.asarray(model.lm_head_weight())).all()
