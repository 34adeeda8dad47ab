"""The python runner through its fork server, on a real .pte: the same results as a fresh
interpreter, a fresh runtime in every run, timeouts that leave nothing running, and a server that
goes away with its runner."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from pytest_sme2.analysis.latency import e2e_per_run
from pytest_sme2.devices.host import HostDevice
from pytest_sme2.readers.etdump import read_etdump
from pytest_sme2.runners.base import RunnerError, RunRequest
from pytest_sme2.runners.python import PythonRunner


@pytest.fixture(scope="module")
def runner():
    r = PythonRunner()
    yield r
    r.close()


def _request(tmp_path: Path, toy_export, name: str, **kw) -> RunRequest:
    return RunRequest(pte=toy_export.pte, etdump=tmp_path / f"{name}.etdump",
                      inputs=toy_export.inputs, outputs=tmp_path / f"{name}.bin", **kw)


def test_forked_runs_give_what_a_fresh_interpreter_gives(tmp_path, toy_export, runner):
    host = HostDevice()
    forked = host.run(runner, _request(tmp_path, toy_export, "forked", runs=5, warmup=1))
    fresh = host.run(PythonRunner(fork=False),
                     _request(tmp_path, toy_export, "fresh", runs=5, warmup=1))
    assert runner.server.problem is None
    # Same summary, but for the timings and memory figures: a forked process shares the
    # server's pages (its resident memory starts lower than a fresh interpreter's).
    same = ("threads", "executions", "rss_after_load_includes", "peak_includes")
    one, other = (json.loads(out.stdout.splitlines()[-1]) for out in (forked, fresh))
    assert {k: one[k] for k in same} == {k: other[k] for k in same}
    assert set(one) == set(other)
    assert (tmp_path / "forked.bin").read_bytes() == (tmp_path / "fresh.bin").read_bytes()
    a, b = read_etdump(forked.etdump), read_etdump(fresh.etdump)
    assert list(a["name"]) == list(b["name"])       # same events, in the same order
    assert len(e2e_per_run(a)) == len(e2e_per_run(b)) == 6


def test_every_run_sizes_its_own_thread_pool(tmp_path, toy_export, runner):
    """The server holds no runtime state: each run's pool is the size it asked for."""
    host = HostDevice()
    for i, threads in enumerate((2, 1, 2)):
        out = host.run(runner, _request(tmp_path, toy_export, f"t{i}", threads=threads, runs=2,
                                        warmup=0))
        assert json.loads(out.stdout.splitlines()[-1])["threads"] == threads


def test_a_failing_run_reports_like_a_fresh_one(tmp_path, runner):
    empty = tmp_path / "model.pte"
    empty.write_bytes(b"")
    with pytest.raises(RunnerError) as ei:
        HostDevice().run(runner, RunRequest(pte=empty, etdump=tmp_path / "o.etdump"))
    assert str(ei.value) == (f"runner 'python' on model.pte exited with status 1; stderr: "
                             f"{empty}: empty .pte file, not an ExecuTorch program (export it "
                             "again)")


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry))
    return out


def test_a_timeout_kills_the_forked_run_too(tmp_path, toy_export, runner):
    request = _request(tmp_path, toy_export, "slow", runs=10_000_000, warmup=0, timeout_s=1.0)
    with pytest.raises(RunnerError, match="no result within 1 s; killed"):
        HostDevice().run(runner, request)
    server = runner.server._proc.pid
    deadline = time.monotonic() + 10
    while _children(server) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _children(server) == []


def test_closing_the_runner_stops_its_server(tmp_path, toy_export):
    r = PythonRunner()
    HostDevice().run(r, _request(tmp_path, toy_export, "one", runs=1, warmup=0))
    proc, folder = r.server._proc, Path(r.server._address).parent
    r.close()
    assert proc.poll() is not None and not folder.exists()
