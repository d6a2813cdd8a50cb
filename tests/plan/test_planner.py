"""`mimojax plan`: memory against XLA's own buffer assignment, parameter counts against the
published model configs, the hardware ladder's rows, the CLI table and its errors.

The XLA comparisons compile the real jitted actor update of three tiny single-device configs
and one on 8 fake CPU devices (abstract arrays, nothing allocated): ~6 s of CPU each, 15-20 s
wall on 2 busy cores, so three of them are marked `slow` (make test runs them; `-m "not slow"`
keeps this file near 20 s). The rest is arithmetic.
"""

import pytest

from mimojax.cli import main as cli
from mimojax.config.loader import ConfigError, load_config
from mimojax.models.architectures import KNOWN_ARCHITECTURES
from mimojax.plan import memory as pm
from mimojax.plan import run_shape as pl
from mimojax.plan.from_config import plan, shape_from_config

QWEN = "configs/grpo_qwen.py"
SLOW = pytest.mark.slow  # ~6 s of CPU each, ~15-20 s wall on 2 shared cores


@pytest.mark.parametrize(
    "spec, overrides",
    [
        ("configs/grpo_tiny.py", []),  # llama, remat none, xla attention
        pytest.param(
            "configs/grpo_tiny.py:model=tiny-random-qwen3", ["model.remat=full"], marks=SLOW
        ),
        pytest.param(
            "configs/grpo_tiny.py:model=tiny-random-qwen2", ["model.remat=dots"], marks=SLOW
        ),
        pytest.param(  # sharded: the planner's fsdp gathers and tensor splits vs XLA's
            "configs/grpo_tiny.py:model=tiny-random-qwen2",
            ["model.remat=dots", "mesh.fsdp=4", "mesh.tensor=2", "sharding.preset=fsdp_tensor"],
            marks=SLOW,
        ),
    ],
)
def test_actor_update_memory_within_tolerance_of_xla(spec, overrides):
    import jax

    from mimojax.plan.xla_check import compare

    cfg = load_config(spec, overrides)
    n = 8 if any(o.startswith("mesh.") for o in overrides) else 1
    c = compare(cfg, jax.devices()[:n])
    assert c["xla_bytes"] > 100 * 2**20  # a real program, not an empty one
    assert abs(c["rel_error"]) <= pl.XLA_TOLERANCE, c


def _hand_count(v, e, layers, h, k, d, inter, tied, bias):
    """Parameters of a Qwen2/Llama decoder from its config.json fields, counted by hand."""
    attn = e * h * d + 2 * e * k * d + h * d * e + (h * d + 2 * k * d if bias else 0)
    per_layer = attn + 3 * e * inter + 2 * e
    return v * e * (1 if tied else 2) + layers * per_layer + e


@pytest.mark.parametrize(
    "name, fields, published",
    [
        ("qwen2.5-7b", (152064, 3584, 28, 28, 4, 128, 18944, False, True), 7.61e9),
        ("qwen2.5-72b", (152064, 8192, 80, 64, 8, 128, 29568, False, True), 72.7e9),
        ("qwen2.5-0.5b", (151936, 896, 24, 14, 2, 64, 4864, True, True), 0.49e9),
        ("smollm2-135m", (49152, 576, 30, 9, 3, 64, 1536, True, False), 134.5e6),
    ],
)
def test_parameter_counts_match_the_published_configs(name, fields, published):
    shape = pl.RunShape(
        model=KNOWN_ARCHITECTURES[name], lora_rank=0, lora_targets=(),
        mesh=(("data", 1), ("fsdp", 1), ("tensor", 1)), rules=(), micro_rows=1, micro_tokens=0,
        prompt_len=16, response_len=16, mini_samples=1, step_samples=1, prompts=1, ppo_epochs=1,
        logprob_chunk=0, slots=1, cache_len=32, reference=False, critic=False,
        old_logprobs=False,
    )  # fmt: skip
    total = pl.weights(shape).base_total
    assert total == _hand_count(*fields)
    assert abs(total / published - 1) < 0.01


def test_lora_adapter_count_matches_rank_times_fan_in_plus_fan_out():
    cfg = load_config(f"{QWEN}:model=qwen2.5-7b")
    shape, _ = shape_from_config(cfg, 1)
    e, h, k, d, i, layers = 3584, 28, 4, 128, 18944, 28
    # A [L, in, r] and B [L, r, out] on q, k, v, o, gate, up, down
    per_layer = (e + h * d) + 2 * (e + k * d) + (h * d + e) + 2 * (e + i) + (i + e)
    assert pl.weights(shape).lora_total == 64 * layers * per_layer


def _peak(spec, devices, overrides=()):
    return plan(load_config(spec, list(overrides)), devices)


def test_ladder_pilot_fits_one_24gb_card():
    p = _peak(f"{QWEN}:model=qwen2.5-0.5b", 1)
    assert p["lora_rank"] == 0 and p["cards"]["24GB"]["fits"]


def test_ladder_7b_lora_fits_one_80gb_card_but_not_24gb():
    p = _peak(f"{QWEN}:model=qwen2.5-7b", 1)
    assert p["lora_rank"] == 64
    assert p["cards"]["80GB"]["fits"] and not p["cards"]["24GB"]["fits"]
    # its weights alone: 7.6 B x 2 bytes, twice (the actor's base and the engine's copy)
    assert 14.0 < p["components_gib"]["weights"] < 14.5


def test_ladder_72b_lora_needs_8_cards_of_80gb():
    p = _peak(f"{QWEN}:model=qwen2.5-72b", 8)
    assert p["lora_rank"] == 64 and p["mesh"] == {"data": 1, "fsdp": 1, "tensor": 8}
    assert p["cards"]["80GB"]["fits"]
    choices = [a for a in p["cards"]["80GB"]["alternatives"] if a["lora_rank"] == 64]
    fits = {a["devices"] for a in choices if a["remat"] == "full" and a["fits"]}
    assert min(fits) == 8  # 1, 2 and 4 cards do not hold it
    # without LoRA, 8 cards are not enough either
    full = [a for a in p["cards"]["80GB"]["alternatives"] if a["lora_rank"] == 0]
    assert not any(a["fits"] for a in full if a["devices"] <= 8)


def test_remat_and_lora_order_the_update_memory():
    cfg = load_config(f"{QWEN}:model=qwen2.5-7b,lora=0", ["model.remat=none"])
    shape, _ = shape_from_config(cfg, 8)
    none = pm.actor_update_bytes(shape)
    full = pm.actor_update_bytes(shape.replace(model=shape.model.replace(remat="full")))
    lora = pm.actor_update_bytes(shape.replace(lora_rank=64, lora_targets=("q_proj",)))
    assert full < none and lora < none


def test_cli_prints_the_table(capsys):
    assert cli.main(["plan", "--config", f"{QWEN}:model=qwen2.5-7b", "--devices", "1"]) == 0
    out = capsys.readouterr().out
    assert "devices: 1, mesh data=1 fsdp=1 tensor=1" in out
    row = next(line for line in out.splitlines() if line.startswith("H100 SXM (80 GB)"))
    assert row.split()[5] == "yes"
    assert "LoRA r=64, remat=full" in out and "min 80GB" in out


@pytest.mark.parametrize(
    "argv, key",
    [
        (["--config", QWEN, "--config.model.name_or_path=gpt9"], "model.name_or_path"),
        (["--config", f"{QWEN}:model=qwen2.5-7b", "--devices", "0"], "--devices"),
        (["--config", f"{QWEN}:model=qwen2.5-7b", "--devices", "two"], "--devices"),
        (["--config", f"{QWEN}:model=qwen2.5-72b", "--devices", "4"], "mesh."),
        (["--config", f"{QWEN}:model=qwen9-1b"], "'model'"),
    ],
)  # fmt: skip
def test_bad_input_is_one_clear_error_naming_the_key(capsys, argv, key):
    assert cli.main(["plan", *argv]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and key in err, err


def test_unknown_model_raises_config_error():
    cfg = load_config(f"{QWEN}:model=qwen2.5-7b", ["model.name_or_path=/nowhere/llama-9"])
    with pytest.raises(ConfigError, match="model.name_or_path"):
        shape_from_config(cfg, 1)
