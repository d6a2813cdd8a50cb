"""Visual tasks: small pages described in text, each with a reference HTML (the target) and the
DOM checks its rendering must pass; fixed train / held-out files.

    python -m mimojax.envs.visual.tasks                  # rewrites envs/visual/data/*.jsonl
    python -m mimojax.envs.visual.tasks --images DIR     # also renders the reference PNGs

The reference images are rendered from the reference HTML (by the grader, once per task per
process, and by `--images` for people or multimodal prompts), so no binaries are committed.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

DATA_DIR = Path(__file__).with_name("data")
HELD_OUT_SEED = 15
N_HELD_OUT = 6
_PAGE = "<!DOCTYPE html><html><head><style>body{{margin:0;font-family:sans-serif;{body}}}{css}</style></head><body>{html}</body></html>"  # noqa: E501
_COLORS = {"navy": "#1f3a93", "crimson": "#c0392b", "green": "#1e8449", "purple": "#6c3483"}
_RGB = {
    "navy": "rgb(31, 58, 147)",
    "crimson": "rgb(192, 57, 43)",
    "green": "rgb(30, 132, 73)",
    "purple": "rgb(108, 52, 131)",
}
_WORDS = ("Daily News", "My Garden", "Launch Day", "Cafe Menu")


def _check(kind, selector, **kw) -> dict:
    return {"kind": kind, "selector": selector, **kw}


def header_page(color: str, title: str) -> tuple[str, str, list]:
    desc = (
        f"A white page (no body margin). At the top, a full-width <header> 60px tall with "
        f'background {_COLORS[color]} ({color}), holding an <h1> reading "{title}" in white, '
        f"28px, 12px from the left, vertically centred. Below the header, a <p> reading "
        f'"Welcome!" in 16px black text with 12px margin.'
    )
    css = (
        f"header{{height:60px;background:{_COLORS[color]};display:flex;align-items:center}}"
        "h1{margin:0 0 0 12px;color:#fff;font-size:28px}p{margin:12px;font-size:16px}"
    )
    html = f"<header><h1>{title}</h1></header><p>Welcome!</p>"
    checks = [
        _check("text", "h1", text=title),
        _check("background", "header", value=_RGB[color]),
        _check("above", "header", other="p"),
        _check("text", "p", text="Welcome!"),
    ]
    return desc, _PAGE.format(body="background:#fff", css=css, html=html), checks


def sidebar_page(color: str, title: str) -> tuple[str, str, list]:
    desc = (
        f"A two-column page filling the 320x240 viewport: on the left an <nav> 100px wide and "
        f"full height with background {_COLORS[color]} ({color}); on the right a <main> with "
        f'12px padding holding an <h2> reading "{title}" (22px, black, no top margin).'
    )
    css = (
        f"body{{display:flex;height:240px}}nav{{width:100px;background:{_COLORS[color]}}}"
        "main{flex:1;padding:12px}h2{margin:0;font-size:22px}"
    )
    html = f"<nav></nav><main><h2>{title}</h2></main>"
    checks = [
        _check("background", "nav", value=_RGB[color]),
        _check("left_of", "nav", other="main"),
        _check("text", "h2", text=title),
    ]
    return desc, _PAGE.format(body="", css=css, html=html), checks


def card_page(color: str, title: str) -> tuple[str, str, list]:
    desc = (
        f'A light grey (#eeeeee) page with a white card centred in it: a <div class="card"> '
        f'200px wide, 20px padding, holding an <h3> reading "{title}" (18px, no top margin) '
        f'and below it a <button> reading "Open" with background {_COLORS[color]} ({color}), '
        f"white text, no border."
    )
    css = (
        "body{display:flex;align-items:center;justify-content:center;height:240px}"
        ".card{width:200px;padding:20px;background:#fff}h3{margin:0 0 10px;font-size:18px}"
        f"button{{background:{_COLORS[color]};color:#fff;border:0;padding:6px 12px}}"
    )
    html = f'<div class="card"><h3>{title}</h3><button>Open</button></div>'
    checks = [
        _check("text", "h3", text=title),
        _check("text", "button", text="Open"),
        _check("background", "button", value=_RGB[color]),
        _check("above", "h3", other="button"),
    ]
    return desc, _PAGE.format(body="background:#eee", css=css, html=html), checks


def boxes_page(color: str, title: str) -> tuple[str, str, list]:
    desc = (
        f'A white page with an <h2> reading "{title}" (20px, 10px margin) and below it a row '
        f'of three boxes (<div class="box">, 80px square, 10px apart, starting 10px from the '
        f"left) with background {_COLORS[color]} ({color}), labelled A, B and C in white."
    )
    css = (
        "h2{margin:10px;font-size:20px}.row{display:flex;gap:10px;margin-left:10px}"
        f".box{{width:80px;height:80px;background:{_COLORS[color]};color:#fff}}"
    )
    html = (
        f'<h2>{title}</h2><div class="row"><div class="box">A</div><div class="box">B</div>'
        '<div class="box">C</div></div>'
    )
    checks = [
        _check("text", "h2", text=title),
        _check("above", "h2", other=".box"),
        _check("background", ".box", value=_RGB[color]),
        _check("left_of", ".box", other=".box:nth-child(2)"),
        _check("left_of", ".box:nth-child(2)", other=".box:nth-child(3)"),
    ]
    return desc, _PAGE.format(body="background:#fff", css=css, html=html), checks


def list_page(color: str, title: str) -> tuple[str, str, list]:
    desc = (
        f"A page with background {_COLORS[color]} ({color}) and white text: an <h2> reading "
        f'"{title}" (22px, 12px margin) above a <ul> of three items: "One", "Two", '
        f'"Three" (16px).'
    )
    css = "h2{margin:12px;font-size:22px}ul{font-size:16px}"
    html = f"<h2>{title}</h2><ul><li>One</li><li>Two</li><li>Three</li></ul>"
    checks = [
        _check("background", "body", value=_RGB[color]),
        _check("text", "h2", text=title),
        _check("above", "h2", other="ul"),
        _check("text", "li:nth-child(3)", text="Three"),
    ]
    body = f"background:{_COLORS[color]};color:#fff"
    return desc, _PAGE.format(body=body, css=css, html=html), checks


TEMPLATES = {
    "header": header_page,
    "sidebar": sidebar_page,
    "card": card_page,
    "boxes": boxes_page,
    "list": list_page,
}
INSTRUCTION = (
    "Write one self-contained HTML page (inline CSS, no scripts, no external files) for a "
    "320x240 viewport. Reply with the page in one ```html block."
)


def all_rows() -> list[dict]:
    """Every task: each template with each (color, title) pairing."""
    rows = []
    for name, make in TEMPLATES.items():
        for color, title in zip(_COLORS, _WORDS):
            desc, ref, checks = make(color, title)
            tid = f"{name}-{color}"
            rows.append(
                {
                    "prompt": f"{desc}\n\n{INSTRUCTION}",
                    "ground_truth": tid,
                    "env": "visual",
                    "extra": {"task_id": tid, "reference_html": ref, "checks": checks},
                }
            )
    return rows


def split_rows() -> tuple[list[dict], list[dict]]:
    """(train, held-out): N_HELD_OUT tasks drawn once with HELD_OUT_SEED."""
    rows = all_rows()
    held = set(random.Random(HELD_OUT_SEED).sample(range(len(rows)), N_HELD_OUT))
    return [r for i, r in enumerate(rows) if i not in held], [rows[i] for i in sorted(held)]


def write_splits(out_dir: Path = DATA_DIR) -> None:
    """Writes visual_train.jsonl and visual_test.jsonl."""
    out_dir.mkdir(parents=True, exist_ok=True)
    train, test = split_rows()
    for name, rows in (("visual_train.jsonl", train), ("visual_test.jsonl", test)):
        with open(out_dir / name, "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)


def write_images(out_dir: Path) -> None:
    """Renders every task's reference page to out_dir/<task_id>.png (needs chromium)."""
    from PIL import Image

    from mimojax.envs.visual.render import renderer

    out_dir.mkdir(parents=True, exist_ok=True)
    for row in all_rows():
        rgb, _ = renderer().render(row["extra"]["reference_html"])
        Image.fromarray(rgb).save(out_dir / f"{row['ground_truth']}.png")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=DATA_DIR)
    p.add_argument("--images", type=Path, default=None, help="also render reference PNGs here")
    args = p.parse_args()
    write_splits(args.out)
    if args.images:
        write_images(args.images)
