"""The Ray reward pool against a real local cluster (`ray start --head`): the math and code worlds
grade as in the local pool, and every grader failure is an infra flag."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from mimojax.config.loader import ConfigError, load_config, validate
from mimojax.rewards.pool import RewardPool
from mimojax.rewards.ray_pool import RayRewardPool
from mimojax.sandbox.bwrap import ALLOW_UNSANDBOXED_ENV

try:
    import ray
except ImportError:
    ray = None

needs_ray = pytest.mark.skipif(ray is None, reason="needs Ray: pip install 'mimojax[ray]'")
ROOT = Path(__file__).resolve().parents[2]
FIX = "tests.reward_fixtures"
HERE = "tests.rewards.test_rewards_ray"


def allow_flag(response, ground_truth, extra):
    """A grader reporting whether the unsandboxed switch reached its worker."""
    return float(os.environ.get(ALLOW_UNSANDBOXED_ENV) == "1")


def item(env, response="x", truth="1", **extra):
    return {"env": env, "response": response, "ground_truth": truth, "extra": extra}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _live_members(pgid: int) -> list[int]:
    """Processes of group `pgid` that still run (zombies awaiting their reaper do not count)."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited while we looked
        if int(fields[2]) == pgid and fields[0] != "Z":
            pids.append(int(stat.parent.name))
    return pids


@pytest.fixture(scope="module")
def cluster():
    """A 2-CPU head node in its own process group and temp dir; everything in it is killed after."""
    # A short path: Ray's Unix sockets live under it (108-byte limit).
    temp_dir = tempfile.mkdtemp(prefix="mj-ray-", dir="/tmp")
    port = _free_port()
    env = dict(os.environ)
    env.pop(ALLOW_UNSANDBOXED_ENV, None)
    env.pop("RAY_ADDRESS", None)
    # Ray >= 2.5x turns token authentication on by default and keeps the token in ~/.ray, which a
    # head and a driver started at different times can disagree on; a loopback-only throwaway
    # cluster needs none. The driver (this process) must use the same mode as the head.
    env["RAY_AUTH_MODE"] = "disabled"
    saved_auth_mode = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "disabled"
    # Workers inherit the raylet's environment: they import tests.reward_fixtures from the repo.
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    ray_cli = Path(sys.executable).with_name("ray")
    cmd = [
        str(ray_cli), "start", "--head", "--block", f"--port={port}",
        f"--temp-dir={temp_dir}", "--num-cpus=2", "--object-store-memory=100000000",
        "--include-dashboard=false", "--disable-usage-stats", "--node-ip-address=127.0.0.1",
    ]  # fmt: skip
    # --block keeps `ray start` in the foreground; its own session holds the cluster's processes
    # (GCS, raylet, workers), so the teardown kills exactly those and nothing of anyone else's.
    head = subprocess.Popen(
        cmd, env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    address = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            if head.poll() is not None:
                pytest.fail(f"`ray start --head` exited with {head.returncode}")
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if time.monotonic() > deadline:
                pytest.fail("the Ray head did not open its port within 90 s")
            time.sleep(0.2)
        yield address
    finally:
        if ray.is_initialized():
            ray.shutdown()
        pgid = head.pid  # start_new_session: the group id is the leader's pid
        if _live_members(pgid):
            # GCS and raylet linger for ~20 s after SIGTERM; a throwaway cluster gets 3 s.
            os.killpg(pgid, signal.SIGTERM)
            deadline = time.monotonic() + 3
            while _live_members(pgid) and time.monotonic() < deadline:
                time.sleep(0.2)
                head.poll()
            if _live_members(pgid):
                os.killpg(pgid, signal.SIGKILL)
                time.sleep(0.5)
        head.wait(timeout=10)
        shutil.rmtree(temp_dir, ignore_errors=True)
        if saved_auth_mode is None:
            os.environ.pop("RAY_AUTH_MODE", None)
        else:
            os.environ["RAY_AUTH_MODE"] = saved_auth_mode
        assert not _live_members(pgid), f"Ray processes left behind: {_live_members(pgid)}"


@pytest.fixture(scope="module")
def pools(cluster):
    """(the Ray pool, a local pool), shared by the module's tests."""
    with RayRewardPool(address=cluster, timeout_s=2.0) as ray_pool, RewardPool(2, 30.0) as local:
        yield ray_pool, local


def _same(ray_results, local_results):
    assert [(r.score, r.valid, r.dims) for r in ray_results] == [
        (r.score, r.valid, r.dims) for r in local_results
    ]


@needs_ray
def test_math_world_grades_as_the_local_pool(pools):
    ray_pool, local = pools
    rows = [json.loads(line) for line in open(ROOT / "envs/math/data/arith_test.jsonl")][:8]
    items = []
    for row in rows:
        truth = row["ground_truth"]
        wrong = str(int(float(truth)) + 1)
        for response in (truth, f"So the answer is \\boxed{{{truth}}}.", f"The answer is {wrong}"):
            items.append(item("math", response, truth, **row["extra"]))
    items.append(item("math", "no number here", "3"))
    ray_results = ray_pool.score(items)
    _same(ray_results, local.score(items))
    assert all(r.valid for r in ray_results)
    assert [r.score for r in ray_results[:3]] == [1.0, 1.0, 0.0]
    assert all(r.seconds > 0 for r in ray_results)


@needs_ray
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="the code world's sandbox needs bwrap")
def test_code_world_reference_and_wrong_solutions_grade_as_the_local_pool(pools):
    from mimojax.envs.code.tasks import TASKS_BY_ID, split_rows
    from mimojax.sandbox import bwrap as sandbox

    if not sandbox.available():
        pytest.skip("bwrap cannot start a sandbox here")
    ray_pool, local = pools
    train, test = split_rows()
    items = []
    for row in (train + test)[::2]:  # every other task: the world's spread at half the time
        task = TASKS_BY_ID[row["ground_truth"]]
        for code in (task.reference, task.wrong):
            response = f"Here it is:\n```python\n{code}```"
            items.append(item("code", response, row["ground_truth"], **row["extra"]))
    ray_results = ray_pool.score(items)
    _same(ray_results, local.score(items))
    assert all(r.valid for r in ray_results)
    assert all(r.score == 1.0 for r in ray_results[::2])  # the references pass
    assert all(r.score < 1.0 for r in ray_results[1::2])  # the wrong ones do not
    assert all(r.cpu_seconds > 0 for r in ray_results)  # the sandboxes' CPU time is counted


@needs_ray
def test_hang_crash_and_bad_graders_are_infra_failures_and_the_pool_recovers(pools):
    ray_pool, _ = pools
    items = [
        item(f"{FIX}:hangs"),
        item(f"{FIX}:exits"),
        item(f"{FIX}:raises"),
        item(f"{FIX}:returns_nan"),
        item(f"{FIX}:returns_text"),
        item("math", "3", "3"),
        item("math", "x", "1", lock=threading.Lock()),  # cannot travel to a worker
    ]
    start = time.monotonic()
    results = ray_pool.score(items)
    assert time.monotonic() - start < 30
    assert [r.valid for r in results] == [False] * 5 + [True, False]
    assert results[0].error.startswith("timeout after 2s") and results[0].seconds >= 2.0
    assert "grader worker died" in results[1].error
    assert "RuntimeError: grader bug" in results[2].error
    assert "non-finite score" in results[3].error
    assert "returned str, not a score" in results[4].error
    assert results[5].score == 1.0
    assert results[6].error.startswith("cannot send item")
    assert all(r.score == 0.0 for r in results if not r.valid)
    # the killed workers are replaced: the next batch grades normally
    again = ray_pool.score([item("math", "10", "10")] * 4)
    assert [(r.score, r.valid) for r in again] == [(1.0, True)] * 4


@needs_ray
def test_unknown_env_and_malformed_items_raise_as_in_the_local_pool(pools):
    ray_pool, _ = pools
    with pytest.raises(ValueError, match="reward env 'nosuch'"):
        ray_pool.score([item("math", "1", "1"), item("nosuch")])
    with pytest.raises(ValueError, match="reward item 0: missing key 'env'"):
        ray_pool.score([{"response": "x", "ground_truth": "1"}])
    assert ray_pool.score([]) == []


@needs_ray
def test_the_unsandboxed_switch_reaches_ray_workers(pools, monkeypatch):
    ray_pool, _ = pools
    grader = f"{HERE}:allow_flag"
    assert ray_pool.score([item(grader)])[0].score == 0.0
    monkeypatch.setenv(ALLOW_UNSANDBOXED_ENV, "1")
    with RayRewardPool(timeout_s=30.0) as allowed:  # joins the Ray connection already made
        assert allowed.score([item(grader)])[0].score == 1.0
    assert ray.is_initialized()  # it did not own the connection, so it left it open


def test_arguments_are_checked(monkeypatch):
    with pytest.raises(ValueError, match="timeout_s"):
        RayRewardPool(timeout_s=0)
    with pytest.raises(ValueError, match="max_in_flight"):
        RayRewardPool(max_in_flight=0)
    with monkeypatch.context() as m:
        m.setitem(sys.modules, "ray", None)  # as if not installed
        with pytest.raises(ImportError, match=r"pip install 'mimojax\[ray\]'"):
            RayRewardPool(address="local")


def test_config_checks_the_backend(monkeypatch):
    tiny = str(ROOT / "configs" / "grpo_tiny.py")
    with pytest.raises(
        ConfigError, match=r"reward.backend: 'nope' is not one of \('local', 'ray'\)"
    ):
        validate(load_config(tiny, ["reward.backend=nope"]), 1)
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a)
    )
    want = r"reward.backend: 'ray' needs the \[ray\] extra.*pip install 'mimojax\[ray\]'"
    with pytest.raises(ConfigError, match=want):
        validate(load_config(tiny, ["reward.backend=ray"]), 1)


@needs_ray
def test_roles_builds_the_ray_pool_for_backend_ray(pools, cluster, monkeypatch):
    from mimojax.train.roles import _reward_pool

    monkeypatch.delenv(ALLOW_UNSANDBOXED_ENV, raising=False)  # _reward_pool sets it; restored
    tiny = str(ROOT / "configs" / "grpo_tiny.py")
    cfg = load_config(tiny, ["reward.backend=ray", f"reward.ray_address={cluster}"])
    with _reward_pool(cfg) as pool:
        assert isinstance(pool, RayRewardPool)
        assert pool.score([item("math", "2", "2")])[0].score == 1.0
