"""Runs test asserts against `solution.py`, each in its own process; runs INSIDE the sandbox.

This file is sent as the code of one sandboxed call (stdlib only, Python 3.8+); it never
imports the solution itself. stdin holds a nonce line, then a JSON object
{"tests": [...], "timeout_s": float, "workers": int}. Every line this runner writes starts
with the nonce, so the caller trusts only lines the solution cannot forge:

    <nonce> {"ready": true}
    <nonce> {"i": 3, "ok": false, "err": "AssertionError: 4 != 5"}
    <nonce> {"done": true}

Each test runs in a fresh `python -I -c CHILD` process. The child reads a per-test token from
stdin before importing the solution and prints it only after the test ran to the end, so a
solution that exits 0 at import, or prints "PASS", passes nothing. `assert a == b` is checked
strictly (plain builtin values only), so an object whose `__eq__` always answers True fails.
"""

from __future__ import annotations

import os  # already imported at startup, so never a file from the work dir
import sys

# Files in the work dir (the model's) must not shadow the stdlib modules imported below.
_CWD = os.path.realpath(os.getcwd())
sys.path[:] = [p for p in sys.path if p and os.path.realpath(p) != _CWD]

import json  # noqa: E402
import secrets  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import threading  # noqa: E402
from concurrent.futures import ThreadPoolExecutor  # noqa: E402

CHILD = r"""
def _mj_main():
    import ast, math, os, sys
    # Everything the check uses is bound here, before the solution runs: patching builtins,
    # math or os at import time does not change what a test compares or executes.
    _type, _len, _all, _zip, _bool, _repr, _list, _exec = (
        type, len, all, zip, bool, repr, list, exec)
    _isclose, _write, _vars, _items = math.isclose, os.write, vars, dict.items
    token = sys.stdin.readline().strip()
    source = sys.stdin.read()
    sys.stdin.close()
    try:  # not dumpable: other tests' processes cannot reach this one's pipes
        import ctypes

        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)
    except Exception:
        pass
    out = os.dup(1)
    plain = (_type(None), bool, int, float, complex, str, bytes)
    keyable = plain + (tuple, frozenset)

    def hashable(x, depth):
        if _type(x) not in keyable:
            return False
        if _type(x) in (tuple, frozenset):
            return depth < 40 and _all([hashable(y, depth + 1) for y in x])
        return True

    def same(a, b, depth=0):
        ta, tb = _type(a), _type(b)
        if depth > 40:
            return False
        if ta in (int, float) and tb in (int, float):
            if ta is int and tb is int:
                return a == b
            return a == b or _isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
        if ta is not tb:
            return False
        if ta in plain:
            return a == b
        if ta in (list, tuple):
            return _len(a) == _len(b) and _all([same(x, y, depth + 1) for x, y in _zip(a, b)])
        if ta is dict:
            if not _all([hashable(k, depth) for k in _list(a) + _list(b)]):
                return False
            return a.keys() == b.keys() and _all([same(a[k], b[k], depth + 1) for k in a])
        if ta in (set, frozenset):
            return _all([hashable(x, depth) for x in _list(a) + _list(b)]) and a == b
        return False

    def short(x):
        try:
            text = _repr(x)
        except Exception as e:
            text = "<repr failed: %s>" % _type(e).__name__
        return text if _len(text) <= 200 else text[:197] + "..."

    def check_eq(a, b):
        if not same(a, b):
            raise AssertionError("%s != %s" % (short(a), short(b)))
        return True

    def check_truth(x, want):
        if _type(x) not in plain or _bool(x) is not want:
            raise AssertionError("%s is not %s" % (short(x), "truthy" if want else "falsy"))
        return True

    class Strict(ast.NodeTransformer):
        def visit_Assert(self, node):
            t = node.test

            def call(name, *args):
                return ast.Call(ast.Name(name, ast.Load()), _list(args), [])

            if isinstance(t, ast.Compare) and _len(t.ops) == 1 and isinstance(t.ops[0], ast.Eq):
                node.test = call("_mj_eq", t.left, t.comparators[0])
            elif isinstance(t, ast.Call):
                node.test = call("_mj_truth", t, ast.Constant(True))
            elif isinstance(t, ast.UnaryOp) and isinstance(t.op, ast.Not):
                node.test = call("_mj_truth", t.operand, ast.Constant(False))
            return node

    tree = ast.fix_missing_locations(Strict().visit(ast.parse(source)))
    code = compile(tree, "<test>", "exec")
    sys.path.insert(0, os.getcwd())
    import solution

    ns = {k: v for k, v in _items(_vars(solution)) if not k.startswith("__")}
    ns.update(__name__="__test__", _mj_eq=check_eq, _mj_truth=check_truth)
    _exec(code, ns)
    _write(out, ("\n" + token + "\n").encode())


_mj_main()
"""


def _run_one(test: str, timeout_s: float) -> tuple[bool, str]:
    token = secrets.token_hex(16)
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.Popen(
        [sys.executable, "-I", "-B", "-c", CHILD],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        start_new_session=True,  # so a timeout kills what the solution spawned too
    )
    try:
        out, err = proc.communicate((token + "\n" + test).encode(), timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill(proc)
        return False, f"timed out after {timeout_s:g} s"
    finally:
        _kill(proc)
    lines = out.decode("utf-8", "replace").splitlines()
    if proc.returncode == 0 and token in (line.strip() for line in lines):
        return True, ""
    tail = [line for line in err.decode("utf-8", "replace").splitlines() if line.strip()]
    if tail:
        return False, tail[-1][:300]
    if proc.returncode != 0:
        return False, f"exit code {proc.returncode}"
    return False, "the test did not run to its end (exited early)"


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    try:
        proc.communicate(timeout=0.5)
    except (subprocess.TimeoutExpired, ValueError, OSError):
        for f in (proc.stdout, proc.stderr):
            if f is not None:
                f.close()


def main() -> None:
    """Reads the nonce and the tests from stdin; reports each test as it finishes."""
    nonce = sys.stdin.readline().strip()
    spec = json.loads(sys.stdin.read())
    try:  # not dumpable: the solution's processes cannot read this one's memory or fds
        import ctypes

        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4
    except Exception:
        pass
    lock = threading.Lock()

    def say(obj) -> None:
        with lock:
            sys.stdout.write(nonce + " " + json.dumps(obj) + "\n")
            sys.stdout.flush()

    say({"ready": True})

    def one(item):
        i, test = item
        try:
            ok, err = _run_one(test, float(spec["timeout_s"]))
        except Exception as e:  # e.g. no processes left: the test failed, the runner goes on
            ok, err = False, f"runner: {type(e).__name__}: {e}"[:300]
        say({"i": i, "ok": ok, "err": err})

    with ThreadPoolExecutor(max_workers=max(1, int(spec.get("workers", 4)))) as pool:
        list(pool.map(one, enumerate(spec["tests"])))
    say({"done": True})


if __name__ == "__main__":
    main()
