"""A live `mimojax serve` on a free loopback port, for the server and judge tests."""

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def live_server(model: str = "tiny-random-llama", *args: str, timeout_s: float = 180.0):
    """Yields the base URL (http://127.0.0.1:PORT/v1) of a `mimojax serve` subprocess."""
    port = free_port()
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": ""}
    cmd = [sys.executable, "-m", "mimojax.cli.main", "serve", "--model", model, "--port", str(port)]
    proc = subprocess.Popen(
        [*cmd, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"mimojax serve exited {proc.returncode}: {proc.stdout.read()}")
            try:
                with urllib.request.urlopen(url + "/models", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"mimojax serve not up after {timeout_s:g}s")
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
