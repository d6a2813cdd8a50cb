"""mimojax.sandbox.bwrap under real bubblewrap: normal runs; each escape contained and reported."""

import logging
import os
import shutil
import socket
import stat
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pytest

from mimojax.sandbox import bwrap as sandbox
from mimojax.sandbox.bwrap import SandboxSession, SandboxUnavailable, run_untrusted

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None,
    reason="bubblewrap is not installed: apt-get install bubblewrap (make setup does it as root)",
)


@pytest.fixture(scope="module", autouse=True)
def _bwrap_works():
    try:
        sandbox.check_available()
    except SandboxUnavailable as e:
        pytest.skip(f"bwrap is installed but cannot start a sandbox here: {e}")


def assert_still_works():
    r = run_untrusted("print(6 * 7)", timeout_s=5)
    assert (r.exit_code, r.stdout, r.violation) == (0, "42\n", None), r


def host_pids_with(marker: str) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(int(pid))
        except OSError:
            pass
    return found


# --- normal runs ---------------------------------------------------------------------------


def test_python_stdout_stderr_exit_code_stdin_argv():
    code = "import sys\nprint(input().upper(), sys.argv[1:])\nprint('err', file=sys.stderr)\n"
    r = run_untrusted(code + "sys.exit(3)", stdin="hello", argv=["a", "b c"])
    assert r.exit_code == 3 and r.violation is None and not r.timed_out
    assert r.stdout == "HELLO ['a', 'b c']\n" and r.stderr == "err\n"
    assert r.stdout_bytes == r.stdout.encode() and r.wall_s < 5


def test_shell_scripts_see_files_in_their_work_dir():
    files = {"in.txt": "data", "sub/b.bin": b"\x00\x01"}
    r = run_untrusted('cat in.txt; wc -c < sub/b.bin; echo "$1" "$HOME"', "bash", files=files,
                      argv=["arg1"])  # fmt: skip
    assert (r.exit_code, r.stdout) == (0, "data2\narg1 /sandbox\n"), r
    r = run_untrusted("echo $((6 * 7)) > out.txt && cat out.txt", "sh")
    assert (r.exit_code, r.stdout) == (0, "42\n"), r


def test_entry_runs_a_file_with_argv_and_imports_its_siblings():
    files = {
        "prog.py": "import sys, helper\nprint(helper.twice(open(sys.argv[1], 'rb').read()))\n",
        "helper.py": "def twice(b):\n    return b * 2\n",
        "input.bin": b"\x01",
    }
    r = run_untrusted(None, files=files, entry="prog.py", argv=["input.bin"])
    assert (r.exit_code, r.stdout) == (0, "b'\\x01\\x01'\n"), r
    r = run_untrusted(None, "bash", files={"run.sh": "echo hi $1"}, entry="run.sh", argv=["x"])
    assert r.stdout == "hi x\n", r


def test_closing_stdout_does_not_end_the_run():
    r = run_untrusted("echo hi; exec >&- 2>&-; sleep 0.3; exit 7", "bash")
    assert (r.exit_code, r.violation, r.stdout) == (7, None, "hi\n"), r
    assert r.wall_s >= 0.3


def test_extra_env_is_set_and_the_rest_scrubbed():
    r = run_untrusted("import os; print(os.environ['FOO'], os.environ['HOME'])", env={"FOO": "1"})
    assert r.stdout == "1 /sandbox\n", r


# --- containment -----------------------------------------------------------------------------


def test_network_is_unreachable():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(5)
    server.settimeout(0.2)
    port = server.getsockname()[1]
    accepted, done = [], threading.Event()

    def accept_loop():
        while not done.is_set():
            try:
                accepted.append(server.accept())
            except (TimeoutError, OSError):
                pass

    t = threading.Thread(target=accept_loop)
    t.start()
    code = f"""
import socket
for addr in [("127.0.0.1", {port}), ("1.1.1.1", 53), ("8.8.8.8", 443)]:
    try:
        socket.create_connection(addr, timeout=1).close()
        print("CONNECTED", addr)
    except OSError as e:
        print("failed", addr, e)
try:
    socket.getaddrinfo("example.com", 80)
    print("RESOLVED")
except OSError as e:
    print("no dns", e)
"""
    r = run_untrusted(code, timeout_s=5)
    done.set()
    t.join()
    server.close()
    assert r.exit_code == 0, r
    assert "CONNECTED" not in r.stdout and "RESOLVED" not in r.stdout, r.stdout
    assert r.stdout.count("failed") == 3, r.stdout
    assert not accepted, "the sandbox reached a host port"
    assert_still_works()


def test_host_files_are_invisible(tmp_path):
    secret = uuid.uuid4().hex
    (tmp_path / "secret.txt").write_text(secret)
    with tempfile.NamedTemporaryFile("w", dir="/tmp", suffix=".secret") as host_tmp:
        host_tmp.write(secret)
        host_tmp.flush()
        paths = [str(tmp_path / "secret.txt"), host_tmp.name, "/root", "/home", "/work",
                 str(Path(__file__).resolve()), "/etc/shadow", "/etc/hostname", "/var"]  # fmt: skip
        code = f"""
import os
for p in {paths!r}:
    print(p, os.path.exists(p))
print(os.listdir('/tmp'), os.listdir('/'))
"""
        r = run_untrusted(code)
    assert r.exit_code == 0, r
    assert secret not in r.stdout
    for p in paths:
        assert f"{p} False" in r.stdout, r.stdout
    tmp_listing, root_listing = r.stdout.splitlines()[-1].split("] [")
    assert tmp_listing == "[" and "root" not in root_listing and "work" not in root_listing
    assert_still_works()


def test_writes_outside_the_work_dir_fail():
    marker = uuid.uuid4().hex
    code = f"""
import os
for p in ["/usr/{marker}", "/etc/{marker}", "/{marker}", "/run/prog/{marker}", "/proc/{marker}"]:
    try:
        open(p, "w").write("x")
        print("WROTE", p)
    except OSError as e:
        print("refused", p, e.strerror)
open("/tmp/{marker}", "w").write("private tmp")
open("inside.txt", "w").write("ok")
print(os.listdir("/tmp"))
"""
    r = run_untrusted(code)
    assert r.exit_code == 0 and "WROTE" not in r.stdout and r.stdout.count("refused") == 5, r
    assert f"['{marker}']" in r.stdout
    assert not Path(f"/tmp/{marker}").exists() and not Path(f"/{marker}").exists()
    assert_still_works()


def test_fork_bomb_is_bounded_and_reported():
    t0 = time.monotonic()
    r = run_untrusted("import os\nwhile True:\n    os.fork()", timeout_s=2)
    assert r.violation == "process limit" and time.monotonic() - t0 < 4, r
    r = run_untrusted(":(){ :|:& };:; sleep 10", "bash", timeout_s=2, max_processes=16)
    assert r.violation == "process limit" and r.timed_out and r.wall_s < 3, r
    assert_still_works()


def test_memory_bomb_is_stopped():
    r = run_untrusted("l = []\nwhile True:\n    l.append(bytearray(1 << 24))", memory_mb=256)
    assert r.exit_code != 0 and r.violation == "memory limit" and not r.timed_out, r
    r = run_untrusted("x = bytearray(10**12)", memory_mb=256)
    assert r.violation == "memory limit", r
    assert_still_works()


def test_infinite_loop_times_out():
    t0 = time.monotonic()
    r = run_untrusted("while True:\n    pass", timeout_s=1, cpu_s=30)
    assert r.timed_out and r.violation == "timeout" and r.exit_code < 0, r
    assert 1 <= r.wall_s < 2.5 and time.monotonic() - t0 < 4
    assert_still_works()


def test_cpu_time_limit():
    r = run_untrusted("while True:\n    pass", timeout_s=10, cpu_s=1)
    assert r.violation == "cpu limit" and not r.timed_out and r.exit_code == -24, r
    assert 0.5 <= r.cpu_s < 3, r  # rusage samples ticks; the limit counts exact runtime
    assert_still_works()


def test_huge_output_is_truncated_and_stopped():
    r = run_untrusted("while True:\n    print('x' * 1000)", timeout_s=5, max_output_bytes=10_000)
    assert r.violation == "output limit" and not r.timed_out and r.wall_s < 2, r
    assert len(r.stdout_bytes) == 10_000
    r = run_untrusted("yes err >&2", "bash", max_output_bytes=5_000)
    assert r.violation == "output limit" and len(r.stderr_bytes) == 5_000, r
    assert_still_works()


def test_file_size_limit():
    code = "with open('big', 'wb') as f:\n    while True:\n        f.write(b'x' * 65536)"
    r = run_untrusted(code, max_file_bytes=1 << 20)
    assert r.violation == "file size limit", r
    r = run_untrusted("head -c 3000000 /dev/zero > big", "bash", max_file_bytes=1 << 20)
    assert r.violation == "file size limit", r
    assert_still_works()


def test_killing_the_parent_harms_nobody():
    r = run_untrusted("import os\nos.kill(os.getppid(), 9)\nos.kill(1, 9)\nprint('alive')")
    assert (r.exit_code, r.stdout, r.violation) == (0, "alive\n", None), r
    r = run_untrusted("kill -9 -1; kill -9 0; echo after", "bash")
    assert r.exit_code in (0, -9) and os.getppid() > 1, r
    assert_still_works()


@pytest.mark.parametrize("timeout", [False, True])
def test_background_processes_do_not_outlive_the_run(timeout):
    marker = f"mimojax-leftover-{uuid.uuid4().hex}"
    script = f"""
sleep_with_marker() {{ exec -a {marker} sleep 1000; }}
sleep_with_marker &
nohup bash -c 'exec -a {marker} sleep 1000' >/dev/null 2>&1 &
setsid bash -c 'exec -a {marker} sleep 1000' &
( ( exec -a {marker} sleep 1000 ) & ) &
sleep 0.2
echo started
"""
    r = run_untrusted(script + ("sleep 100" if timeout else ""), "bash", timeout_s=1.5)
    assert "started" in r.stdout and r.timed_out == timeout, r
    deadline = time.monotonic() + 2
    while host_pids_with(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert host_pids_with(marker) == []
    assert_still_works()


def test_parent_environment_is_not_visible(monkeypatch):
    secret = uuid.uuid4().hex
    monkeypatch.setenv("MIMOJAX_TEST_SECRET", secret)
    code = """
import os
print(sorted(os.environ))
for pid in [p for p in os.listdir('/proc') if p.isdigit()] + ['self']:
    try:
        print(pid, open(f'/proc/{pid}/environ', 'rb').read())
    except OSError as e:
        print(pid, e)
print(os.listdir('/proc/self/fd'))
"""
    r = run_untrusted(code)
    assert r.exit_code == 0 and secret not in r.stdout + r.stderr, r
    assert "MIMOJAX_TEST_SECRET" not in r.stdout
    # No host descriptor (a directory fd would lead out of the mount namespace) got through:
    # 0-2 and the one listdir opened.
    assert r.stdout.splitlines()[-1] == "['0', '1', '2', '3']", r.stdout
    assert_still_works()


# --- sessions, paths, availability ---------------------------------------------------------


def test_session_keeps_files_across_runs():
    with SandboxSession(timeout_s=5, files={"a.txt": "A"}) as s:
        s.write_file("dir/b.txt", b"B")
        r = s.run("open('c.txt', 'w').write(open('a.txt').read() + open('dir/b.txt').read())")
        assert r.exit_code == 0, r
        r = s.run("cat c.txt; echo; cat $1", "bash", argv=["a.txt"])
        assert r.stdout == "AB\nA", r
        s.run("open('run.py', 'w').write('print(7)')")
        assert s.run(entry="run.py").stdout == "7\n"
        assert s.read_file("c.txt") == "AB"
        s.write_file("bin.dat", b"\xff\xfe")
        snap = s.list_files()
        assert snap == {"a.txt": "A", "c.txt": "AB", "dir/b.txt": "B", "run.py": "print(7)"}
        assert s.run("import time\ntime.sleep(5)", timeout_s=0.5).violation == "timeout"
        work = s.work_dir
    assert not os.path.exists(work)
    with pytest.raises(RuntimeError, match="closed"):
        s.run("print(1)")


def test_session_refuses_symlinks_the_sandbox_planted(tmp_path):
    host_file = tmp_path / "host.txt"
    host_file.write_text("host secret")
    with SandboxSession() as s:
        r = s.run(f"ln -s {host_file} evil; ln -s / rootlink; ln -s /etc/passwd pw", "bash")
        assert r.exit_code == 0, r
        for path in ["evil", "rootlink/etc/passwd"]:
            with pytest.raises(ValueError, match="outside the work dir"):
                s.read_file(path)
        with pytest.raises(ValueError, match="outside the work dir"):
            s.write_file("evil", "overwritten")
        assert host_file.read_text() == "host secret"
        assert "evil" not in s.list_files()
        work = s.work_dir
    assert not os.path.exists(work) and host_file.exists()


@pytest.mark.parametrize("bad", ["/etc/passwd", "../up.txt", "a/../../b", ""])
def test_bad_paths_are_refused_by_name(bad):
    with pytest.raises(ValueError, match="sandbox file path"):
        run_untrusted("print(1)", files={bad: "x"})
    with SandboxSession() as s:
        with pytest.raises(ValueError, match="sandbox file path"):
            s.write_file(bad, "x")
    with pytest.raises(ValueError, match="sandbox file path"):
        run_untrusted(None, entry=bad)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="not both"):
        run_untrusted("print(1)", files={"a.py": ""}, entry="a.py")
    with pytest.raises(ValueError, match="not both"):
        run_untrusted(None)
    with pytest.raises(ValueError, match="is not a file"):
        run_untrusted(None, entry="missing.py")
    with pytest.raises(ValueError, match="language"):
        run_untrusted("1", language="ruby")


def test_without_bwrap_it_refuses_unless_allowed(monkeypatch, caplog):
    monkeypatch.setattr(sandbox, "BWRAP", "/nonexistent/bwrap")
    assert not sandbox.available()
    with pytest.raises(SandboxUnavailable) as err:
        run_untrusted("print(1)")
    assert "apt-get install bubblewrap" in str(err.value)
    assert "sandbox.allow_unsandboxed" in str(err.value)
    with pytest.raises(SandboxUnavailable):
        SandboxSession()
    monkeypatch.setenv("MIMOJAX_TEST_SECRET", "hidden")
    with caplog.at_level(logging.WARNING, logger="mimojax.sandbox.bwrap"):
        r = run_untrusted("import os; print(os.environ.get('MIMOJAX_TEST_SECRET'))",
                          allow_unsandboxed=True)  # fmt: skip
        assert (r.exit_code, r.stdout) == (0, "None\n"), r
        r = run_untrusted("while True:\n    pass", timeout_s=1, cpu_s=30, allow_unsandboxed=True)
        assert r.timed_out and r.violation == "timeout", r
        r = run_untrusted("x = bytearray(10**12)", allow_unsandboxed=True, memory_mb=256)
        assert r.violation == "memory limit", r
        with SandboxSession(allow_unsandboxed=True, files={"a": "1"}) as s:
            assert s.run("cat a", "bash").stdout == "1"
    warnings = [rec for rec in caplog.records if "NOT SANDBOXED" in rec.getMessage()]
    assert len(warnings) == 4 and all(w.levelno == logging.WARNING for w in warnings)
    # The run's config reaches graders in other processes through the environment.
    monkeypatch.setenv(sandbox.ALLOW_UNSANDBOXED_ENV, "1")
    assert run_untrusted("print(2)").stdout == "2\n"


def test_bwrap_that_cannot_start_a_sandbox_is_reported():
    fake_dir = tempfile.mkdtemp()
    try:
        fake = Path(fake_dir) / "bwrap"
        fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\n"
                        "exit 1\n")  # fmt: skip
        fake.chmod(fake.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        os.chmod(fake_dir, 0o755)
        with pytest.raises(SandboxUnavailable, match="No permissions to create new namespace"):
            run_untrusted("print(1)", bwrap_path=str(fake))
        assert not sandbox.available(str(fake))
    finally:
        shutil.rmtree(fake_dir)
