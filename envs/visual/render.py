"""Headless rendering for the visual world: the system chromium through Playwright, offline.

One browser per process, started at the first render and reused (a launch costs ~3 s, a page
~0.2 s). Playwright's sync API runs its own event loop in the thread that starts it and leaves
that loop marked running; so the browser lives on a private thread, and the caller's thread
stays free for `asyncio.run` (the tool-agent loop, the engine client). Each render gets a
fresh context with JavaScript off, no network (offline, every request aborted) and a fixed
viewport. A browser that cannot start or a render that fails or
times out raises: the reward pool counts it as an infra failure, not a zero.
"""

from __future__ import annotations

import concurrent.futures
import io
import os
import shutil

import numpy as np

from mimojax.extras import require

VISUAL = "the visual world (envs/visual)"  # scikit-image, Playwright: pip install 'mimojax[visual]'
VIEWPORT = (320, 240)
RENDER_TIMEOUT_MS = 10_000
INSTALL_HINT = "apt-get install -y chromium"
# The DOM facts the checks read, one entry per selector (null when nothing matches).
_DOM_JS = """(selectors) => selectors.map((s) => {
  const e = document.querySelector(s);
  if (!e) return null;
  const r = e.getBoundingClientRect();
  const st = getComputedStyle(e);
  return {text: (e.textContent || "").trim(), left: r.left, top: r.top, right: r.right,
          bottom: r.bottom, width: r.width, height: r.height, color: st.color,
          background: st.backgroundColor};
})"""


def chromium_path() -> str:
    """The system chromium ($MIMOJAX_CHROMIUM, else `chromium` on PATH); raises if absent."""
    path = os.environ.get("MIMOJAX_CHROMIUM") or shutil.which("chromium")
    path = path or shutil.which("chromium-browser")
    if not path or not os.access(path, os.X_OK):
        raise RuntimeError(f"the visual world renders with chromium; install it: {INSTALL_HINT}")
    return path


class Renderer:
    """A lazily started headless chromium; `render(html, selectors)` -> (RGB HxWx3, dom facts)."""

    def __init__(self):
        self._pw = None
        self._browser = None
        # Every Playwright call happens on this one thread (see the module docstring).
        self._thread = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="chromium")

    def _start(self):
        if self._browser is not None and self._browser.is_connected():
            return self._browser
        self._close()
        sync_playwright = require("playwright.sync_api", "visual", VISUAL).sync_playwright
        path = chromium_path()
        self._pw = sync_playwright().start()
        self._browser = self._pw.chromium.launch(
            executable_path=path,
            # root in containers has no user namespaces for chromium's own sandbox; the page
            # runs with JavaScript off and no network instead.
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--no-proxy-server",
                "--host-resolver-rules=MAP * ~NOTFOUND",
            ],
            timeout=60_000,
        )
        return self._browser

    def render(self, html: str, selectors=()) -> tuple[np.ndarray, list]:
        """Screenshot (uint8 RGB, HxWx3) of `html` and the DOM facts of `selectors`."""
        return self._thread.submit(self._render, html, selectors).result()

    def _render(self, html: str, selectors) -> tuple[np.ndarray, list]:
        from PIL import Image

        browser = self._start()
        context = browser.new_context(
            viewport={"width": VIEWPORT[0], "height": VIEWPORT[1]},
            offline=True,
            java_script_enabled=False,
            device_scale_factor=1,
        )
        try:
            context.route("**/*", lambda route: route.abort())
            page = context.new_page()
            page.set_default_timeout(RENDER_TIMEOUT_MS)
            page.set_content(html, wait_until="load")
            png = page.screenshot(timeout=RENDER_TIMEOUT_MS)
            facts = page.evaluate(_DOM_JS, list(selectors))
        finally:
            context.close()
        rgb = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=np.uint8)
        return rgb, facts

    def close(self) -> None:
        """Stop the browser and Playwright (idempotent)."""
        self._thread.submit(self._close).result()

    def _close(self) -> None:
        for closer in (self._browser, self._pw):
            try:
                if closer is not None:
                    closer.close() if closer is self._browser else closer.stop()
            except Exception:  # noqa: BLE001 - a dead browser is already closed
                pass
        self._browser = self._pw = None


_RENDERER: Renderer | None = None


def renderer() -> Renderer:
    """This process's shared renderer."""
    global _RENDERER
    if _RENDERER is None:
        _RENDERER = Renderer()
    return _RENDERER
