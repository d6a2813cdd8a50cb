"""Config loading, locked overrides, config args and validate()."""

from pathlib import Path

import pytest
from ml_collections import ConfigDict

from mimojax.config.loader import (
    ConfigError,
    cast_value,
    flat_keys,
    load_config,
    parse_config_args,
    resolve_mesh_shape,
    sharding_overrides,
    split_spec,
    validate,
)

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
CONFIG_FILES = sorted(CONFIGS.glob("*.py"))
TINY = str(CONFIGS / "grpo_tiny.py")
BASE = str(CONFIGS / "base.py")


def tiny(*overrides):
    return load_config(TINY, overrides)


def problems(cfg, num_devices=1):
    with pytest.raises(ConfigError) as info:
        validate(cfg, num_devices=num_devices)
    return str(info.value)


# ---------------------------------------------------------------- loading


def test_base_loads_locked_and_complete():
    cfg = load_config(BASE)
    assert cfg.is_locked
    for group in (
        "model",
        "mesh",
        "sharding",
        "data",
        "rollout",
        "algorithm",
        "optimizer",
        "trainer",
        "logging",
        "checkpoint",
    ):
        assert isinstance(cfg[group], ConfigDict), group
    assert (cfg.mesh.data, cfg.mesh.fsdp, cfg.mesh.tensor) == (1, -1, 1)
    assert cfg.algorithm.adv_estimator == "grpo"
    assert cfg.algorithm.rollout_correction.rollout_is is None


def test_base_comments_every_knob():
    lines = (CONFIGS / "base.py").read_text().splitlines()
    knobs = [ln for ln in lines if ln.startswith("    ") and " = " in ln]
    knobs = [ln for ln in knobs if "ConfigDict()" not in ln and not ln.strip().startswith("cfg =")]
    uncommented = [ln for ln in knobs if "#" not in ln]
    assert not uncommented


@pytest.mark.parametrize("path", CONFIG_FILES, ids=lambda p: p.stem)
@pytest.mark.parametrize("num_devices", [1, 8])
def test_every_config_loads_and_validates(path, num_devices):
    cfg = load_config(str(path))
    assert cfg.is_locked
    assert validate(cfg, num_devices=num_devices) is cfg


EXPERIMENTS = [p for p in CONFIG_FILES if p.stem != "base"]


@pytest.mark.parametrize("path", EXPERIMENTS, ids=lambda p: p.stem)
def test_every_experiment_config_runlocal_and_docstring(path):
    cfg = load_config(f"{path}:runlocal")
    validate(cfg, num_devices=1)
    assert cfg.model.dtype == "float32"
    assert cfg.data.batch_size * cfg.rollout.n <= 16
    assert cfg.rollout.max_new_tokens <= 64
    doc = path.read_text()
    for word in ("Launch:", "Hardware:", "Expected:"):
        assert word in doc, f"{path.name} docstring lacks {word}"


def test_runlocal_shrinks_smollm2():
    full = load_config(str(CONFIGS / "grpo_smollm2.py"))
    local = load_config(str(CONFIGS / "grpo_smollm2.py") + ":runlocal")
    assert full.model.name_or_path == local.model.name_or_path == "smollm2-135m-instruct"
    assert local.data.batch_size < full.data.batch_size
    assert local.trainer.total_steps < full.trainer.total_steps
    assert local.logging.wandb.mode == "disabled"


def test_model_arg_and_bare_name_spec():
    cfg = load_config("grpo_tiny:model=tiny-random-qwen3,runlocal")
    assert cfg.model.name_or_path == "tiny-random-qwen3"


def test_split_spec():
    assert split_spec("configs/a.py:x=1,y") == ("configs/a.py", "x=1,y")
    assert split_spec("configs/a.py") == ("configs/a.py", None)
    assert split_spec("grpo_tiny:runlocal") == ("grpo_tiny", "runlocal")


def test_missing_config_file():
    with pytest.raises(ConfigError, match="not found.*grpo_tiny"):
        load_config("configs/nope.py")


# ---------------------------------------------------------------- overrides


def test_overrides_take_field_types():
    cfg = tiny(
        "rollout.n=8",
        "rollout.temperature=1",
        "rollout.top_p=0.9",
        "model.value_head=true",
        "algorithm.kl_ctrl.type=adaptive",
        "optimizer.betas=0.9,0.95",
        "rollout.stop_token_ids=(2, 3)",
        "data.train_files=a.jsonl,b.jsonl",
        "logging.wandb.entity=team",
        "algorithm.rollout_correction.rollout_rs_threshold=1.5",
    )
    assert cfg.rollout.n == 8 and isinstance(cfg.rollout.n, int)
    assert cfg.rollout.temperature == 1.0 and isinstance(cfg.rollout.temperature, float)
    assert cfg.rollout.top_p == 0.9
    assert cfg.model.value_head is True
    assert cfg.algorithm.kl_ctrl.type == "adaptive"
    assert cfg.optimizer.betas == (0.9, 0.95)
    assert all(isinstance(b, float) for b in cfg.optimizer.betas)
    assert cfg.rollout.stop_token_ids == (2, 3)
    assert cfg.data.train_files == ("a.jsonl", "b.jsonl")
    assert cfg.logging.wandb.entity == "team"
    assert cfg.algorithm.rollout_correction.rollout_rs_threshold == 1.5


def test_optional_field_back_to_none():
    cfg = tiny("algorithm.rollout_correction.rollout_is=token")
    assert cfg.algorithm.rollout_correction.rollout_is == "token"
    cfg = load_config(
        TINY,
        [
            "algorithm.rollout_correction.rollout_is=token",
            "algorithm.rollout_correction.rollout_is=None",
        ],
    )
    assert cfg.algorithm.rollout_correction.rollout_is is None


@pytest.mark.parametrize("text,expected", [("1", True), ("False", False), ("no", False)])
def test_bool_spellings(text, expected):
    assert cast_value("k", text, True, bool) is expected


def test_unknown_key_names_key_and_near_matches():
    with pytest.raises(ConfigError) as info:
        tiny("rollout.nn=8")
    msg = str(info.value)
    assert "'rollout.nn'" in msg
    assert "did you mean" in msg and "rollout.n" in msg and "rollout.top_p" in msg
    assert isinstance(info.value, KeyError) and isinstance(info.value, ValueError)


def test_unknown_key_finds_leaf_in_other_group():
    with pytest.raises(ConfigError, match=r"'rollout.clip_ratio_low'.*algorithm.clip_ratio_low"):
        tiny("rollout.clip_ratio_low=0.3")


def test_unknown_top_level_key_lists_groups():
    with pytest.raises(ConfigError, match=r"'zzz'.*algorithm.*rollout"):
        tiny("zzz=1")


def test_group_and_value_path_errors():
    with pytest.raises(ConfigError, match=r"'rollout' is a group.*rollout\.n"):
        tiny("rollout=3")
    with pytest.raises(ConfigError, match=r"'rollout\.n' is a value"):
        tiny("rollout.n.x=3")
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        tiny("rollout.n")


@pytest.mark.parametrize(
    "override,expected",
    [
        ("rollout.n=abc", "expects int"),
        ("rollout.n=2.5", "expects int"),
        ("rollout.top_p=high", "expects float"),
        ("model.logprob_chunk_size=many", "expects int"),
        ("optimizer.betas=a,b", "expects a tuple of float"),
    ],
)
def test_bad_cast_names_key_and_type(override, expected):
    with pytest.raises(ConfigError) as info:
        tiny(override)
    assert override.split("=")[0] in str(info.value)
    assert expected in str(info.value)


def test_locked_after_get_config():
    cfg = tiny()
    with pytest.raises(AttributeError):
        cfg.rollout.nn = 8


def test_flat_keys():
    keys = flat_keys(tiny(), include_groups=False)
    assert "rollout.n" in keys and "algorithm.kl_ctrl.horizon" in keys and "rollout" not in keys


# ---------------------------------------------------------------- config args


def test_parse_config_args():
    defaults = {"runlocal": False, "model": "m", "steps": 3}
    assert parse_config_args(None, defaults) == defaults
    assert parse_config_args("runlocal,steps=5,model=x", defaults) == {
        "runlocal": True,
        "model": "x",
        "steps": 5,
    }


def test_unknown_arg_key():
    with pytest.raises(ConfigError) as info:
        load_config(TINY + ":runlocl")
    msg = str(info.value)
    assert "'runlocl'" in msg and "runlocal" in msg and "grpo_tiny.py" in msg


def test_arg_errors():
    with pytest.raises(ConfigError, match="'model' needs a value"):
        parse_config_args("model", {"model": "m"})
    with pytest.raises(ConfigError, match="'steps' expects int"):
        parse_config_args("steps=x", {"steps": 3})
    with pytest.raises(ConfigError, match="unknown config arg 'x'"):
        load_config(BASE + ":x")


# ---------------------------------------------------------------- validate


def test_batch_not_divisible_by_data_parallel_devices():
    msg = problems(
        tiny("data.batch_size=3", "trainer.mini_batch_size=1", "trainer.micro_batch_size=4"),
        num_devices=8,
    )
    assert "data.batch_size * rollout.n" in msg and "mesh.data * mesh.fsdp" in msg


def test_group_estimator_needs_two_samples():
    msg = problems(tiny("rollout.n=1", "trainer.micro_batch_size=2"))
    assert "rollout.n" in msg and "'grpo'" in msg


def test_mini_batch_must_divide_batch():
    msg = problems(tiny("trainer.mini_batch_size=3", "trainer.micro_batch_size=4"))
    assert "trainer.mini_batch_size" in msg and "data.batch_size" in msg


def test_micro_batch_must_divide_mini_batch():
    msg = problems(tiny("trainer.micro_batch_size=3"))
    assert "trainer.micro_batch_size" in msg and "trainer.mini_batch_size * rollout.n" in msg


def test_mesh_product_must_equal_device_count():
    msg = problems(tiny("mesh.fsdp=2"), num_devices=8)
    assert "mesh.data * mesh.fsdp * mesh.tensor = 2" in msg and "8 devices" in msg
    msg = problems(tiny("mesh.tensor=3"), num_devices=8)
    assert "mesh.data * mesh.tensor = 3" in msg
    msg = problems(tiny("mesh.data=-1"), num_devices=8)
    assert "mesh.data, mesh.fsdp" in msg


def test_resolve_mesh_shape():
    assert resolve_mesh_shape(tiny("mesh.tensor=2").mesh, 8) == {"data": 1, "fsdp": 4, "tensor": 2}


@pytest.mark.parametrize(
    "override,key",
    [
        ("algorithm.clip_ratio_low=1.2", "algorithm.clip_ratio_low"),
        ("algorithm.clip_ratio_high=-0.1", "algorithm.clip_ratio_high"),
        ("algorithm.clip_ratio_c=0.5", "algorithm.clip_ratio_c"),
        ("rollout.temperature=-0.5", "rollout.temperature"),
        ("rollout.top_p=0", "rollout.top_p"),
        ("rollout.top_p=1.5", "rollout.top_p"),
        ("sharding.preset=tp", "sharding.preset"),
        ("sharding.overrides.embed=fsdp,tp", "sharding.overrides.embed"),
        ("model.dtype=fp16", "model.dtype"),
        ("model.param_dtype=float64", "model.param_dtype"),
        ("optimizer.schedule=step", "optimizer.schedule"),
        ("logging.wandb.mode=cloud", "logging.wandb.mode"),
        ("cost.device_per_hour=-1", "cost.device_per_hour"),
        ("cost.cpu_per_hour=nan", "cost.cpu_per_hour"),
    ],
)
def test_out_of_range_values(override, key):
    msg = problems(tiny(override))
    assert key in msg and "1 problem" in msg


def test_gae_needs_value_head():
    msg = problems(tiny("algorithm.adv_estimator=gae"))
    assert "model.value_head" in msg and "gae" in msg
    validate(tiny("algorithm.adv_estimator=gae", "model.value_head=true"), num_devices=1)


def test_kl_loss_and_kl_in_reward_exclusive():
    msg = problems(tiny("algorithm.use_kl_loss=true", "algorithm.use_kl_in_reward=true"))
    assert "algorithm.use_kl_loss" in msg and "algorithm.use_kl_in_reward" in msg


def test_all_problems_reported_one_per_line():
    cfg = tiny("rollout.temperature=-1", "model.dtype=fp16", "sharding.preset=x")
    lines = problems(cfg).splitlines()
    assert lines[0].startswith("invalid config (3 problems)")
    assert [ln.split(":")[0].strip() for ln in lines[1:]] == [
        "rollout.temperature",
        "model.dtype",
        "sharding.preset",
    ]


def test_sharding_overrides_match_sharding_rules():
    from mimojax.sharding import RULES_PRESETS, get_rules

    cfg = tiny(
        "sharding.overrides.embed=",
        "sharding.overrides.mlp=fsdp,tensor",
        "sharding.overrides.vocab=tensor",
    )
    assert sharding_overrides(cfg.sharding) == {
        "embed": None,
        "mlp": ("fsdp", "tensor"),
        "vocab": "tensor",
    }
    assert set(cfg.sharding.overrides.keys()) <= set(RULES_PRESETS["fsdp"])
    assert get_rules(cfg.sharding.preset, sharding_overrides(cfg.sharding))["mlp"] == (
        "fsdp",
        "tensor",
    )


def test_unknown_remat_policy():
    assert "model.remat: 'some'" in problems(tiny("model.remat=some"))


def test_algorithm_names_checked_against_registries():
    msg = problems(
        tiny(
            "algorithm.adv_estimator=grpoo",
            "algorithm.policy_loss=ppo_clip",
            "algorithm.kl_loss_type=k5",
            "algorithm.loss_agg_mode=mean",
        )
    )
    assert "algorithm.adv_estimator: unknown name 'grpoo'; registered:" in msg and "rloo" in msg
    assert "algorithm.policy_loss: unknown name 'ppo_clip'" in msg and "gspo" in msg
    assert "algorithm.kl_loss_type: unknown name 'k5'" in msg and "low_var_kl" in msg
    assert "algorithm.loss_agg_mode: unknown name 'mean'" in msg and "token-mean" in msg


def _estimators_with(**wanted):
    from mimojax.algos.registry import ADVANTAGE_ESTIMATORS

    return [
        name
        for name in sorted(ADVANTAGE_ESTIMATORS)
        if all(getattr(ADVANTAGE_ESTIMATORS.traits(name), k) == v for k, v in wanted.items())
    ]


def test_group_estimators_need_more_than_one_sample_per_prompt():
    group = _estimators_with(needs_groups=True)
    assert {"grpo", "rloo", "optimal_token_baseline"} <= set(group)
    for name in group:
        msg = problems(tiny(f"algorithm.adv_estimator={name}", "rollout.n=1"))
        assert "rollout.n" in msg and name in msg, name
    # Without groups, one sample per prompt is fine.
    cfg = tiny(
        "algorithm.adv_estimator=reinforce_plus_plus", "rollout.n=1", "trainer.micro_batch_size=2"
    )
    validate(cfg, num_devices=1)


@pytest.mark.parametrize("name", ["remax", "optimal_token_baseline", "tir_optimal_token_baseline"])
def test_every_registered_estimator_is_accepted_by_the_trainer_checks(name):
    # These used to be rejected as "unsupported by the trainer"; every estimator now runs there.
    validate(tiny(f"algorithm.adv_estimator={name}"), num_devices=1)


def test_value_head_only_with_an_estimator_that_uses_values():
    assert _estimators_with(needs_values=True) == ["gae"]
    msg = problems(tiny("algorithm.adv_estimator=grpo", "model.value_head=true"))
    assert "model.value_head" in msg and "'grpo'" in msg


def test_config_and_config_validate_have_no_cycle():
    import ast

    import mimojax.config.validate as cv

    tree = ast.parse(Path(cv.__file__).read_text())
    imported = {
        node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
    }
    assert "mimojax.config.loader" not in imported
    assert validate is cv.validate and resolve_mesh_shape is cv.resolve_mesh_shape


def test_micro_batch_tokens_must_hold_a_full_row():
    with pytest.raises(ConfigError, match="trainer.micro_batch_tokens: must be >= 0"):
        validate(load_config("configs/grpo_tiny.py", ["trainer.micro_batch_tokens=-1"]), 8)
    with pytest.raises(ConfigError, match="cannot hold one full-length row"):
        validate(load_config("configs/grpo_tiny.py", ["trainer.micro_batch_tokens=100"]), 8)
    validate(load_config("configs/grpo_tiny.py", ["trainer.micro_batch_tokens=224"]), 8)


def test_split_roles_check_the_actor_mesh_against_its_own_devices():
    # 4 actor devices: 8 samples split over fsdp=4; mesh.fsdp=8 no longer fits
    validate(load_config("configs/grpo_tiny.py", ["roles.rollout.devices=(4,5,6,7)"]), 8)
    with pytest.raises(ConfigError, match="= 8, but there are 4 devices"):
        validate(
            load_config("configs/grpo_tiny.py", ["roles.rollout.devices=(4,5,6,7)", "mesh.fsdp=8"]),
            8,
        )
    with pytest.raises(ConfigError, match="roles.rollout.mesh.tensor"):
        validate(
            load_config(
                "configs/grpo_tiny.py",
                ["roles.rollout.devices=(5,6,7)", "roles.rollout.mesh.tensor=2"],
            ),
            8,
        )
