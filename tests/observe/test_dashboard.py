"""The live dashboard in a real headless Chromium (Playwright on the system browser), its
incremental reads of metrics.jsonl, and the cost / restart numbers against hand-computed ones."""

import json
import os
import shutil
import threading

import pytest

from mimojax.observe.dashboard.panels import PANELS
from mimojax.observe.dashboard.server import make_server
from mimojax.observe.metrics import read_metrics, read_metrics_from, rows_by_step
from mimojax.observe.run_costs import cost_summary, eval_cost_points, restart_summary

INSTALL = (
    "the dashboard test drives the system Chromium: apt-get install -y chromium "
    "&& .venv/bin/pip install playwright (never `playwright install`)"
)

# ------------------------------------------------------------------ a small synthetic run
# 2 devices, 4 CPU cores, $3.60 per device-hour and $0.36 per core-hour: a device-second
# costs $0.001 and a CPU-second $0.0001. Steps take 20 s (gen 12, reward 3, update 4, 1 s
# other); evals take 10 s, at steps 0, 2 and 4 with accuracy 0.2, 0.5, 0.7.
INFO = {
    "model": "tiny",
    "devices": ["gpu:0", "gpu:1"],
    "cpus": 4,
    "cost": {"device_per_hour": 3.6, "cpu_per_hour": 0.36},
}
ACC = {0: 0.2, 2: 0.5, 4: 0.7}


# what a run with async rollouts and utilisation metrics adds (the "plain" run below)
ASYNC_EXTRA = {"async/dropped": 1.0, "perf/mfu": 0.3, "restarts/count": 0}


def train_line(s, **extra):
    return {
        "step": s,
        "critic/score/mean": 0.1 * s,
        "response_length/mean": 50.0 + s,
        "actor/entropy": 1.0,
        "actor/ppo_kl": 0.001,
        "timing_s/gen": 12.0,
        "timing_s/reward": 3.0,
        "timing_s/update_actor": 4.0,
        "timing_s/step": 20.0,
        "perf/time_per_step": 20.0,
        "perf/wall_s": 20.0 * s,
        "perf/throughput": 100.0,
        "reward/grader_cpu_s/sum": 2.0,
        "rollout/policy_version_lag": 0.0,
        **extra,
    }


def eval_fields(s):
    return {"val-core/math/acc/greedy": ACC[s], "timing_s/eval": 10.0}


def synthetic_lines(last=4):
    lines = [{"step": 0, "perf/wall_s": 0.0, **eval_fields(0)}]
    for s in range(1, last + 1):
        lines.append(train_line(s, **(eval_fields(s) if s in ACC else {})))
    return lines


def write_run(path, lines, info=INFO):
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "metrics.jsonl"), "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in lines)
    if info is not None:
        with open(os.path.join(path, "run_info.json"), "w") as f:
            json.dump(info, f)
    return str(path)


# ------------------------------------------------------------------ costs and restarts


def test_costs_by_hand():
    c = cost_summary(rows_by_step(synthetic_lines()), INFO, target=0.6)
    assert (c["devices"], c["cpus"], c["steps"]) == (2, 4, 4)
    assert c["billed_s"] == pytest.approx(4 * 20 + 3 * 10)  # 110 s
    assert c["phase_s"] == pytest.approx(
        {"gen": 48, "reward": 12, "update_actor": 16, "other": 4, "eval": 30}
    )
    assert c["device_s"]["gen"] == pytest.approx(96) and c["cpu_s"]["gen"] == pytest.approx(192)
    assert c["device_s_total"] == pytest.approx(220) and c["cpu_s_total"] == pytest.approx(440)
    assert c["usd_total"] == pytest.approx(0.22 + 0.044)
    assert c["usd_per_step"] == pytest.approx(40 * 0.001 + 80 * 0.0001)  # 0.048
    assert c["grader_cpu_s"] == pytest.approx(8)
    # 0.6 is first reached at step 4 (all 110 s); 0.5 at step 2 (10 + 2 * 20 + 10 = 60 s).
    assert c["to_target"]["step"] == 4 and c["to_target"]["usd"] == pytest.approx(0.264)
    half = cost_summary(rows_by_step(synthetic_lines()), INFO, target=0.5)["to_target"]
    assert half["step"] == 2 and half["billed_s"] == pytest.approx(60)
    assert half["usd"] == pytest.approx(120 * 0.001 + 240 * 0.0001)  # 0.144
    assert half["train_minutes"] == pytest.approx(40 / 60)
    assert cost_summary(rows_by_step(synthetic_lines()), INFO, 0.9)["to_target"] is None


def test_costs_unpriced_and_unrecorded():
    c = cost_summary(rows_by_step(synthetic_lines()), None)
    assert (c["devices"], c["cpus"], c["devices_known"], c["priced"]) == (1, 1, False, False)
    assert c["usd_total"] is None and c["usd_per_step"] is None
    assert c["device_s_total"] == pytest.approx(110)
    points = eval_cost_points(rows_by_step(synthetic_lines()), None)
    assert [p["step"] for p in points] == [0, 2, 4]
    assert [p["device_hours"] for p in points] == pytest.approx([10 / 3600, 60 / 3600, 110 / 3600])
    assert all(p["usd"] is None for p in points)


def test_restarts_logged_by_trainer():
    lines = synthetic_lines()
    logged = {"restarts/count": 1.0, "restarts/steps_redone": 3.0, "restarts/wall_s_lost": 45.5}
    for r in lines[3:]:
        r.update(logged)
    r = restart_summary(lines, INFO)
    assert (r["source"], r["count"], r["steps_redone"], r["wall_s_lost"]) == ("logged", 1, 3, 45.5)
    assert r["usd_lost"] == pytest.approx(45.5 * (0.002 + 0.0004))


def test_restarts_derived_from_step_numbers():
    # 1 2 3 | 2 3 4 | 4: two restarts, redoing steps 2-3 and then 4 (20 s each)
    lines = [train_line(s) for s in (1, 2, 3, 2, 3, 4, 4)]
    r = restart_summary(lines, INFO)
    assert (r["source"], r["count"], r["steps_redone"]) == ("derived from step numbers", 2, 3)
    assert r["wall_s_lost"] == pytest.approx(60)
    assert r["usd_lost"] == pytest.approx(60 * 2 * 0.001 + 60 * 4 * 0.0001)  # 0.144
    assert restart_summary(synthetic_lines(), INFO)["count"] == 0


def test_read_metrics_from_follows_appends(tmp_path):
    path = tmp_path / "metrics.jsonl"
    assert read_metrics_from(str(path), 0) == ([], 0)
    full = json.dumps({"step": 1, "a": 1.0}) + "\n"
    half = json.dumps({"step": 2, "a": 2.0})
    path.write_text(full + half[:7])  # the writer is mid-line
    rows, offset = read_metrics_from(str(path), 0)
    assert [r["step"] for r in rows] == [1] and offset == len(full)
    with open(path, "a") as f:
        f.write(half[7:] + "\n")
    rows, offset = read_metrics_from(str(path), offset)
    assert rows == [{"step": 2, "a": 2.0}] and offset == path.stat().st_size
    assert read_metrics(str(path)) == [{"step": 1, "a": 1.0}, {"step": 2, "a": 2.0}]
    path.write_text(full)  # a resume rewrote the file shorter
    with pytest.raises(EOFError):
        read_metrics_from(str(path), offset)
    path.write_text(full + json.dumps({"step": 2, "a": 20.0, "b": 1}) + "\n")  # ... and longer
    with pytest.raises(EOFError):
        read_metrics_from(str(path), offset)


def test_report_states_costs_and_restarts(tmp_path):
    from mimojax.observe.report import write_report

    page = open(write_report(write_run(tmp_path / "run", synthetic_lines()), target=0.5)).read()
    assert "Compute and cost" in page and "$0.048" in page and "$0.264" in page
    assert "step 2, 1.0 min billed, $0.144" in page and "0 (derived from step numbers)" in page


def test_cli_parses_dashboard():
    from mimojax.cli.main import build_parser

    args = build_parser().parse_args(["dashboard", "a", "b", "--port", "0", "--target", "0.6"])
    assert (args.workdirs, args.port, args.target, args.host) == (["a", "b"], 0, 0.6, "127.0.0.1")


# ------------------------------------------------------------------ the page in Chromium


@pytest.fixture(scope="module")
def browser():
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.fail(f"chromium not found: {INSTALL}")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail(f"playwright is not installed: {INSTALL}")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture
def dashboard(tmp_path):
    live = write_run(tmp_path / "live", synthetic_lines(last=3))
    queued = [
        train_line(s, **{"queue/depth": 2.0 + s, "async/staleness/mean": 0.5, **ASYNC_EXTRA})
        for s in (1, 2)
    ]
    plain = write_run(tmp_path / "plain", queued, info=None)
    server = make_server([live, plain], port=0, interval_s=0.2, target=0.6)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server, live
    server.shutdown()
    server.server_close()


def test_page_shows_panels_and_follows_appends(browser, dashboard):
    server, live = dashboard
    page = browser.new_page()
    errors, requests = [], []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: requests.append(r.url))
    page.goto(server.url)
    page.wait_for_function("document.getElementById('run-0').dataset.lastStep === '3'")
    page.wait_for_function("document.querySelectorAll('.panel[data-state=empty]').length === 0")
    states = {p["id"]: page.get_attribute(f"#panel-{p['id']}", "data-state") for p in PANELS}
    assert set(states.values()) == {"plot"}, states  # each panel has what one run logged
    for pid in ("reward", "compare_time", "compare_cost", "timing", "cost", "queues"):
        assert page.locator(f"#panel-{pid} .main-svg").count() > 0, pid
    # the live run logged no queue/*, no async/* and no restarts/*: said, not an error
    assert "not logged by: live" in page.inner_text("#panel-queues")
    assert "not logged by: live" in page.inner_text("#panel-restarts")
    summary = page.inner_text("#panel-summary")
    assert "$0.048" in summary and "rates not set" in summary  # live priced, plain not
    assert "not reached" in summary  # target 0.6: live is at 0.5 after step 2

    # a step appended while the page is open, written in two pieces like a live writer
    with open(os.path.join(live, "metrics.jsonl"), "a") as f:
        text = json.dumps(train_line(4, **eval_fields(4))) + "\n"
        f.write(text[:40])
        f.flush()
        page.wait_for_timeout(500)  # polls see half a line: nothing new yet, no error
        assert page.get_attribute("#run-0", "data-last-step") == "3"
        f.write(text[40:])
    page.wait_for_function("document.getElementById('run-0').dataset.lastStep === '4'")
    page.wait_for_function("document.getElementById('panel-summary').innerText.includes('$0.264')")
    n_points = page.evaluate(
        "document.querySelector('#panel-reward .plot').data.filter(t => t.name.startsWith('live'))"
        "[0].x.length"
    )
    assert n_points == 4
    # a resume rewrites the file shorter: the page starts that run over
    write_run(live, synthetic_lines(last=2))
    page.wait_for_function("document.getElementById('run-0').dataset.lastStep === '2'")
    assert page.inner_text("#error") == ""
    assert errors == []
    assert all(u.startswith(server.url) for u in requests), requests  # no CDN, no network
    page.close()


def test_page_without_metrics_says_not_logged(browser, tmp_path):
    server = make_server([str(tmp_path / "empty")], port=0, interval_s=0.2)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        page = browser.new_page()
        page.goto(server.url)
        page.wait_for_function("document.querySelectorAll('.panel[data-state=empty]').length === 0")
        for p in PANELS:
            assert page.get_attribute(f"#panel-{p['id']}", "data-state") == "not-logged"
            assert "not logged" in page.inner_text(f"#panel-{p['id']}")
        page.close()
    finally:
        server.shutdown()
        server.server_close()


def test_cli_serves_page_plotly_and_polls(tmp_path):
    import subprocess
    import sys
    import urllib.request

    run = write_run(tmp_path / "run", synthetic_lines())
    cmd = [
        sys.executable,
        "-m",
        "mimojax.cli.main",
        "dashboard",
        run,
        "--port",
        "0",
        "--target",
        "0.5",
    ]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    try:
        seen = [proc.stderr.readline() for _ in range(1)]
        while not seen[-1].startswith("dashboard:") and seen[-1] and len(seen) < 100:
            seen.append(proc.stderr.readline())  # warnings from imports may come first
        line = seen[-1]
        assert line.startswith("dashboard: http://127.0.0.1:"), seen
        url = line.split()[1]
        page = urllib.request.urlopen(url).read().decode()
        assert '<script src="/plotly.min.js">' in page and "cdn" not in page.lower()
        js = urllib.request.urlopen(url + "plotly.min.js").read()
        assert len(js) > 1_000_000 and b"plotly" in js[:2000].lower()
        poll = json.loads(urllib.request.urlopen(url + "api/poll?c=-1:0").read())
        (got,) = poll["runs"]
        assert got["total"] == 5 and got["summary"]["costs"]["to_target"]["step"] == 2
    finally:
        proc.terminate()
        proc.wait(timeout=10)
