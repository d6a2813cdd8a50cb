"""The optional extras (mimojax/extras.py): the core path imports none of them, and each feature
used without its extra fails with one error naming `pip install 'mimojax[EXTRA]'`.

A package counts as absent when `sys.modules[name] is None` (then `import name` raises
ModuleNotFoundError and `importlib.util.find_spec(name)` is None), as on a core install.
"""

from __future__ import annotations

import importlib
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from mimojax.extras import EXTRAS, MissingExtraError, check_extra, require

ROOT = Path(__file__).resolve().parents[1]
BLOCKED = sorted({m for modules in EXTRAS.values() for m in modules} | {"starlette"})
FIX = "tests.reward_fixtures"


def block(monkeypatch, *names):
    for name in names:
        for loaded in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            monkeypatch.delitem(sys.modules, loaded)
        monkeypatch.setitem(sys.modules, name, None)


def item(env, response="x", truth="1", **extra):
    return {"env": env, "response": response, "ground_truth": truth, "extra": extra}


# ---------------------------------------------------------------- the helper


def test_require_names_the_extra_and_the_pip_command(monkeypatch):
    block(monkeypatch, "music21")
    with pytest.raises(MissingExtraError) as e:
        require("music21.converter", "music", "the music world")
    assert str(e.value) == (
        "the music world needs the [music] extra (music21 is not installed): "
        "pip install 'mimojax[music]'"
    )
    assert e.value.extra == "music" and isinstance(e.value, ImportError)
    assert require("json", "music", "x") is json


def test_require_lets_a_broken_installed_package_raise_its_own_error(tmp_path, monkeypatch):
    # An installed package missing one of *its* dependencies is not "the extra is missing".
    (tmp_path / "mimojax_fake_pkg").mkdir()
    (tmp_path / "mimojax_fake_pkg" / "__init__.py").write_text("import mimojax_fake_absent_dep\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError) as e:
        require("mimojax_fake_pkg", "serve", "x")
    assert not isinstance(e.value, MissingExtraError)
    assert e.value.name == "mimojax_fake_absent_dep"


def test_check_extra_lists_every_missing_module_without_importing(monkeypatch):
    block(monkeypatch, "skimage", "playwright")
    with pytest.raises(MissingExtraError, match=r"^the visual world needs the \[visual\] extra "):
        check_extra("visual", "the visual world")
    try:
        check_extra("visual", "the visual world")
    except MissingExtraError as e:
        assert "(skimage, playwright are not installed): pip install 'mimojax[visual]'" in str(e)
    check_extra("music", "the music world")  # installed in the test environment


def test_the_error_survives_the_reward_workers_pipe():
    e = pickle.loads(pickle.dumps(MissingExtraError("x needs the [ray] extra", "ray")))
    assert isinstance(e, MissingExtraError) and str(e) == "x needs the [ray] extra"
    assert e.extra == "ray"


# ---------------------------------------------------------------- the core path


def test_the_core_path_imports_without_any_extra():
    # A fresh interpreter where every extra's package is absent: the trainer, the CLI, the engine,
    # the reward pool and every world's registration import, the CLI parser builds, and the
    # demo's config validates.
    code = f"""
import sys
for name in {BLOCKED!r}:
    sys.modules[name] = None
import mimojax.train.trainer, mimojax.cli.main, mimojax.engine, mimojax.rewards.pool
import mimojax.eval.worlds, mimojax.observe.report, mimojax.observe.dashboard.data
import mimojax.envs.math, mimojax.envs.code, mimojax.envs.cyber, mimojax.envs.general
import mimojax.envs.music, mimojax.envs.visual
from mimojax.cli.main import build_parser
build_parser()
from mimojax.config.loader import load_config, validate
validate(load_config("configs/grpo_arith_smollm2.py"), 1)
from mimojax.rewards.pool import RewardPool
with RewardPool(num_workers=0) as pool:
    (r,) = pool.score([{{"env": "math", "response": "The answer is 12.", "ground_truth": "12",
                          "extra": {{}}}}])
assert r.valid and r.score == 1.0, r
print("core ok")
"""
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path, "JAX_PLATFORMS": "cpu"}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-4000:]
    assert out.stdout.strip().endswith("core ok")


# ---------------------------------------------------------------- [serve]


def test_serve_without_the_extra_is_one_line(monkeypatch, capsys):
    from mimojax.cli.main import main

    block(monkeypatch, "uvicorn")
    assert main(["serve", "--model", "no-such-model-it-is-not-loaded"]) == 1
    assert capsys.readouterr().err == (
        "mimojax serve needs the [serve] extra (uvicorn is not installed): "
        "pip install 'mimojax[serve]'\n"
    )


def test_the_server_module_without_fastapi(monkeypatch):
    block(monkeypatch, "fastapi", "starlette")
    monkeypatch.delitem(sys.modules, "mimojax.engine.server", raising=False)
    with pytest.raises(MissingExtraError) as e:
        importlib.import_module("mimojax.engine.server")
    assert str(e.value) == (
        "mimojax serve (mimojax.engine.server) needs the [serve] extra (fastapi is not "
        "installed): pip install 'mimojax[serve]'"
    )


def test_dashboard_without_plotly_is_one_line(monkeypatch, capsys, tmp_path):
    from mimojax.cli.main import main

    block(monkeypatch, "plotly")
    assert main(["dashboard", str(tmp_path), "--port", "0"]) == 1
    assert capsys.readouterr().err == (
        "mimojax dashboard needs the [serve] extra (plotly is not installed): "
        "pip install 'mimojax[serve]'\n"
    )


# ---------------------------------------------------------------- [ray]


def test_ray_pool_and_config_without_ray(monkeypatch):
    from mimojax.config.loader import ConfigError, load_config, validate
    from mimojax.rewards.ray_pool import RayRewardPool

    block(monkeypatch, "ray")
    with pytest.raises(MissingExtraError) as e:
        RayRewardPool(address="local")
    assert str(e.value) == (
        "reward.backend = 'ray' needs the [ray] extra (ray is not installed): "
        "pip install 'mimojax[ray]'"
    )
    with pytest.raises(ConfigError) as e:
        validate(load_config(str(ROOT / "configs" / "grpo_tiny.py"), ["reward.backend=ray"]), 1)
    assert (
        "  reward.backend: 'ray' needs the [ray] extra (ray is not installed): "
        "pip install 'mimojax[ray]'"
    ) in str(e.value).splitlines()


# ---------------------------------------------------------------- [music]


MUSIC_ERROR = (
    "the music world (envs/music) needs the [music] extra (music21 is not installed): "
    "pip install 'mimojax[music]'"
)
C44 = {"key": "C", "meter": "4/4", "bars": 4, "melody_range": [60, 81], "bass_range": [40, 62]}


def test_music_config_without_music21_names_the_key(monkeypatch):
    from mimojax.config.loader import ConfigError, load_config, validate

    block(monkeypatch, "music21")
    with pytest.raises(ConfigError) as e:
        validate(load_config(str(ROOT / "configs" / "grpo_music_smollm2.py")), 1)
    assert str(e.value).splitlines()[1:] == [
        "  data.train_files: the music world (env 'music') needs the [music] extra "
        "(music21 is not installed): pip install 'mimojax[music]'"
    ]


def test_default_env_names_its_key(monkeypatch, tmp_path):
    from mimojax.config.loader import ConfigError, load_config, validate

    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"prompt": "compose", "ground_truth": "", "extra": C44}) + "\n")
    overrides = [f"data.train_files=('{rows}',)", f"data.eval_files=('{rows}',)"]
    cfg = load_config(str(ROOT / "configs" / "grpo_tiny.py"), overrides)
    cfg.data.default_env = "music"
    validate(cfg, 1)  # music21 installed: no problem
    block(monkeypatch, "music21")
    with pytest.raises(ConfigError, match=r"  data.default_env: the music world \(env 'music'\)"):
        validate(cfg, 1)


def test_music_grader_without_music21_stops_the_pool(monkeypatch):
    # Not an invalid result per item (counted and ignored), not a silent zero: the run stops.
    from mimojax.rewards.pool import RewardPool

    block(monkeypatch, "music21")
    with RewardPool(num_workers=0) as pool:
        with pytest.raises(MissingExtraError) as e:
            pool.score([item("music", "no abc here", "t", **C44)])  # would score 0 unparsed
    assert str(e.value) == MUSIC_ERROR


def test_music_tool_without_music21_raises_instead_of_observing(monkeypatch):
    from mimojax.rollout.tools import ToolSettings, make_tool_env

    env = make_tool_env({"env": "music", "extra": C44}, ToolSettings())
    block(monkeypatch, "music21")
    with pytest.raises(MissingExtraError, match=r"\[music\] extra"):
        env.call_sync("check_piece", {"abc": "X:1\nK:C\nCDEF|"})


@pytest.mark.parametrize("workers", [0, 1])
def test_a_grader_missing_its_extra_surfaces_through_the_workers(workers, monkeypatch):
    # The worker processes do not share this process's sys.modules: a fixture grader requires
    # a module that is absent everywhere.
    monkeypatch.setenv("PYTHONPATH", str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    monkeypatch.syspath_prepend(str(ROOT))
    from mimojax.rewards.pool import RewardPool

    with RewardPool(num_workers=workers, timeout_s=30) as pool:
        assert pool.score([item("math", "The answer is 1.", "1")])[0].score == 1.0
        with pytest.raises(MissingExtraError) as e:
            pool.score([item("math", "1", "1"), item(f"{FIX}:needs_an_extra")])
    assert str(e.value) == (
        "the fixture world needs the [music] extra (mimojax_test_absent_module is not "
        "installed): pip install 'mimojax[music]'"
    )
    assert e.value.extra == "music"


# ---------------------------------------------------------------- [visual]


def test_visual_grader_without_its_extra(monkeypatch):
    from mimojax.envs.visual import grader

    block(monkeypatch, "playwright")
    row = {"reference_html": "<p>x</p>", "checks": [{"kind": "text", "selector": "p", "text": "x"}]}
    with pytest.raises(MissingExtraError) as e:
        grader.grade("```html\n<p>x</p>\n```", "t", row)
    assert str(e.value) == (
        "the visual world (envs/visual) needs the [visual] extra (playwright is not "
        "installed): pip install 'mimojax[visual]'"
    )
    monkeypatch.setitem(sys.modules, "playwright", importlib.import_module("json"))  # "present"
    block(monkeypatch, "skimage")
    with pytest.raises(MissingExtraError, match=r"\(skimage is not installed\).*mimojax\[visual\]"):
        grader.ssim(grader.np.zeros((4, 4, 3)), grader.np.zeros((4, 4, 3)))


def test_visual_config_without_its_extra(monkeypatch):
    from mimojax.config.loader import ConfigError, load_config, validate

    block(monkeypatch, "skimage", "playwright")
    with pytest.raises(ConfigError) as e:
        validate(load_config(str(ROOT / "configs" / "grpo_visual_smollm2.py")), 1)
    assert (
        "  data.train_files: the visual world (env 'visual') needs the [visual] extra "
        "(skimage, playwright are not installed): pip install 'mimojax[visual]'"
    ) in str(e.value).splitlines()


def test_eval_env_checks_the_world_extra_before_generating(monkeypatch):
    from mimojax.cli import worlds as cli_worlds

    block(monkeypatch, "music21")
    loaded = []

    def fake_load(*a, **k):
        loaded.append(a)
        return object(), object(), "fake"

    import mimojax.cli.serve as cli_serve

    monkeypatch.setattr(cli_serve, "load_any_model", fake_load)
    args = type("A", (), {"model": "m", "workdir": None, "config": None, "dtype": "float32",
                          "pass_k": 0, "limit": 1, "reward_workers": 0,
                          "reward_timeout_s": 10.0})()  # fmt: skip
    report = cli_worlds.run_eval(args, {"music": "unused.jsonl"})
    assert report["worlds"]["music"] == {
        "error": "MissingExtraError: the music world needs the [music] extra (music21 is not "
        "installed): pip install 'mimojax[music]'"
    }


# ---------------------------------------------------------------- [gguf]


def test_gguf_tokenizer_conversion_without_torch(monkeypatch, tmp_path):
    from mimojax.models.tokenizer import tokenizer_from_gguf

    monkeypatch.setenv("MIMOJAX_CACHE", str(tmp_path / "cache"))  # nothing converted yet
    gguf_file = tmp_path / "model.gguf"
    gguf_file.write_bytes(b"GGUF")
    block(monkeypatch, "torch")
    with pytest.raises(MissingExtraError) as e:
        tokenizer_from_gguf(str(gguf_file))
    assert str(e.value) == (
        "converting a GGUF file's tokenizer (transformers' GGUF reader) needs the [gguf] extra "
        "(torch is not installed): pip install 'mimojax[gguf]'"
    )
