"""The native C++ runner, built for real against the installed executorch wheel and run on a
real toy_cnn export; outputs are checked against the Python runtime's."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from pytest_sme2.analysis.latency import e2e_per_run
from pytest_sme2.devices.host import HostDevice
from pytest_sme2.readers.etdump import read_etdump
from pytest_sme2.runners import RunnerError, RunRequest
from pytest_sme2.runners.native import cmake as native_cmake
from pytest_sme2.runners.binary import BinaryRunner
from pytest_sme2.runners.native import NativeRunner, build_native_runner
from pytest_sme2.runners.python import PythonRunner
from pytest_sme2.readers.tensorfile import read_tensors


@pytest.fixture(scope="module")
def build(tmp_path_factory) -> tuple[Path, Path, float]:
    """(binary, cache folder, cold build seconds), built once for the module."""
    cache = tmp_path_factory.mktemp("native-runner")
    t0 = time.perf_counter()
    binary = build_native_runner(cache)
    return binary, cache, time.perf_counter() - t0


@pytest.fixture(scope="module")
def runner(build) -> NativeRunner:
    return NativeRunner.from_build(build[0])


def _request(tmp_path: Path, toy_export, name: str, **kw) -> RunRequest:
    return RunRequest(pte=toy_export.pte, etdump=tmp_path / f"{name}.etdump",
                      inputs=toy_export.inputs, outputs=tmp_path / f"{name}.out.bin",
                      timeout_s=120, **kw)


def test_build_records_its_labels_and_libraries(runner, build):
    binary, _, seconds = build
    assert binary.name == "sme2_runner" and binary.stat().st_size > 0
    labels = runner.info.labels
    assert runner.info.name == runner.info.kind == "native"
    assert labels["executorch"] == "1.5.1" and labels["build_type"] == "Release"
    assert labels["sme2"] == "unknown" and labels["compiler"]
    files = runner.device_files()
    assert files[0] == binary
    assert {p.name for p in files[1:]} >= {"libexecutorch.so", "libexecutorch_backend_xnnpack.so"}
    assert all(p.is_file() for p in files)
    print(f"cold build: {seconds:.1f} s")


def test_native_run_is_traced_with_warmup_and_matches_python(tmp_path, runner, toy_export):
    host = HostDevice()
    req = _request(tmp_path, toy_export, "native", threads=1, runs=5, warmup=3)
    out = host.run(runner, req)
    assert "Iteration 5 of 5:" in out.stdout
    assert "Model executed successfully 5 time(s)" in out.stdout
    events = read_etdump(out.etdump)
    assert len(e2e_per_run(events)) == req.warmup + req.runs  # warm-ups are traced too
    delegated = events[events["delegated"]]
    assert not delegated.empty and delegated["name"].str.contains("Convolution").any()
    assert (events["name"] == "DELEGATE_CALL").any()

    # The native output is the 8th run's: inputs must be set before every run, since memory
    # planning may reuse the input buffer (setting them once gave a different 2nd output).
    py_req = _request(tmp_path, toy_export, "python", runs=1, warmup=0)
    host.run(PythonRunner(), py_req)
    (native_out,), (python_out,) = read_tensors(req.outputs), read_tensors(py_req.outputs)
    assert native_out.dtype == python_out.dtype and native_out.shape == python_out.shape
    assert np.allclose(native_out, python_out, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("which", ["native", "python"])
def test_untraced_timed_runs_then_traced_ones_in_one_process(tmp_path, runner, toy_export,
                                                             which):
    """The timed runs carry no tracer (their times are the runner's clock), the ETDump holds
    only the traced runs after them, and the start-up and outputs are still there."""
    from pytest_sme2.analysis.runner_summary import parse_summary
    from pytest_sme2.analysis.timing import process_runs

    host = HostDevice()
    chosen = runner if which == "native" else PythonRunner()
    req = _request(tmp_path, toy_export, which, threads=1, runs=6, warmup=2, untraced=True,
                   trace_runs=3, trace_warmup=1)
    out = host.run(chosen, req)
    summary = parse_summary(out.stdout)
    assert summary.timing == "untraced" and len(summary.execute_ms) == 8
    assert summary.traced is not None and summary.traced.executions == 4
    assert summary.clock_overhead_ns is not None and 0 < summary.clock_overhead_ns < 10_000
    assert summary.nonfinite_outputs == 0
    events = read_etdump(out.etdump)
    assert len(e2e_per_run(events)) == 4                 # the traced pass alone
    runs = process_runs(events, summary, warmup=2, source=str(out.etdump))
    assert len(e2e_per_run(runs.timed)) == 8 and runs.timing.mode == "untraced"
    assert read_tensors(req.outputs)[0].size > 0
    # Nothing traced: no ETDump at all where the runner can leave it out (ours, native).
    if which == "native":
        bare = _request(tmp_path, toy_export, "bare", runs=2, warmup=0, untraced=True)
        out = host.run(runner, bare)
        assert not bare.etdump.exists()
        assert len(parse_summary(out.stdout).execute_ms) == 2


def test_missing_model_is_one_line_and_nonzero(tmp_path, runner, build):
    missing = tmp_path / "nope.pte"
    proc = subprocess.run([str(build[0]), "--model_path", str(missing), "--etdump_path",
                           str(tmp_path / "x.etdump"), "--num_executions", "1",
                           "--cpu_threads", "1"], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines() == [f"{missing}: model file not found"]
    with pytest.raises(RunnerError, match=r"exited with status 1; stderr: .*nope.pte: model file "
                                          r"not found"):
        HostDevice().run(runner, RunRequest(pte=missing, etdump=tmp_path / "y.etdump"))


def test_bad_input_size_and_missing_etdump_folder(tmp_path, build, toy_export):
    short = tmp_path / "short.bin"
    short.write_bytes(b"\0" * 100)
    base = [str(build[0]), "--model_path", str(toy_export.pte), "--num_executions", "1",
            "--cpu_threads", "1"]
    proc = subprocess.run(base + ["--etdump_path", str(tmp_path / "a.etdump"), "--input_file",
                                  str(short)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == (
        f"{short}: holds 100 bytes, the model's inputs need 12288 (float32[1, 3, 32, 32])")
    nodir = tmp_path / "no" / "a.etdump"
    proc = subprocess.run(base + ["--etdump_path", str(nodir)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 1  # upstream aborts here (SIGABRT); we say why
    assert proc.stderr.strip().splitlines()[-1] == (
        f"{nodir}: cannot write the ETDump: folder {nodir.parent} does not exist")


def test_upstream_flags_through_binary_runner(tmp_path, build, toy_export):
    """The native binary accepts executor_runner's argv: BinaryRunner folds warm-up into
    --num_executions and still gets warmup + runs traced executions."""
    binary_runner = BinaryRunner("native-as-upstream", build[0], labels={"sme2": "unknown"})
    binary_runner.check_host()
    req = RunRequest(pte=toy_export.pte, etdump=tmp_path / "b.etdump", threads=1, runs=4,
                     warmup=2, timeout_s=120)
    out = HostDevice().run(binary_runner, req)
    assert len(e2e_per_run(read_etdump(out.etdump))) == 6


def test_second_build_is_a_cache_hit(build, monkeypatch):
    binary, cache, _ = build
    calls: list[list[str]] = []
    real_run = subprocess.run

    def spy(argv, *a, **kw):
        calls.append(list(argv))
        return real_run(argv, *a, **kw)

    monkeypatch.setattr(native_cmake.subprocess, "run", spy)
    t0 = time.perf_counter()
    assert build_native_runner(cache) == binary
    assert time.perf_counter() - t0 < 1.0
    assert not any(Path(c[0]).name == "cmake" for c in calls)  # only `c++ --version` for the key


def test_concurrent_builds_build_once(tmp_path):
    """Two processes (as two pytest-xdist workers) asking at once: one builds, one waits."""
    code = ("import sys; from pytest_sme2.runners.native import build_native_runner as b; "
            "print(b(sys.argv[1], progress=lambda m: print('PROGRESS', m)))")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
    outs = [p.communicate(timeout=600)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert sum(o.count("PROGRESS building") for o in outs) == 1
    paths = {o.strip().splitlines()[-1] for o in outs}
    assert len(paths) == 1 and Path(paths.pop()).is_file()


def test_build_failure_names_stage_error_and_log(tmp_path, monkeypatch):
    fake = tmp_path / "fakecxx"
    fake.write_text("#!/bin/sh\n"
                    "if [ \"$1\" = --version ]; then echo 'fakecxx version 0.1'; exit 0; fi\n"
                    "echo 'runner.cpp:1:1: error: this compiler is broken' >&2; exit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("CXX", str(fake))
    with pytest.raises(RunnerError) as ei:
        build_native_runner(tmp_path / "cache")
    msg = str(ei.value)
    assert msg.startswith("building the native runner failed at the configure stage: ")
    assert "\n" not in msg
    log = Path(msg.rsplit("(full log: ", 1)[1].rstrip(")"))
    assert log.is_file() and "this compiler is broken" in log.read_text()
    assert not any(p.name.startswith(".tmp-") for p in (tmp_path / "cache").iterdir())
