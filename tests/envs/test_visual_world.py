"""envs/visual: reference pages and bad answers rendered in the real headless chromium (one
browser shared by this module's in-process tests, one more in the reward pool's worker), DOM
checks against hand-written facts, JavaScript and network off, render failures as infra
failures."""

import asyncio
import http.server
import json
import threading

import pytest

from mimojax.data.prompts import read_rows
from mimojax.envs.visual.grader import DIMS, check_dom, find_html, grade
from mimojax.envs.visual.render import INSTALL_HINT, chromium_path
from mimojax.envs.visual.tasks import DATA_DIR, all_rows, split_rows
from mimojax.rewards.pool import RewardPool

ROWS = {r["ground_truth"]: r for r in all_rows()}
HEADER = ROWS["header-navy"]


@pytest.fixture(scope="module", autouse=True)
def _needs_chromium():
    try:
        chromium_path()
    except RuntimeError:
        pytest.fail(f"the visual world needs chromium: {INSTALL_HINT}")


def _fenced(html: str) -> str:
    return f"Here you go:\n```html\n{html}\n```"


def _grade(html: str, row=HEADER) -> dict:
    return grade(_fenced(html), row["ground_truth"], row["extra"])


def test_check_dom_hand_facts():
    box = {
        "text": "Daily News",
        "left": 0,
        "top": 0,
        "right": 320,
        "bottom": 60,
        "width": 320,
        "height": 60,
        "color": "rgb(255, 255, 255)",
        "background": "rgb(31, 58, 147)",
    }
    para = dict(box, text="Welcome!", top=72, bottom=90, background="rgba(0, 0, 0, 0)")
    facts = {"header": box, "h1": box, "p": para}
    checks = HEADER["extra"]["checks"]
    assert check_dom(checks, facts) == [True, True, True, True]
    assert check_dom(checks, {**facts, "p": dict(para, top=50)}) == [True, True, False, True]
    assert check_dom(checks, {**facts, "h1": None}) == [False, True, True, True]
    assert check_dom(checks, {**facts, "header": dict(box, background="rgb(0, 0, 0)")}) == [
        True,
        False,
        True,
        True,
    ]


def test_find_html():
    assert find_html(_fenced("<p>x</p>")) == "<p>x</p>\n"
    assert find_html("text then <!DOCTYPE html><p>x</p>") == "<!DOCTYPE html><p>x</p>"
    assert find_html("no page here") is None
    assert find_html("```python\nprint(1)\n```") is None


def test_reference_scores_one_and_partial_answers_score_between():
    ref = HEADER["extra"]["reference_html"]
    assert _grade(ref) == {"score": 1.0, "format": 1.0, "ssim": 1.0, "visual": 1.0, "dom": 1.0}
    # Right structure, wrong colour: the background check fails (3 of 4) and SSIM drops.
    red = _grade(ref.replace("#1f3a93", "#c0392b"))
    assert red["dom"] == 0.75 and 0.0 < red["visual"] < 1.0 and 0.375 < red["score"] < 0.875
    # Text only: no header, h1 or p (0 of 4 checks) and nothing like the picture.
    plain = _grade("<div>Daily News Welcome!</div>")
    assert plain["dom"] == 0.0 and plain["visual"] < 0.2
    assert red["score"] > plain["score"]


def test_rendering_leaves_the_callers_thread_free_for_asyncio():
    # Playwright's sync API marks its loop running in the thread that starts it; the renderer
    # keeps it on a private thread, so the tool-agent loop's asyncio.run still works here.
    assert _grade(HEADER["extra"]["reference_html"])["score"] == 1.0

    async def answer():
        return 42

    assert asyncio.run(answer()) == 42


def test_javascript_and_network_are_off():
    hits = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the stdlib's name
            hits.append(self.path)
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        ref = HEADER["extra"]["reference_html"]
        sneaky = ref.replace("<h1>Daily News</h1>", "<h1></h1>").replace(
            "</body>",
            f"<script>document.querySelector('h1').textContent='Daily News'</script>"
            f'<img src="{url}/x.png"><link rel="stylesheet" href="{url}/y.css"></body>',
        )
        out = _grade(sneaky)
    finally:
        server.shutdown()
    assert hits == []
    assert out["dom"] == 0.75  # the script did not run: the h1 stays empty


def test_data_files_are_the_generated_split():
    train, test = split_rows()
    assert (len(train), len(test)) == (14, 6)
    for name, rows in (("visual_train.jsonl", train), ("visual_test.jsonl", test)):
        assert [json.loads(line) for line in open(DATA_DIR / name)] == rows
        assert all(r["env"] == "visual" for r in read_rows(str(DATA_DIR / name)))
    assert {r["ground_truth"] for r in train}.isdisjoint(r["ground_truth"] for r in test)


def test_through_the_reward_pool_references_and_bad_answers(monkeypatch):
    _, test = split_rows()
    items = [
        {
            "env": "visual",
            "response": _fenced(r["extra"]["reference_html"]),
            "ground_truth": r["ground_truth"],
            "extra": r["extra"],
        }
        for r in test
    ]
    bad = ["I can't draw.", _fenced("<p>hello</p>")]
    items += [dict(items[0], response=b) for b in bad]
    items.append(dict(items[0], extra={}))  # a row without its reference: a data bug
    with RewardPool(num_workers=1, timeout_s=60.0) as pool:
        results = pool.score(items)
    for r in results[: len(test)]:
        assert r.valid and r.score == 1.0 and r.dims["dom"] == 1.0, r
    none, hello, no_ref = results[len(test) :]
    assert none.valid and none.score == 0.0 and none.dims == dict.fromkeys(DIMS, 0.0)
    assert hello.valid and hello.dims["format"] == 1.0 and hello.score < 0.2
    assert not no_ref.valid and "lacks" in no_ref.error
    # A browser that cannot start is an infra failure, not a zero.
    monkeypatch.setenv("MIMOJAX_CHROMIUM", "/nonexistent/chromium")
    with RewardPool(num_workers=1, timeout_s=60.0) as pool:
        (broken,) = pool.score(items[:1])
    assert not broken.valid and INSTALL_HINT in broken.error
