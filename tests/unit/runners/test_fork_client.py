"""The python runner's fork-server client and handle, against a fake server: status and signals
come back as the run's own, a missing server means a fresh interpreter, and the runner says once
when it has to do without a server."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pytest_sme2.measure.config import Sme2Config
from pytest_sme2.runners.base import RunRequest
from pytest_sme2.runners.fork_client import HEADER
from pytest_sme2.runners.fork_server import CLIENT, ForkServer, _status
from pytest_sme2.runners.python import PythonRunner


def _fake_server(path: Path, reply: bytes | None, seen: list) -> threading.Thread:
    """Accept one client, keep its request, answer ``reply`` (None: hang up)."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)

    def serve() -> None:
        conn, _ = listener.accept()
        data, fds, _, _ = socket.recv_fds(conn, 65536, 3)
        seen.append((json.loads(data[HEADER.size:]), len(fds)))
        for fd in fds:
            os.close(fd)
        if reply is not None:
            conn.sendall(reply)
        conn.close()
        listener.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return thread


def _client(address: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-S", str(CLIENT), str(address), *args], cwd=cwd,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("status", [0, 3])
def test_client_sends_argv_cwd_and_stdio_and_exits_with_the_runs_status(tmp_path, status):
    seen: list = []
    thread = _fake_server(tmp_path / "s", json.dumps({"status": status}).encode(), seen)
    proc = _client(tmp_path / "s", "--pte", "m.pte", cwd=tmp_path)
    thread.join(10)
    assert proc.returncode == status
    assert seen == [({"argv": ["--pte", "m.pte"], "cwd": str(tmp_path)}, 3)]


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSEGV])
def test_a_run_killed_by_a_signal_kills_the_client_by_the_same_signal(tmp_path, sig):
    thread = _fake_server(tmp_path / "s", json.dumps({"status": -sig}).encode(), [])
    proc = _client(tmp_path / "s", cwd=tmp_path)
    thread.join(10)
    assert proc.returncode == -sig


def test_a_server_that_hangs_up_is_one_line_and_status_1(tmp_path):
    thread = _fake_server(tmp_path / "s", None, [])
    proc = _client(tmp_path / "s", cwd=tmp_path)
    thread.join(10)
    assert proc.returncode == 1
    assert proc.stderr.strip() == "python runner: the fork server ended before the run did"


def test_without_a_server_the_client_becomes_a_fresh_python_child(tmp_path):
    proc = _client(tmp_path / "no-server", "--pte", "missing.pte", "--etdump", "o.etdump",
                   cwd=tmp_path)
    assert proc.returncode == 1
    assert proc.stderr.strip() == "missing.pte: no such .pte file"


def test_wait_status_becomes_a_subprocess_style_status():
    assert _status(0) == 0
    assert _status(3 << 8) == 3
    assert _status(signal.SIGSEGV) == -signal.SIGSEGV


def _request(tmp_path: Path) -> RunRequest:
    return RunRequest(pte=tmp_path / "m.pte", etdump=tmp_path / "o.etdump", threads=2, runs=4,
                      warmup=1, inputs=tmp_path / "in.bin")


def test_command_is_a_fork_client_when_the_server_runs(tmp_path, monkeypatch):
    monkeypatch.setattr(ForkServer, "address", lambda self: "/tmp/x/s")
    argv = PythonRunner().command(_request(tmp_path))
    assert argv[:4] == [sys.executable, "-S", str(CLIENT), "/tmp/x/s"]
    assert argv[4:] == ["--pte", str(tmp_path / "m.pte"), "--etdump", str(tmp_path / "o.etdump"),
                        "--threads", "2", "--runs", "4", "--warmup", "1",
                        "--inputs", str(tmp_path / "in.bin")]


def test_without_fork_the_command_is_a_fresh_interpreter(tmp_path):
    argv = PythonRunner(fork=False).command(_request(tmp_path))
    assert argv[:3] == [sys.executable, "-m", "pytest_sme2.runners.python_child"]


def test_a_server_that_cannot_start_falls_back_saying_so_once(tmp_path):
    said: list[str] = []
    runner = PythonRunner(python=str(tmp_path / "no-python"), progress=said.append)
    for _ in range(2):
        argv = runner.command(_request(tmp_path))
        assert argv[:3] == [str(tmp_path / "no-python"), "-m", "pytest_sme2.runners.python_child"]
    assert len(said) == 1
    assert said[0].startswith("runner 'python': the fork server did not start (")
    assert said[0].endswith("); each run starts a fresh interpreter instead (seconds per run)")


def _stand_in(tmp_path: Path, before_ready: str) -> Path:
    """A stand-in interpreter whose "server" runs the shell ``before_ready``, says it is ready
    and ends on stdin EOF, as the real one does."""
    script = tmp_path / "python"
    script.write_text(f"#!/bin/sh\n{before_ready}echo 'fork-server ready'\ncat >/dev/null\n")
    script.chmod(0o755)
    return script


def _slow_python(tmp_path: Path, delay_s: float) -> Path:
    """Ready after ``delay_s``, as the real one (whose imports take a second or more)."""
    return _stand_in(tmp_path, f"sleep {delay_s}\n")


def _gated_python(tmp_path: Path, go: Path) -> Path:
    """A stand-in interpreter whose "server" says ready only once the file ``go`` exists, and
    ends on stdin EOF: the test, not the clock, decides when it is ready."""
    return _stand_in(tmp_path, f"while [ ! -e '{go}' ]; do sleep 0.01; done\n")


def test_a_server_started_ahead_is_waited_for_by_its_first_use(tmp_path):
    go = tmp_path / "go"
    server = ForkServer(str(_gated_python(tmp_path, go)))
    server.start()                      # returns although the server cannot be ready yet
    assert server.starting              # spawned, not waited for
    server.start()                      # idempotent
    assert server.starting
    opener = threading.Timer(0.2, go.touch)     # ready only after address() is asked
    opener.start()
    try:
        assert server.address() is not None and not server.starting
        assert go.exists()              # address() waited: the server said ready after `go`
    finally:
        opener.join()
    proc = server._proc
    server.stop()
    assert proc.poll() is not None


def test_a_server_started_ahead_and_never_used_is_stopped(tmp_path):
    server = ForkServer(str(_slow_python(tmp_path, 30)))
    server.start()
    proc, folder, _, _ = server._pending
    server.stop()
    assert proc.poll() is not None and not Path(folder).exists() and not server.starting


def test_python_runners_share_one_server_per_interpreter():
    from pytest_sme2.runners.fork_server import shared_server

    assert PythonRunner().server is PythonRunner().server is shared_server(sys.executable)
    assert PythonRunner(python="/other/python").server is shared_server("/other/python")


def test_the_session_starts_the_server_only_for_declared_python_runners(monkeypatch):
    from pytest_sme2.measure.session import BenchSession

    started: list[str] = []
    monkeypatch.setattr(ForkServer, "start", lambda self: started.append(self.python))
    session = BenchSession(Sme2Config())            # host; runners python and native
    session.start_ahead({"native"})
    assert started == []
    session.start_ahead({"native", "python"})
    assert started == [sys.executable]
    BenchSession(Sme2Config(devices=("qemu",))).start_ahead({"python"})
    assert started == [sys.executable]              # the python runner runs on the host only


def test_collected_benchmarks_declare_their_runners_with_the_sme2_marker():
    import types

    from pytest_sme2 import plugin

    asked: list[set] = []
    marker = types.SimpleNamespace(kwargs={"runners": ["python", "native"]})
    plain = types.SimpleNamespace(kwargs={"threads": [1]})
    items = [types.SimpleNamespace(iter_markers=lambda name, m=m: iter([m] if name == "sme2"
                                                                       else []))
             for m in (marker, plain)]
    bench = types.SimpleNamespace(start_ahead=lambda runners, points: asked.append(runners),
                                  config=Sme2Config())
    config = types.SimpleNamespace(stash={plugin.SESSION_KEY: bench},
                                   option=types.SimpleNamespace(collectonly=False))
    plugin.pytest_collection_finish(types.SimpleNamespace(items=items, config=config))
    assert asked == [{"python", "native"}]
    plugin.pytest_collection_finish(types.SimpleNamespace(items=items[1:], config=config))
    assert asked == [{"python", "native"}]          # nothing declared: nothing started ahead


def _state(pid: int) -> str:
    """The process state letter of /proc/PID/stat (T: stopped, Z: zombie); "" once reaped."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return ""


def _settled_state(pid: int, expected: str) -> str:
    """The state once a signal just sent has taken effect (delivery is asynchronous)."""
    for _ in range(200):
        state = _state(pid)
        if (state == "T") == (expected == "T"):
            return state
        time.sleep(0.005)
    return _state(pid)


def _arming_python(tmp_path: Path, delay_s: float) -> Path:
    """A stand-in server that says ARMED at once and READY after ``delay_s``."""
    return _stand_in(tmp_path, f"echo 'fork-server armed'\nsleep {delay_s}\n")


def test_a_server_still_importing_is_stopped_while_something_is_measured(tmp_path):
    server = ForkServer(str(_arming_python(tmp_path, 0.3)))
    server.start()
    pid = server._pending[0].pid
    try:
        server.pause()
        assert _settled_state(pid, "T") == "T"   # stopped: no CPU beside the measurement
        server.pause()                     # twice: still one stop to undo
        server.resume()
        assert _settled_state(pid, "R") not in ("T", "")
        server.pause()
        assert server.address() is not None     # a first use lets it go on and waits for it
        assert _settled_state(pid, "R") != "T" and not server.starting
        server.pause()                     # ready: idle, left alone
        assert _settled_state(pid, "R") != "T"
    finally:
        server.stop()   # kills a stand-in left stopped by a failed assertion too


def test_a_server_that_is_ready_before_it_is_paused_is_not_stopped(tmp_path):
    server = ForkServer(str(_slow_python(tmp_path, 0)))   # says READY only (no ARMED)
    server.start()
    pid = server._pending[0].pid
    try:
        server.pause()                     # reads READY: nothing to stop, nothing lost
        assert _state(pid) != "T"
        assert server.address() is not None
    finally:
        server.stop()


def test_a_stopped_server_dies_with_the_session_that_stopped_it(tmp_path):
    """A session killed mid-measurement (SIGKILL: no cleanup) must not leave its fork server
    stopped for good: the server asked the kernel to kill it when its parent ends."""
    session = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time\n"
         "from pytest_sme2.runners.fork_server import ForkServer\n"
         "s = ForkServer(); s.start(); s.pause()\n"
         "print(s._pending[0].pid, s._paused, flush=True)\n"
         "time.sleep(60)\n"],
        stdout=subprocess.PIPE, text=True)
    try:
        pid, paused = session.stdout.readline().split()
        pid = int(pid)
        assert paused == "True" and _settled_state(pid, "T") == "T"
    finally:
        session.kill()
        session.wait()
        session.stdout.close()
    for _ in range(100):
        if _state(pid) in ("", "Z"):
            break
        time.sleep(0.05)
    assert _state(pid) in ("", "Z"), f"server {pid} outlived its session: {_state(pid)}"


def test_the_session_stops_a_starting_server_only_while_it_measures(tmp_path, monkeypatch):
    from pytest_sme2.measure.config import Sme2Config
    from pytest_sme2.runners import fork_server
    from pytest_sme2.measure.session import BenchSession

    server = ForkServer(str(_arming_python(tmp_path, 30)))
    monkeypatch.setitem(fork_server._SHARED, sys.executable, server)
    server.start()
    pid = server._pending[0].pid
    session = BenchSession(Sme2Config())
    try:
        with session.measuring():
            assert _settled_state(pid, "T") == "T"
        assert _settled_state(pid, "R") not in ("T", "")
        with pytest.raises(RuntimeError), session.measuring():
            raise RuntimeError("a failed run")
        assert _settled_state(pid, "R") not in ("T", "")     # resumed whatever happened
    finally:
        server.stop()


def test_a_server_that_ends_while_being_paused_is_reported_not_stopped(tmp_path):
    script = tmp_path / "python"
    script.write_text("#!/bin/sh\necho 'fork-server armed'\necho 'no torch here' >&2\nexit 3\n")
    script.chmod(0o755)
    server = ForkServer(str(script))
    server.start()
    server._pending[0].wait()          # ended before the measurement came
    server.pause()
    assert not server._paused
    assert server.address() is None
    assert server.problem == "the fork server did not start (no torch here)"


def test_the_collected_matrix_cases_are_exported_ahead_not_for_collect_only():
    import types

    from pytest_sme2 import plugin
    from pytest_sme2.measure.matrix import Case

    asked: list[list] = []
    cases = [Case("toy_cnn", "fp32", 1), Case("toy_cnn", "fp32", 2),
             Case("tiny_llama", "8da8w", 1)]
    items = [types.SimpleNamespace(callspec=types.SimpleNamespace(params={key: c}),
                                   iter_markers=lambda name: iter([]))
             for key, c in zip(("sme2_case", "sme2_case", "sme2_llm_case"), cases)]
    items.append(types.SimpleNamespace(iter_markers=lambda name: iter([])))  # no case
    bench = types.SimpleNamespace(export_ahead=lambda points, say: asked.append(points),
                                  config=Sme2Config())
    for collect_only in (True, False):
        config = types.SimpleNamespace(stash={plugin.SESSION_KEY: bench},
                                       option=types.SimpleNamespace(collectonly=collect_only))
        plugin.pytest_collection_finish(types.SimpleNamespace(items=items, config=config))
    assert asked == [[("toy_cnn", "fp32"), ("toy_cnn", "fp32"), ("tiny_llama", "8da8w")]]
