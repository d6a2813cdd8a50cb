"""Python run from the repo root: the top-level kernels/ and envs/ folders shadow nothing."""

import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def _run_from_repo_root(code: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return result.stdout


def test_transformers_llama_builds_from_repo_root():
    # transformers imports Hugging Face's `kernels`; the repo's kernels/ must not stand in for it.
    out = _run_from_repo_root(
        "from transformers import LlamaConfig, LlamaForCausalLM\n"
        "LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32,"
        " num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1))\n"
        "import kernels\n"
        "print(kernels.__file__)\n"
    )
    assert Path(out.strip()).parent != REPO_ROOT / "kernels"


def test_mimojax_kernels_public_names_from_repo_root():
    out = _run_from_repo_root(
        "from mimojax.kernels import (BlockSizes, decode_attention, default_block_sizes,"
        " flash_attention, reference_attention, reference_decode_attention,"
        " reference_visibility)\n"
        "import mimojax.kernels\n"
        "assert callable(flash_attention) and callable(decode_attention)\n"
        "assert callable(reference_attention) and callable(reference_visibility)\n"
        "print(mimojax.kernels.__name__)\n"
    )
    assert out.strip() == "mimojax.kernels"


def test_top_level_envs_is_not_the_repo_folder():
    out = _run_from_repo_root(
        "import importlib\n"
        "import mimojax.envs.math.grader\n"
        "try:\n"
        "    import envs\n"
        "    print(envs.__file__)\n"
        "except ModuleNotFoundError:\n"
        "    print('absent')\n"
    )
    assert out.strip() == "absent" or Path(out.strip()).parent != REPO_ROOT / "envs"
