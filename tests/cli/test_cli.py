"""The `mimojax` command line: info in a subprocess, generate's parsing and wiring (fake model)."""

import re
import subprocess
import sys

import pytest

from mimojax.cli import main as cli


def run_cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "mimojax.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_info_prints_devices_mesh_and_versions():
    import jax

    proc = run_cli("info")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert f"device_count: {jax.device_count()}" in out
    assert re.search(r"^platform: \w+", out, re.M)
    assert re.search(r"^mesh: data=\d+ fsdp=\d+ tensor=\d+", out, re.M)
    assert "config check: ok" in out
    for dist in cli.VERSIONED:
        assert f"  {dist}: " in out


def test_info_reports_bad_override_key():
    proc = run_cli("info", "--config", "configs/grpo_tiny.py:runlocal", "--config.rollout.nn=8")
    assert proc.returncode == 1
    assert "unknown config key 'rollout.nn'; did you mean: rollout.n" in proc.stderr


def test_split_config_overrides():
    rest, overrides = cli.split_config_overrides(
        ["info", "--config", "c.py:x", "--config.rollout.n=8", "--config.model.dtype", "float32"]
    )
    assert rest == ["info", "--config", "c.py:x"]
    assert overrides == ["rollout.n=8", "model.dtype=float32"]


def test_generate_parser_defaults_and_repeats():
    args = cli.build_parser().parse_args(
        ["generate", "--model", "tiny-random-llama", "--prompt", "a", "--prompt", "b c"]
    )
    assert args.func is cli.cmd_generate
    assert args.model == "tiny-random-llama"
    assert args.prompt == ["a", "b c"]
    assert (args.max_new_tokens, args.temperature, args.seed) == (64, 0.0, 0)
    assert args.no_chat_template is False and args.dtype == "float32"


def test_generate_parser_options():
    args = cli.build_parser().parse_args(
        "generate --prompt p --max-new-tokens 8 --temperature 0.7 --seed 3 "
        "--no-chat-template --dtype bfloat16".split()
    )
    assert (args.max_new_tokens, args.temperature, args.seed) == (8, 0.7, 3)
    assert args.no_chat_template and args.dtype == "bfloat16"


@pytest.mark.parametrize(
    "argv",
    [
        ["generate"],  # --prompt is required
        ["generate", "--prompt", "p", "--temperature", "-1"],
        ["generate", "--prompt", "p", "--max-new-tokens", "0"],
        ["generate", "--prompt", "p", "--dtype", "float16"],
        ["generate", "--prompt", "p", "--config.rollout.n=2"],
        ["train"],  # --config is required
    ],
)
def test_generate_parser_rejects(argv, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    assert info.value.code == 2


class FakeTokenizer:
    eos_token_id = 2

    def apply_chat_template(self, messages, add_generation_prompt, tokenize):
        assert add_generation_prompt and tokenize
        ids = [1] + [ord(c) for c in messages[0]["content"]] + [9]
        return {"input_ids": ids, "attention_mask": [1] * len(ids)}  # transformers 5 style

    def encode(self, text):
        return [ord(c) for c in text]

    def decode(self, ids, skip_special_tokens):
        return "".join(chr(i) for i in ids)


def test_encode_prompt():
    tok = FakeTokenizer()
    assert cli.encode_prompt(tok, "hi") == [1, 104, 105, 9]
    assert cli.encode_prompt(tok, "hi", chat_template=False) == [104, 105]
    assert cli._as_id_list([[5, 6]]) == [5, 6]


def test_generate_runs_a_real_tiny_model(capsys):
    """In-process `mimojax generate` on the tiny random Llama: same tokens as the library."""
    from mimojax.engine import JaxEngine, SamplingParams, generate
    from mimojax.models import load_model
    from mimojax.models.tokenizer import encode_chat, stop_token_ids

    argv = ["generate", "--model", "tiny-random-llama", "--prompt", "ab", "--prompt", "c"]
    code = cli.main(argv + ["--max-new-tokens", "5", "--seed", "4", "--temperature", "1.0"])
    assert code == 0
    captured = capsys.readouterr()
    model, tok = load_model("tiny-random-llama")
    prompts = [encode_chat(tok, [{"role": "user", "content": p}]) for p in ("ab", "c")]
    engine = JaxEngine(model, tok, max_prefill_length=64, max_cache_length=80)
    sampling = SamplingParams(
        temperature=1.0, seed=4, max_new_tokens=5, stop_token_ids=stop_token_ids(tok)
    )
    want = [r[0].token_ids for r in generate(engine, prompts, sampling=sampling)]
    for i, ids in enumerate(want):
        assert f"### [{i}]" in captured.out
        assert tok.decode(ids, skip_special_tokens=True) in captured.out
    assert "loaded llama" in captured.err and "tokens in" in captured.err
