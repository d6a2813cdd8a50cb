"""Tests for mimojax.models.tokenizer: GGUF, offline Qwen BPE, HF dirs, special-token resolution."""

import json
import re

import pytest

from mimojax.models import tokenizer as T
from mimojax.models.registry import smollm2_gguf_path

ROUND_TRIP = [
    "Hello, world!",
    "héllo wörld — naïve café, 世界你好, Привет, こんにちは 🙂🚀",
    "def f(x):\n    if x > 0:\n\treturn x ** 2  # square\n\n    return -1\n",
    "3.14159 + 2718 = 2721.14159; 1,000,000 items at $19.99",
    "  leading spaces\r\nand CRLF\n\n\ntrailing   ",
    "it's they're we'll I'd YOU'VE",
]
PARAGRAPH = (
    "The quick brown fox jumps over 13 lazy dogs in 2024. Über-naïve résumé: 東京タワー!\n"
    "```python\nfor i in range(10):\n    print(f'{i:03d}')  # ok\n```\n"
    "<|im_start|>user\nWhat's 7*6?<|im_end|>\n"
)


def _smollm2_gguf() -> str:
    # The registry's own lookup: fails with the install hint rather than skipping.
    return smollm2_gguf_path()


@pytest.fixture(scope="module")
def qwen():
    return T.qwen_tokenizer()


@pytest.fixture(scope="module")
def smol():
    return T.tokenizer_from_gguf(_smollm2_gguf())


@pytest.fixture(scope="module")
def ranks():
    return T.read_tiktoken_ranks(T.qwen_tiktoken_path())


def _tiny_tokenizer(pad: bool = False):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<unk>": 0, "<eos>": 1, "<pad>": 2, "a": 3, "<|im_end|>": 4}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    kw = {"pad_token": "<pad>"} if pad else {}
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, eos_token="<eos>", unk_token="<unk>", **kw
    )


def test_gguf_special_tokens_and_chat_template(smol):
    assert smol.eos_token == "<|im_end|>" and smol.eos_token_id == 2
    assert smol.pad_token_id is not None
    assert T.stop_token_ids(smol) == [2]
    text = smol.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
    )
    assert text == (
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
        "<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    )
    ids = T.encode_chat(smol, [{"role": "user", "content": "hi"}])
    assert isinstance(ids, list) and all(type(i) is int for i in ids)
    assert ids == smol.encode(text, add_special_tokens=False)
    assert ids[-4:] == smol.encode("<|im_start|>assistant\n", add_special_tokens=False)


def test_gguf_round_trip(smol):
    for s in ROUND_TRIP:
        assert smol.decode(smol.encode(s, add_special_tokens=False)) == s


def test_qwen_special_ids(qwen):
    assert len(qwen) >= 151643 + 3
    assert qwen.convert_tokens_to_ids("<|endoftext|>") == 151643
    assert qwen.convert_tokens_to_ids("<|im_start|>") == 151644
    assert qwen.convert_tokens_to_ids("<|im_end|>") == 151645
    assert qwen.eos_token_id == 151645 and qwen.pad_token_id == 151643
    assert T.stop_token_ids(qwen) == [151643, 151645]
    assert qwen.encode("<|im_start|>user<|im_end|>") == [151644, 872, 151645]
    assert qwen.decode([151644, 872, 151645], skip_special_tokens=True) == "user"


def test_qwen_variants_follow_hf_layouts():
    q3 = T.qwen_tokenizer("qwen3")
    assert len(q3) == 151669
    assert q3.convert_tokens_to_ids(["<tool_call>", "</tool_call>"]) == [151657, 151658]
    assert q3.convert_tokens_to_ids(["<think>", "</think>"]) == [151667, 151668]
    # Markers that HF's Qwen tokenizers treat as text stay in skip_special_tokens decodes.
    assert q3.decode(q3.encode("<think>x</think><|im_end|>"), skip_special_tokens=True) == (
        "<think>x</think>"
    )
    with pytest.raises(ValueError, match="unknown Qwen variant 'qwen9'"):
        T.qwen_tokenizer("qwen9")


def test_qwen_round_trip_and_digits(qwen):
    for s in ROUND_TRIP:
        assert qwen.decode(qwen.encode(s)) == s, s
    ids = qwen.encode("x = 1234567890")
    digits = [qwen.decode([i]) for i in ids[-10:]]
    assert digits == list("1234567890")


def test_qwen_matches_tiktoken_ranks(qwen, ranks):
    # Ranks are the ids: every whole-word token must encode to exactly its own rank.
    word = re.compile(r"^ ?(?:[A-Za-z]{3,}|[\u4e00-\u9fff]{2,})$")
    picked = []
    for token, rank in sorted(ranks.items(), key=lambda kv: kv[1])[1000::97]:
        text = token.decode("utf-8", errors="ignore")
        if text.encode() == token and word.match(text):
            picked.append((text, rank))
    assert len(picked) >= 50
    for text, rank in picked:
        assert qwen.encode(text) == [rank], text
    assert qwen.encode("Hello world") == [ranks[b"Hello"], ranks[b" world"]]


def test_qwen_matches_tiktoken_encoding(qwen, ranks):
    tiktoken = pytest.importorskip(  # tiktoken is in the test extra; skip only outside it
        "tiktoken", reason="tiktoken is not installed; the rank-level checks still ran"
    )
    special = {t: T.QWEN_SPECIAL_START_ID + i for i, t in enumerate(T.QWEN_SPECIAL_TOKENS["qwen2"])}
    enc = tiktoken.Encoding("qwen", pat_str=T.QWEN_PAT_STR, mergeable_ranks=ranks,
                            special_tokens=special)  # fmt: skip
    for s in [PARAGRAPH, *ROUND_TRIP]:
        assert qwen.encode(s) == enc.encode(s, allowed_special="all"), s


def test_save_pretrained_reloads_the_same(qwen, tmp_path):
    from transformers import AutoTokenizer

    qwen.save_pretrained(tmp_path)
    again = AutoTokenizer.from_pretrained(tmp_path, local_files_only=True)
    assert again.chat_template == qwen.chat_template
    assert (again.eos_token_id, again.pad_token_id) == (151645, 151643)
    for s in [PARAGRAPH, *ROUND_TRIP]:
        assert again.encode(s) == qwen.encode(s)
    chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}]
    assert T.encode_chat(again, chat) == T.encode_chat(qwen, chat)
    assert qwen.decode(T.encode_chat(qwen, chat, add_generation_prompt=False)) == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n"
    )

    # The same dir as an HF model dir: stop ids merge from config.json and generation_config.json.
    (tmp_path / "config.json").write_text(json.dumps({"eos_token_id": 151645}))
    (tmp_path / "generation_config.json").write_text(
        json.dumps({"eos_token_id": [151645, 151643], "pad_token_id": 151643})
    )
    hf = T.load_hf_tokenizer(str(tmp_path), generation_config={"eos_token_id": 151644})
    assert T.stop_token_ids(hf) == [151643, 151644, 151645]
    assert hf.pad_token_id == 151643


def test_finalize_merges_eos_and_resolves_pad():
    tok = T.finalize_tokenizer(_tiny_tokenizer(), [4, 1, 4], pad_token_id=2)
    assert T.stop_token_ids(tok) == [1, 4]
    assert tok.pad_token == "<pad>" and tok.pad_token_id == 2

    tok = T.finalize_tokenizer(_tiny_tokenizer())
    assert tok.pad_token_id == tok.eos_token_id == 1
    assert T.stop_token_ids(tok) == [1]

    tok = T.finalize_tokenizer(_tiny_tokenizer(pad=True), 4, pad_token_id=3)
    assert tok.pad_token_id == 2  # the tokenizer's own pad wins
    assert T.stop_token_ids(tok) == [1, 4]

    assert T.stop_token_ids(_tiny_tokenizer()) == [1]
    assert T.qwen_tokenizer("qwen2") is T.qwen_tokenizer()  # cached, not rebuilt


def test_finalize_without_eos_uses_config_ids():
    tok = _tiny_tokenizer()
    tok.eos_token = None
    tok = T.finalize_tokenizer(tok, [4, 1])
    assert tok.eos_token == "<|im_end|>" and tok.pad_token_id == 4
    assert T.stop_token_ids(tok) == [1, 4]
    bare = _tiny_tokenizer()
    bare.eos_token = None
    with pytest.raises(ValueError, match="no eos token"):
        T.finalize_tokenizer(bare)
    with pytest.raises(ValueError, match="outside vocab"):
        T.finalize_tokenizer(_tiny_tokenizer(), [99])


def test_missing_files_give_clear_errors(tmp_path):
    missing = tmp_path / "nope" / "model.gguf"
    with pytest.raises(FileNotFoundError, match=re.escape(str(missing))):
        T.tokenizer_from_gguf(str(missing))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        T.load_hf_tokenizer(str(tmp_path / "nope"))
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match=rf"{re.escape(str(tmp_path))}.*tokenizer\.json"):
        T.load_hf_tokenizer(str(tmp_path))


def test_gguf_tokenizer_disk_cache_and_lost_race(tmp_path, monkeypatch):
    monkeypatch.setenv("MIMOJAX_CACHE", str(tmp_path))
    first = T.tokenizer_from_gguf(_smollm2_gguf())
    root = tmp_path / "gguf_tokenizers"
    (entry,) = list(root.iterdir())
    again = T.tokenizer_from_gguf(_smollm2_gguf())  # from the cache this time
    text = "Hello world, 1234"
    assert again.encode(text) == first.encode(text)
    assert T.stop_token_ids(again) == T.stop_token_ids(first) == [2]
    # A second writer losing the rename race leaves the cache as it was, no temp dirs behind.
    T._save_atomically(first, {"eos": 2, "pad": 2}, str(entry), str(entry / "x.json"))
    assert list(root.iterdir()) == [entry]
