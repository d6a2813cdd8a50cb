"""The import layers hold: `lint-imports` (contracts in pyproject.toml) passes, no import cycles."""

import ast
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def test_import_linter_contracts_are_kept():
    lint_imports = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run(
        [str(lint_imports), "--no-cache"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert "broken" in result.stdout and " 0 broken" in result.stdout


def test_kernels_import_nothing_of_mimojax_but_themselves():
    # kernels/ installs as mimojax.kernels from outside mimojax/, where lint-imports does not
    # look; it sits at the bottom layer (models import it, not the reverse). Its one neighbour
    # there: mimojax.shadowing (stdlib only), which hands a top-level `kernels` import over.
    for path in sorted((REPO_ROOT / "kernels").glob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""] if node.level == 0 else []
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            for name in names:
                if name == "mimojax" or name.startswith("mimojax."):
                    ok = name.startswith("mimojax.kernels") or name == "mimojax.shadowing"
                    assert ok, f"{path.name} imports {name}"


def test_kernel_references_share_no_code_with_the_kernels():
    # A reference checks a kernel; imported code would hide a bug in both.
    tree = ast.parse((REPO_ROOT / "kernels" / "reference.py").read_text())
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    } | {
        (node.module or "").split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
    }
    assert imported <= {"__future__", "jax", "numpy"}, imported


def test_shadowing_imports_nothing_of_mimojax():
    tree = ast.parse((REPO_ROOT / "mimojax" / "shadowing.py").read_text())
    imported = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    imported += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert not [m for m in imported if m.split(".")[0] == "mimojax"], imported


def _import_cycles(adj: dict[str, list[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, stack, on_stack, cycles, counter = {}, {}, [], set(), [], 0
    for root in adj:
        if root in index:
            continue
        work = [(root, iter(adj[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(adj[w])))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        cycles.append(sorted(comp))
    return cycles


def test_cycle_finder_finds_a_hand_made_cycle():
    adj = {"a": ["b"], "b": ["c"], "c": ["a", "d"], "d": [], "e": ["e2"], "e2": []}
    assert _import_cycles(adj) == [["a", "b", "c"]]


def test_no_module_imports_itself_through_others():
    # Function-level imports count too (grimp reads every import statement).
    import grimp

    graph = grimp.build_graph("mimojax")
    adj = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in sorted(graph.modules)}
    assert _import_cycles(adj) == []


def test_the_top_level_holds_few_modules():
    # Everything else lives in a package named for its job (docs/architecture.md).
    top = sorted(p.name for p in (REPO_ROOT / "mimojax").glob("*.py") if p.name != "__init__.py")
    assert len(top) <= 8, top
