"""Grader of the visual world: the answer's HTML rendered in headless chromium, scored against
the task's reference rendering (SSIM) and the task's DOM checks.

The page is the last ```html (or bare ```) block of the response, else the text from its first
`<!DOCTYPE` / `<html` on; none (or over 50k characters) gives format 0 and score 0.

    ssim    structural similarity (scikit-image, grayscale) with the reference rendering
    visual  the same, rescaled so an empty page scores 0 and the reference 1 (clipped)
    dom     fraction of the task's checks that hold: text, background colour, above, left_of
    score = (visual + dom) / 2

A browser that cannot start, or a render that fails or times out, raises: an infra failure.
"""

from __future__ import annotations

import re

import numpy as np

from mimojax.envs.visual.render import VISUAL, renderer
from mimojax.extras import check_extra, require
from mimojax.rewards.pool import register_reward

DIMS = ("format", "ssim", "visual", "dom")
MAX_CHARS = 50_000
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+.-]*)[^\n]*\n(.*?)```", re.DOTALL)
_START = re.compile(r"<!DOCTYPE|<html", re.IGNORECASE)
_EMPTY = "<!DOCTYPE html><html><body></body></html>"
_REFERENCE_CACHE: dict[str, tuple[np.ndarray, float]] = {}  # task_id -> (gray, empty's ssim)


def find_html(response: str) -> str | None:
    """The last ```html / ``` block, else the text from the first <!DOCTYPE / <html; or None."""
    text = str(response)
    blocks = [m.group(2) for m in _FENCE.finditer(text) if m.group(1).lower() in ("", "html")]
    if blocks:
        return blocks[-1] if "<" in blocks[-1] else None
    m = _START.search(text)
    return text[m.start() :] if m else None


def gray(rgb: np.ndarray) -> np.ndarray:
    return (rgb.astype(np.float64) @ np.array([0.299, 0.587, 0.114])).astype(np.float64)


def ssim(a: np.ndarray, b: np.ndarray) -> float:
    """Grayscale SSIM of two RGB renderings of the same viewport."""
    structural_similarity = require("skimage.metrics", "visual", VISUAL).structural_similarity

    return float(structural_similarity(gray(a), gray(b), data_range=255.0))


def check_dom(checks: list[dict], facts: dict) -> list[bool]:
    """Each check against the DOM facts of its selectors (None: nothing matched)."""
    results = []
    for c in checks:
        a, b = facts.get(c["selector"]), facts.get(c.get("other", ""))
        kind = c["kind"]
        if a is None or (kind in ("above", "left_of") and b is None):
            results.append(False)
        elif kind == "text":
            results.append(c["text"].lower() in a["text"].lower())
        elif kind == "background":
            results.append(a["background"].replace(" ", "") == c["value"].replace(" ", ""))
        elif kind == "above":
            results.append(a["bottom"] <= b["top"] + 1 and a["height"] > 0)
        elif kind == "left_of":
            results.append(a["right"] <= b["left"] + 1 and a["width"] > 0)
        else:
            raise ValueError(f"visual grader: unknown check kind {kind!r}")
    return results


def _selectors(checks) -> list[str]:
    found = []
    for c in checks:
        for s in (c["selector"], c.get("other")):
            if s and s not in found:
                found.append(s)
    return found


def reference(task_id: str, reference_html: str) -> tuple[np.ndarray, float]:
    """(reference rendering, an empty page's SSIM with it), rendered once per process."""
    if task_id not in _REFERENCE_CACHE:
        ref, _ = renderer().render(reference_html)
        empty, _ = renderer().render(_EMPTY)
        _REFERENCE_CACHE[task_id] = (ref, ssim(empty, ref))
    return _REFERENCE_CACHE[task_id]


@register_reward("visual")
def grade(response: str, ground_truth: str, extra: dict | None = None) -> dict:
    """score = (rescaled SSIM + fraction of DOM checks) / 2; dims format, ssim, visual, dom."""
    check_extra("visual", VISUAL)  # scikit-image and Playwright, before any rendering
    extra = dict(extra or {})
    if not extra.get("reference_html") or not extra.get("checks"):
        raise ValueError(f"visual grader: row {ground_truth!r} lacks reference_html or checks")
    html = find_html(response)
    if html is None or len(html) > MAX_CHARS:
        return {"score": 0.0, **dict.fromkeys(DIMS, 0.0)}
    checks = extra["checks"]
    ref, empty_ssim = reference(str(extra.get("task_id", ground_truth)), extra["reference_html"])
    rgb, facts = renderer().render(html, _selectors(checks))
    similarity = ssim(rgb, ref)
    visual = float(np.clip((similarity - empty_ssim) / max(1e-6, 1.0 - empty_ssim), 0.0, 1.0))
    dom = float(np.mean(check_dom(checks, dict(zip(_selectors(checks), facts)))))
    return {
        "score": (visual + dom) / 2,
        "format": 1.0,
        "ssim": similarity,
        "visual": visual,
        "dom": dom,
    }
