"""The docs stay true: the architecture page names every package and module that exists (and
only those), the README stays one page, links and anchors resolve, the feature table's paths
exist."""

import fnmatch
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
ARCH = DOCS / "architecture.md"
PATH_ROOTS = (
    "mimojax/",
    "envs/",
    "kernels/",
    "configs/",
    "scripts/",
    "tests/",
    "notebooks/",
    "docs/",
)
# fmt: skip


def backticked(text: str) -> list[str]:
    return re.findall(r"`([^`\s]+)`", text)


def missing_paths(text: str, bases=(ROOT, ROOT / "mimojax")) -> list[str]:
    """Backticked paths (strings with a '/') that exist under none of `bases`; bare file names
    are checked against their package by the layout tests."""
    out = []
    for token in backticked(text):
        token = token.split("::")[0]
        if (
            "/" not in token
            or re.fullmatch(r"\w+/", token)
            or token.startswith(("../", "http", "--"))
            or "*" in token
        ):
            continue
        if not re.fullmatch(r"[\w./-]+", token):
            continue
        if not any((base / token).exists() for base in bases):
            out.append(token)
    return out


def test_the_path_check_catches_a_made_up_path():
    assert missing_paths("`mimojax/train/trainer.py` and `train/step.py`") == []
    assert missing_paths("`mimojax/train/nope.py` and `rollout/ghost.py`") == [
        "mimojax/train/nope.py",
        "rollout/ghost.py",
    ]


def test_every_path_on_the_architecture_page_exists():
    assert missing_paths(ARCH.read_text()) == []


def _layout_rows(text: str) -> dict[str, list[str]]:
    """Layout table: first-column path -> the names in its second column."""
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0].startswith("`") and not cells[0].startswith("`path"):
            rows[cells[0].strip("`")] = backticked(cells[1])
    return rows


def test_the_layout_names_only_files_its_package_has():
    rows = _layout_rows(ARCH.read_text())
    assert "mimojax/train/" in rows, "the layout table is gone"
    bad = []
    for pkg, names in rows.items():
        base = ROOT / pkg
        if not base.is_dir():
            continue
        files = [p.relative_to(base).as_posix() for p in base.rglob("*")]
        for name in names:
            if re.fullmatch(r"[\w*]+\.py|[\w]+/", name) and not any(
                fnmatch.fnmatch(Path(f).name, name.rstrip("/")) or f == name.rstrip("/")
                for f in files
            ):
                bad.append(f"{pkg}{name}")
    assert bad == []


def test_every_package_and_module_is_on_the_map():
    """A newcomer finds every module in one hop: each is named in its package's layout row."""
    rows = _layout_rows(ARCH.read_text())
    unnamed = []
    for py in sorted((ROOT / "mimojax").rglob("*.py")):
        rel = py.relative_to(ROOT / "mimojax")
        if py.name == "__init__.py":
            continue
        if len(rel.parts) == 1:
            if f"mimojax/{py.name}" not in rows:
                unnamed.append(rel.as_posix())
            continue
        pkg = f"mimojax/{rel.parts[0]}/"
        names = rows.get(pkg, [])
        sub = f"{rel.parts[1]}/" if len(rel.parts) > 2 else None
        if sub in names:
            continue
        if not any(fnmatch.fnmatch(py.name, n) for n in names):
            unnamed.append(rel.as_posix())
    assert unnamed == []


def test_the_readme_is_one_page_with_the_two_commands():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 250
    assert "make demo" in text and "make test" in text


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(md: Path) -> set[str]:
    out, in_code = set(), False
    for line in md.read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and line.startswith("#"):
            out.add(_slug(line.lstrip("#")))
    return out


def broken_links(md: Path) -> list[str]:
    """Relative links (and #anchors into markdown files) of `md` that resolve to nothing."""
    bad, in_code = [], False
    for line in md.read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
            continue
        if in_code:
            continue
        for target in re.findall(r"\]\(([^)\s]+)\)", line):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            dest = (md.parent / path).resolve() if path else md
            if path.startswith("../shared/") and md.parent == ROOT:
                continue  # the project's design notes live beside the repository, not in it
            if not dest.exists():
                bad.append(target)
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                bad.append(target)
    return bad


def test_the_link_check_catches_a_dead_link_and_anchor(tmp_path):
    (tmp_path / "b.md").write_text("# Real heading (2026)\n")
    md = tmp_path / "a.md"
    md.write_text("[ok](b.md#real-heading-2026) [gone](c.md) [no anchor](b.md#nope)\n")
    assert broken_links(md) == ["c.md", "b.md#nope"]


@pytest.mark.parametrize("md", ["README.md", *sorted(p.name for p in DOCS.glob("*.md"))])
def test_links_and_anchors_resolve(md):
    path = ROOT / md if md == "README.md" else DOCS / md
    assert broken_links(path) == []


def test_the_feature_table_names_files_that_exist():
    text = (DOCS / "features.md").read_text()
    rooted = [t for t in backticked(text) if t.startswith(PATH_ROOTS)]
    assert len(rooted) > 20
    assert missing_paths(" ".join(f"`{t}`" for t in rooted)) == []
