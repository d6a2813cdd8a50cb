"""The dashboard's HTTP server (stdlib): the page, plotly.js from the installed package, JSON polls.

GET /                the page          GET /api/config  panels, runs, poll interval, target
GET /dashboard.js    its script        GET /api/poll?c=GEN:SEEN,...&target=T  new lines per run
GET /plotly.min.js   plotly's bundled file (no network: never a CDN)
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

from mimojax.extras import MissingExtraError, installed, missing_message
from mimojax.observe.dashboard.data import RunFeed
from mimojax.observe.dashboard.panels import PANELS

STATIC = Path(__file__).with_name("static")
FEATURE = "mimojax dashboard"
PLOTLY_HINT = missing_message(FEATURE, "serve")


def plotly_js_path() -> Path:
    """The plotly.min.js bundled in the installed plotly package: MissingExtraError without
    plotly (the [serve] extra), FileNotFoundError if the package lacks the file."""
    if not installed("plotly"):
        raise MissingExtraError(missing_message(FEATURE, "serve", "plotly"), "serve")
    spec = importlib.util.find_spec("plotly")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(PLOTLY_HINT)
    path = Path(list(spec.submodule_search_locations)[0]) / "package_data" / "plotly.min.js"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing; {PLOTLY_HINT}")
    return path


def _finite(obj):
    """JSON without NaN/Infinity (the browser's JSON.parse rejects them): those become null."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def _parse_cursor(text: str, n: int) -> list[tuple[int, int]]:
    """ "GEN:SEEN,GEN:SEEN" per run; what is missing or malformed reads as (-1, 0): send all."""
    out = []
    parts = text.split(",") if text else []
    for i in range(n):
        try:
            gen, seen = parts[i].split(":")
            out.append((int(gen), int(seen)))
        except (IndexError, ValueError):
            out.append((-1, 0))
    return out


class DashboardServer(ThreadingHTTPServer):
    """Serves the page for `feeds`; `interval_s` is how often the page polls."""

    daemon_threads = True

    def __init__(self, address, feeds: list[RunFeed], interval_s: float, target: float | None):
        self.feeds, self.interval_s, self.target = feeds, float(interval_s), target
        self.plotly_js = plotly_js_path()
        super().__init__(address, _Handler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/"

    def config(self) -> dict:
        return {
            "panels": PANELS,
            "runs": [f.name for f in self.feeds],
            "interval_ms": int(1000 * self.interval_s),
            "target": self.target,
        }

    def poll(self, query: dict) -> dict:
        cursor = _parse_cursor(query.get("c", [""])[0], len(self.feeds))
        target = self.target
        if query.get("target", [""])[0]:
            try:
                target = float(query["target"][0])
            except ValueError:
                pass
        runs = [f.poll(g, s, target) for f, (g, s) in zip(self.feeds, cursor)]
        return {"runs": runs, "target": target}


class _Handler(BaseHTTPRequestHandler):
    server: DashboardServer

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass  # one line per poll would drown the terminal

    def _send(self, body: bytes, ctype: str, status: int = 200) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def _json(self, obj) -> None:
        try:
            body = json.dumps(obj, allow_nan=False)
        except ValueError:
            body = json.dumps(_finite(obj))
        self._send(body.encode(), "application/json")

    def do_GET(self):  # noqa: N802 - http.server's name
        url = urlparse(self.path)
        try:
            if url.path in ("/", "/index.html"):
                self._send((STATIC / "index.html").read_bytes(), "text/html; charset=utf-8")
            elif url.path == "/dashboard.js":
                self._send((STATIC / "dashboard.js").read_bytes(), "text/javascript")
            elif url.path == "/plotly.min.js":
                self._send(self.server.plotly_js.read_bytes(), "text/javascript")
            elif url.path == "/api/config":
                self._json(self.server.config())
            elif url.path == "/api/poll":
                self._json(self.server.poll(parse_qs(url.query)))
            else:
                self._send(b"not found", "text/plain", 404)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the page went away mid-answer


def make_server(
    workdirs: list[str],
    host: str = "127.0.0.1",
    port: int = 8050,
    interval_s: float = 2.0,
    target: float | None = None,
) -> DashboardServer:
    """A dashboard server bound to (host, port) for these runs; port 0 picks a free one."""
    names = [os.path.basename(os.path.normpath(w)) or w for w in workdirs]
    if len(set(names)) < len(names):  # runs/a/seed0 and runs/b/seed0: keep the parent too
        names = [os.path.join(*Path(os.path.abspath(w)).parts[-2:]) for w in workdirs]
    feeds = [RunFeed(w, n) for w, n in zip(workdirs, names)]
    return DashboardServer((host, port), feeds, interval_s, target)


def serve(workdirs: list[str], host: str, port: int, interval_s: float, target) -> None:
    """Serve until interrupted (Ctrl-C)."""
    server = make_server(workdirs, host, port, interval_s, target)
    print(f"dashboard: {server.url} ({len(workdirs)} run(s); Ctrl-C stops)", file=sys.stderr)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        thread.join()
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
        server.server_close()
