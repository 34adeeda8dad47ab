"""The promise, proved in inner pytest sessions: for every bad input or fault there is one clear
line naming the file, device or option (and what to do); the right outcome (failed, error or
usage error, never passed); the other benchmarks of the session go on; everything measured
stays in results.json and report.md; no traceback. The numbered list of cases, with the tests
proving each (here and elsewhere), is tests/faults/README.md.

Fault runners are tiny shell scripts given as ``--runner NAME=PATH`` (a binary runner accepts
scripts on the host); good benchmarks use the native runner, built once into its default cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import random
import re
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from pytest_sme2.measure.block import artifact_dir
from pytest_sme2.devices.host import HostDevice
from pytest_sme2.runners import RunnerError, RunRequest
from pytest_sme2.runners.binary import host_machine
from pytest_sme2.runners.python import PythonRunner
from pytest_sme2.readers.tensorfile import write_tensors
from tests.fakes.etdumps import Ev, execute_run, make_etdump


FAST = ("--runs=3", "--warmup=1")           # 4 executions per benchmark
OPS = [("Convolution (NHWC, F32) IGEMM #1", 5000)]

# What a runner script does with upstream's flags: find --etdump_path, then BODY.
ARGS = """#!/bin/sh
while [ $# -gt 0 ]; do
  case "$1" in --etdump_path) etdump=$2; shift ;; esac
  shift
done
"""


@pytest.fixture(autouse=True)
def _inner_sessions_share_caches(inner_session_env):
    pass


def _script(path: Path, body: str, executable: bool = True) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(ARGS + body)
    if executable:
        path.chmod(0o755)
    return path


def _foreign_elf(path: Path) -> tuple[Path, str]:
    """An executable ELF header of the architecture this host is not."""
    machine, arch = (62, "x86_64") if host_machine() == "aarch64" else (183, "aarch64")
    head = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8) + struct.pack("<HH", 2, machine)
    path.write_bytes(head + bytes(44))
    path.chmod(0o755)
    return path, arch


def section(res: pytest.RunResult, test: str) -> list[str]:
    """The non-blank lines pytest printed under a test's FAILURES/ERRORS header."""
    header = re.compile(r"^_+ (ERROR at setup of )?" + re.escape(test) + r" _+$")
    lines = res.outlines
    start = next((i for i, ln in enumerate(lines) if header.match(ln)), None)
    assert start is not None, f"no failure section for {test}"
    out = []
    for ln in lines[start + 1:]:
        if ln.startswith(("____", "====")):
            break
        if ln.strip():
            out.append(ln)
    return out


def one_line(res: pytest.RunResult, test: str) -> str:
    lines = section(res, test)
    assert len(lines) == 1, f"{test}: expected one line, got {lines}"
    return lines[0]


def no_traceback(res: pytest.RunResult) -> None:
    text = res.stdout.str() + res.stderr.str()
    assert "Traceback" not in text and "During handling of the above exception" not in text
    assert not any(ln.startswith("E   ") or ln.startswith(">   ") for ln in res.outlines)


def results(folder: Path) -> list[dict]:
    doc = json.loads((folder / "results.json").read_text())
    assert doc["schema"] == "pytest-sme2/results/1"
    return doc["benchmarks"]


def report_says(folder: Path, n: int) -> None:
    text = (folder / "report.md").read_text()
    assert f"{n} benchmark{'' if n == 1 else 's'} and 0 comparisons" in text


# -- runners -------------------------------------------------------------------------------------

# A runner path that is missing, or a folder, stops the session when it is configured (the
# options test below).
RUNNER_FAULTS = ["noexec", "foreign", "segv", "exit3", "hang",
                 "no_etdump", "stale", "not_etdump", "truncated", "zero_runs", "no_execute",
                 "fewer_runs", "binary_stderr"]

AROUND = """
import pytest

def test_before(sme2_bench):
    sme2_bench("toy_cnn", runner="native")

@pytest.mark.parametrize("runner", {faults!r})
def test_fault(sme2_bench, runner):
    sme2_bench("toy_cnn", runner=runner)

def test_after(sme2_bench):
    sme2_bench("toy_cnn", runner="native")
"""


@pytest.fixture
def runner_session(pytester, export_cache, toy_export, run_pytest):
    """One session: a good benchmark, every runner fault, a good benchmark. The ETDump-writing
    faults copy crafted traces (4 executions asked: 1 warm-up + 3 timed)."""
    bins, traces = pytester.path / "bin", pytester.path / "traces"
    traces.mkdir()
    good = make_etdump([execute_run(i * 100_000, OPS) for i in range(4)])
    crafted = {
        "truncated": good[: len(good) // 2],
        "zero_runs": make_etdump([]),
        "no_execute": make_etdump([[Ev("OPERATOR_CALL", 0, 10)]] * 4),
        "fewer_runs": make_etdump([execute_run(i * 100_000, OPS) for i in range(2)]),
        "not_etdump": b"this is not a trace\n" * 20,
    }
    for name, data in crafted.items():
        (traces / f"{name}.etdump").write_bytes(data)
        _script(bins / f"{name}.sh", f'cp "{traces / name}.etdump" "$etdump"\n')
    _script(bins / "noexec.sh", "exit 0\n", executable=False)
    foreign, arch = _foreign_elf(bins / "foreign")
    _script(bins / "segv.sh", "kill -SEGV $$\n")
    _script(bins / "exit3.sh", 'echo "loading the model" >&2\necho "cannot open model" >&2\n'
                               "exit 3\n")
    _script(bins / "hang.sh", "exec sleep 60\n")
    _script(bins / "no_etdump.sh", "exit 0\n")
    _script(bins / "stale.sh", "exit 0\n")
    _script(bins / "binary_stderr.sh", r"printf 'bad header \377\376\n' >&2; exit 1" + "\n")
    paths = {"foreign": foreign}
    for name in RUNNER_FAULTS:
        paths.setdefault(name, bins / f"{name}.sh")
    # A valid trace with the right number of runs, left where the 'stale' benchmark writes
    # its own: if it were read, that benchmark would pass with old numbers.
    stale = artifact_dir(pytester.path / "out", "test_faults.py::test_fault[stale]")
    stale.mkdir(parents=True)
    (stale / "stale.etdump").write_bytes(good)
    pytester.makepyfile(test_faults=AROUND.format(faults=RUNNER_FAULTS))
    res = run_pytest(f"--sme2-cache-dir={export_cache}", *FAST, "--report-dir=out",
               "--sme2-timeout=2", *[f"--runner={n}={p}" for n, p in paths.items()])
    return res, paths, arch, good


def test_runner_faults_fail_one_line_each_and_the_rest_go_on(runner_session, pytester):
    res, paths, arch, good = runner_session
    out = pytester.path / "out"

    def etdump(name: str) -> Path:
        return artifact_dir(out, f"test_faults.py::test_fault[{name}]") / f"{name}.etdump"

    res.assert_outcomes(passed=2, failed=len(RUNNER_FAULTS))
    assert res.ret == pytest.ExitCode.TESTS_FAILED
    no_wrote = "succeeded but wrote no ETDump at {} (was it built with the event tracer?)"
    expected = {
        "noexec": f"runner 'noexec': {paths['noexec']} is not executable (chmod +x it)",
        "foreign": f"runner 'foreign': {paths['foreign']} is an {arch} binary and this host is "
                   f"{host_machine()}; run it on a device of that architecture (e.g. --device "
                   "android) or build it for the host",
        "segv": "runner 'segv' on model.pte was killed by SIGSEGV; stderr: (no stderr)",
        "exit3": "runner 'exit3' on model.pte exited with status 3; stderr: loading the model | "
                 "cannot open model",
        "hang": "runner 'hang' on model.pte: no result within 2 s; killed (raise "
                "--sme2-timeout or lower --runs)",
        "no_etdump": "runner 'no_etdump' on model.pte " + no_wrote.format(etdump("no_etdump")),
        "stale": "runner 'stale' on model.pte " + no_wrote.format(etdump("stale")),
        "not_etdump": f"{etdump('not_etdump')}: not an ETDump (no 'ED00' flatbuffer identifier)",
        "truncated": f"{etdump('truncated')}: truncated ETDump ({len(good) // 2} of "
                     f"{len(good)} bytes; was the run interrupted while writing it?)",
        "zero_runs": f"{etdump('zero_runs')}: the ETDump holds no Execute runs (nothing was "
                     "executed)",
        "no_execute": f"{etdump('no_execute')}: no Method::execute events in 4 runs (the "
                      "runtime's profiler did not record the method; was it built with the "
                      "event tracer?)",
        "fewer_runs": f"{etdump('fewer_runs')}: 2 runs with Method::execute, expected 4 "
                      "(1 warm-up + 3 timed)",
        "binary_stderr": "runner 'binary_stderr' on model.pte exited with status 1; stderr: "
                         "bad header \ufffd\ufffd",
    }
    assert set(expected) == set(RUNNER_FAULTS)
    for name, message in expected.items():
        assert one_line(res, f"test_fault[{name}]") == message
    no_traceback(res)
    # The stale trace was removed before the run, never read as this run's.
    assert not etdump("stale").exists()
    # Both good benchmarks, in order, in results.json and report.md.
    assert [b["nodeid"] for b in results(out)] == ["test_faults.py::test_before",
                                                   "test_faults.py::test_after"]
    report_says(out, 2)


# -- .pte files ----------------------------------------------------------------------------------

PTE_FAULTS = {  # model alias -> what its cached model.pte becomes
    "pte_empty": lambda good: b"",
    "pte_random": lambda good: random.Random(8).randbytes(4096),
    "pte_refused": lambda good: good[:4] + b"ET99" + good[8:],     # a future format version
    "pte_truncated": lambda good: good[: len(good) // 2],
}
PTE_BENCH = """
import pytest

def test_before(sme2_bench):
    sme2_bench("toy_cnn", runner="native")

@pytest.mark.parametrize("runner", ["native", "python"])
@pytest.mark.parametrize("model", {models!r})
def test_pte(sme2_bench, model, runner):
    sme2_bench(model, runner=runner)

def test_after(sme2_bench):
    sme2_bench("toy_cnn", runner="native")
"""
PTE_CONFTEST = """
from pytest_sme2_models import register_model

for name in {models!r}:
    register_model(name, "pytest_sme2_models.toy_cnn:build")   # same builder: same export cache key
"""


@pytest.fixture
def damaged_cache(pytester, toy_export) -> dict[str, Path]:
    """A private export cache holding toy_cnn and one alias of it per bad model.pte, each
    entry consistent (its meta.json records the bad file's hash): what a cache holds when an
    export wrote a program this runtime refuses. (A .pte damaged *after* its export no longer
    matches its recorded hash and is exported again: tests/integration/test_export.py.)"""
    cache = pytester.path / "cache"
    shutil.copytree(toy_export.folder, cache / "toy_cnn" / toy_export.folder.name)
    good = toy_export.pte.read_bytes()
    ptes = {}
    for model, damage in PTE_FAULTS.items():
        folder = cache / model / toy_export.folder.name
        shutil.copytree(toy_export.folder, folder)
        bad = damage(good)
        (folder / "model.pte").write_bytes(bad)
        meta = json.loads((folder / "meta.json").read_text())
        meta["pte_sha256"] = hashlib.sha256(bad).hexdigest()
        (folder / "meta.json").write_text(json.dumps(meta))
        ptes[model] = folder / "model.pte"
    ptes["toy_cnn"] = cache / "toy_cnn" / toy_export.folder.name / "model.pte"
    return ptes


def test_damaged_pte_in_the_export_cache_fails_naming_it(pytester, damaged_cache, run_pytest):
    """A cache hit whose model.pte is empty, random, refused or truncated fails that benchmark
    with the file's path, with both built-in runners; the others go on."""
    models = sorted(PTE_FAULTS)
    pytester.makeconftest(PTE_CONFTEST.format(models=models))
    # python runs of a file that passes the header check import the runtime (~5 s each):
    # those are kept to one (pte_refused); the truncated one is the same refusal as native's.
    bench = PTE_BENCH.format(models=models)
    pytester.makepyfile(test_pte=bench)
    res = run_pytest("--sme2-cache-dir=cache", *FAST, "--report-dir=out",
               "--deselect=test_pte.py::test_pte[pte_truncated-python]")
    res.assert_outcomes(passed=2, failed=7, deselected=1)
    p = damaged_cache
    status1 = "exited with status 1; stderr: "
    good, random_head = damaged_cache["toy_cnn"], PTE_FAULTS["pte_random"](b"")[4:8]
    # The native runner: the runtime's own error line (timestamped), then ours.
    native = {
        "pte_empty": ("file_data_loader.cpp:155", f"File {p['pte_empty']}: offset 0 + size 64 "
                      "> file_size_ 0, or overflow detected", "Error::InvalidArgument, error "
                      "0x12"),
        "pte_random": ("program.cpp:168", "Program identifier "
                       f"'{random_head.decode('utf-8', 'replace')}' != expected 'ET12'",
                       "Error::InvalidProgram, error 0x23"),
        "pte_refused": ("program.cpp:168", "Program identifier 'ET99' != expected 'ET12'",
                        "Error::InvalidProgram, error 0x23"),
        "pte_truncated": ("program.cpp:114", "File size is too small. Expected file size from "
                          f"extended header is {good.stat().st_size}, actual file size from "
                          f"data loader is {p['pte_truncated'].stat().st_size}",
                          "Error::InvalidProgram, error 0x23"),
    }
    for model, (where, log, error) in native.items():
        assert re.fullmatch(
            re.escape(f"runner 'native' on model.pte {status1}E ") + r"\d\d:\d\d:\d\d\.\d+ " +
            re.escape(f"executorch:{where}] {log} | {p[model]}: the ExecuTorch runtime refused "
                      f"the program ({error})"), one_line(res, f"test_pte[{model}-native]"))
    assert one_line(res, "test_pte[pte_empty-python]") == (
        f"runner 'python' on model.pte {status1}{p['pte_empty']}: empty .pte file, not an "
        "ExecuTorch program (export it again)")
    assert one_line(res, "test_pte[pte_random-python]") == (
        f"runner 'python' on model.pte {status1}{p['pte_random']}: not an ExecuTorch program "
        "(no 'ETnn' identifier in its header; export it again)")
    assert one_line(res, "test_pte[pte_refused-python]") == (
        f"runner 'python' on model.pte {status1}[program.cpp:168] Program identifier 'ET99' != "
        f"expected 'ET12' | {p['pte_refused']}: the ExecuTorch runtime refused the program "
        "(Failed to load program, error: 0x:23)")
    no_traceback(res)
    out = pytester.path / "out"
    assert [b["nodeid"] for b in results(out)] == ["test_pte.py::test_before",
                                                   "test_pte.py::test_after"]
    report_says(out, 2)


@pytest.mark.parametrize("runner", ["native", "python"])
def test_missing_pte_is_named_by_both_builtin_runners(tmp_path, runner):
    """Outside the export cache (library users, ``pytest-sme2 run``): the runner names the file.
    (In a session a cache entry without model.pte is simply exported again.)"""
    from pytest_sme2.runners import runner_from_spec

    pte = tmp_path / "gone" / "model.pte"
    req = RunRequest(pte=pte, etdump=tmp_path / "out" / "r.etdump", runs=3, warmup=1,
                     timeout_s=120)
    with pytest.raises(RunnerError) as ei:
        HostDevice().run(runner_from_spec(runner), req)
    what = "model file not found" if runner == "native" else "no such .pte file"
    assert str(ei.value) == (f"runner {runner!r} on model.pte exited with status 1; stderr: "
                             f"{pte}: {what}")


def test_python_runner_reports_a_failing_execution_in_one_line(tmp_path, toy_export):
    """Regression: an exception in forward() (here: inputs of the wrong shape) left a Python
    traceback as the stderr tail; now it is one line naming the .pte and the execution."""
    inputs = tmp_path / "wrong.bin"
    write_tensors(inputs, [np.zeros((1, 1), dtype=np.float32)])
    req = RunRequest(pte=toy_export.pte, etdump=tmp_path / "out" / "r.etdump", runs=3, warmup=1,
                     inputs=inputs, timeout_s=120)
    with pytest.raises(RunnerError) as ei:
        HostDevice().run(PythonRunner(), req)
    assert str(ei.value) == (
        "runner 'python' on model.pte exited with status 1; stderr: [tensor_impl.cpp:108] "
        "Attempted to change the tensor rank which is immutable: old=4, new=2 | "
        "[method.cpp:1243] Error resizing tensor at input 0 | "
        f"{toy_export.pte}: execution 1 of 4 failed (Failed to execute method forward, error: "
        "0x10)")


# -- options -------------------------------------------------------------------------------------

USAGE = ("expected NAME=python, NAME=native, NAME=text_llm_runner or "
         "NAME=/path/to/executor_runner[,libs=DIR][,label=value...]")


@pytest.mark.parametrize("args,message", [
    (["--runner=x="], f"--runner 'x=': nothing after '='; {USAGE}"),
    (["--runner=a b=native"], f"--runner 'a b=native': the name 'a b' must be letters, "
                              f"digits, '_', '.' or '-'; {USAGE}"),
    (["--runner=x=/bin/true,sme2"], f"--runner 'x=/bin/true,sme2': 'sme2' is not key=value; "
                                    f"{USAGE}"),
    (["--runner=a=native", "--runner=a=python"], "--runner 'a=python': a runner named 'a' is "
                                                 "already configured"),
    # Issue 49, item 15: accepted, then listed in report.md as "x (configured, unused)".
    (["--runner=x=/nonexistent/runner"], "--runner 'x=/nonexistent/runner': runner "
                                         "/nonexistent/runner does not exist; give the path of "
                                         "your executor_runner (or NAME=native, NAME=python)"),
    (["--runner=x=/tmp"], "--runner 'x=/tmp': /tmp is a folder; give the path of the "
                          "executable"),
    (["--runs=-3"], "--runs must be a positive number of timed runs, got -3"),
    (["--runs=0"], "--runs must be a positive number of timed runs, got 0"),
    (["--sme2-timeout=0"], "--sme2-timeout must be a positive number of seconds, got 0"),
    (["--sme2-threads=two"], "--sme2-threads: 'two' is not a whole number of threads"),
    (["--sme2-dtypes=fp64"], "--sme2-dtypes: unknown dtype 'fp64'; choose from fp32, fp16, "
                             "int8, int8_dynamic"),
], ids=["runner-empty-target", "runner-bad-name", "runner-bad-label", "runner-twice",
        "runner-missing", "runner-folder",
        "runs-negative", "runs-zero", "timeout-zero", "threads-word", "dtype-unknown"])
def test_bad_options_stop_the_session_with_one_line_and_touch_nothing(pytester, args, message,
                                                                      run_pytest):
    """A usage error before anything runs: exit status 4, one line on stderr, no test run, and
    the previous session's results.json and report.md are left as they were."""
    pytester.makepyfile(test_b="def test_b(sme2_bench):\n    sme2_bench('toy_cnn')\n")
    previous = pytester.path / "sme2-report"
    previous.mkdir()
    (previous / "results.json").write_text('{"schema": "pytest-sme2/results/1"}\n')
    (previous / "report.md").write_text("# old\n")
    res = run_pytest(*args)
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert [ln for ln in res.errlines if ln.strip()] == [f"ERROR: {message}"]
    assert "collected" not in res.stdout.str()
    no_traceback(res)
    assert (previous / "results.json").read_text() == '{"schema": "pytest-sme2/results/1"}\n'
    assert (previous / "report.md").read_text() == "# old\n"
    assert sorted(p.name for p in previous.iterdir()) == ["report.md", "results.json"]


BAD_CALLS = """
import pytest

def test_before(sme2_bench):
    sme2_bench("toy_cnn", runner="native")

def test_unknown_runner(sme2_bench):
    sme2_bench("toy_cnn", runner="turbo")

def test_unknown_model(sme2_bench):
    sme2_bench("no_such_model", runner="native")

def test_unknown_dtype(sme2_bench):
    sme2_bench("toy_cnn", dtype="bf16", runner="native")

def test_zero_threads(sme2_bench):
    sme2_bench("toy_cnn", threads=0, runner="native")

def test_after(sme2_bench):
    sme2_bench("toy_cnn", runner="native")
"""


def test_bad_arguments_to_sme2_bench_fail_that_test_only(pytester, export_cache, toy_export,
                                                        run_pytest):
    pytester.makepyfile(test_calls=BAD_CALLS)
    res = run_pytest(f"--sme2-cache-dir={export_cache}", *FAST, "--runner=mine=native")
    res.assert_outcomes(passed=2, failed=4)
    assert one_line(res, "test_unknown_runner") == (
        "unknown runner 'turbo'; configured: mine, native, python, text_llm_runner (add one "
        "with --runner NAME=SPEC)")
    from pytest_sme2_models import registered_models

    builtin = ", ".join(m for m in registered_models()
                        if m in ("machine_probe", "mobilenet_v3_small", "mobilevit_small",
                                 "tiny_llama", "tiny_llama_plain", "toy_cnn", "vit_tiny"))
    assert one_line(res, "test_unknown_model") == (
        f"unknown model 'no_such_model'; registered models: {builtin} (register your own with "
        "pytest_sme2_models.register_model)")
    assert one_line(res, "test_unknown_dtype") == (
        "unknown dtype 'bf16'; choose one of fp32, fp16, int8, int8_dynamic")
    assert one_line(res, "test_zero_threads") == "threads must be 1 or more, got 0"
    no_traceback(res)
    out = pytester.path / "sme2-report"
    assert [b["nodeid"] for b in results(out)] == ["test_calls.py::test_before",
                                                   "test_calls.py::test_after"]
    report_says(out, 2)


# -- devices -------------------------------------------------------------------------------------

@pytest.mark.parametrize("device,message", [
    ("android", "no Android device is attached (adb lists none); connect one or use --device "
                "host"),
    ("android:NOPE123", "Android device 'NOPE123' is not attached; attached: none"),
], ids=["no-device", "unknown-serial"])
def test_the_only_device_missing_stops_the_session_with_one_line(pytester, adb_server,
                                                                 export_cache, toy_export,
                                                                 device, message, run_pytest):
    """Against a private adb server with no phone (ANDROID_ADB_SERVER_PORT is in the inner
    session's environment): the session's only device is missing, so it says so once and
    stops with a usage error before any test (not the same line under each of them); nothing
    is written."""
    assert adb_server.states() == {}
    pytester.makepyfile(test_d="""
        def test_one(sme2_bench):
            sme2_bench("toy_cnn", runner="native")

        def test_two(sme2_bench):
            sme2_bench("toy_cnn", runner="native")
    """)
    res = run_pytest(f"--sme2-cache-dir={export_cache}", *FAST, f"--device={device}")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    said = [ln for ln in res.errlines if message in ln]
    assert said == [f"ERROR: {message}"], res.errlines
    assert "test_one" not in res.stdout.str() and "Traceback" not in res.stderr.str()
    assert not (pytester.path / "sme2-report").exists()


# -- names and paths with spaces and shell metacharacters ----------------------------------------

WEIRD = "x;$(touch PWNED) 'q\" `id`"
WEIRD_CONFTEST = """
from pytest_sme2_models import register_model

register_model({model!r}, "pytest_sme2_models.toy_cnn:build")
"""
WEIRD_BENCH = """
MODEL = {model!r}

def test_weird_model_and_runner(sme2_bench):
    sme2_bench(MODEL, runner="weird")

def test_relative_runner(sme2_bench):
    sme2_bench("toy_cnn", runner="rel")
"""


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def test_metacharacters_in_model_report_cache_and_runner_paths(pytester, toy_export, run_pytest):
    """Spaces, ';', '$()', quotes and backquotes in a model name, the report folder, the cache
    folder and a runner's path (and a runner given by a relative ./path): both benchmarks pass,
    their results are recorded under those exact names, and nothing is written outside the
    report and cache folders (nothing was ever handed to a shell)."""
    from pytest_sme2.runners.native import build_native_runner

    native = build_native_runner()          # the build --runner x=native uses
    model = f"toy {WEIRD}"
    cache = pytester.path / f"cache {WEIRD}"
    shutil.copytree(toy_export.folder, cache / "toy_cnn" / toy_export.folder.name)
    shutil.copytree(toy_export.folder, cache / model / toy_export.folder.name)
    wrapper = f'#!/bin/sh\nexec "{native}" "$@"\n'
    weird_runner = pytester.path / f"bin {WEIRD}" / "run me;.sh"
    weird_runner.parent.mkdir()
    for script in (weird_runner, pytester.path / "rel runner.sh"):
        script.write_text(wrapper)
        script.chmod(0o755)
    pytester.makeconftest(WEIRD_CONFTEST.format(model=model))
    pytester.makepyfile(test_weird=WEIRD_BENCH.format(model=model))
    report = f"out {WEIRD}"
    before = _tree(pytester.path)
    # -p no:benchmark: pytest-benchmark, where a user has it, makes .benchmarks/ in any session
    # (pytest-sme2 no longer depends on it).
    res = run_pytest("-p", "no:benchmark", f"--sme2-cache-dir={cache.name}", *FAST,
               f"--report-dir={report}", f"--runner=weird={weird_runner}",
               "--runner=rel=./rel runner.sh")
    res.assert_outcomes(passed=2)
    no_traceback(res)
    benchmarks = results(pytester.path / report)
    assert [(b["model"], b["runner"]) for b in benchmarks] == [(model, "weird"),
                                                               ("toy_cnn", "rel")]
    assert benchmarks[0]["runner_info"]["labels"]["path"] == str(weird_runner)
    assert benchmarks[1]["runner_info"]["labels"]["path"] == str(pytester.path / "rel runner.sh")
    report_says(pytester.path / report, 2)
    # pytester's own: the inner session's output files and basetemp; Python's bytecode caches
    new = {p for p in _tree(pytester.path) - before if "__pycache__" not in p and
           p not in ("stdout", "stderr") and not p.startswith("runpytest-")}
    outside = sorted(p for p in new if not (p == report or p.startswith(report + "/") or
                                             p.startswith(cache.name + "/")))
    assert new and not outside, outside
    assert not list(pytester.path.rglob("PWNED")) and not (Path.cwd() / "PWNED").exists()


# -- interrupted session -------------------------------------------------------------------------

INTERRUPTED = """
def test_1(sme2_bench):
    sme2_bench("toy_cnn", runner="native")

def test_2(sme2_bench):
    sme2_bench("toy_cnn", threads=2, runner="native")

def test_3(sme2_compare):                   # Ctrl-C arrives while this comparison runs
    sme2_compare("native", "slow", "toy_cnn", blocks=2)

def test_4(sme2_bench):
    sme2_bench("toy_cnn", runner="native")
"""


def test_ctrl_c_in_the_middle_keeps_every_completed_result(pytester, export_cache, toy_export):
    """A real Ctrl-C (SIGINT to the session's process group) while the third test, a
    comparison, runs: pytest stops with status 2; results.json is valid and holds the two
    completed benchmarks, and report.md is written for them; both say the session was cut
    short, and name the comparison then running (issue 49, item 14: it looked complete)."""
    _script(pytester.path / "slow.sh", "exec sleep 60\n")
    pytester.makepyfile(test_i=INTERRUPTED)
    # The session as a terminal starts a foreground job: SIGINT not ignored. A process started
    # with SIGINT ignored (a background job of a non-interactive shell, nohup, some CI agents)
    # passes that on, and Python then installs no KeyboardInterrupt handler: the "Ctrl-C" below
    # did nothing, the slow runner ran on, test_3 failed, test_4 ran: status 1 (issue 32).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)   # reset at exec
    try:
        proc = pytester.popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                               f"--sme2-cache-dir={export_cache}", *FAST,
                               "--runner=slow=./slow.sh"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              start_new_session=True)
    finally:
        signal.signal(signal.SIGINT, previous)
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    pumping = threading.Thread(target=pump, daemon=True)
    pumping.start()
    seen: list[str] = []
    deadline = time.monotonic() + 120
    try:
        while not any(ln.startswith("sme2: toy_cnn fp32 t2 native: ") for ln in seen):
            line = lines.get(timeout=max(deadline - time.monotonic(), 0.1))
            assert line is not None, "".join(seen)
            seen.append(line)
        time.sleep(1.0)                     # the slow runner is running now
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=60) == pytest.ExitCode.INTERRUPTED
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        # Closed here, pass or fail: a pipe left to the garbage collector raises its
        # ResourceWarning in whichever later test a collection happens to run (issue 32).
        pumping.join(timeout=30)
        if not pumping.is_alive():
            proc.stdout.close()
    while (line := lines.get(timeout=10)) is not None:
        seen.append(line)
    text = "".join(seen)
    assert "KeyboardInterrupt" in text and "Traceback" not in text
    assert "2 passed" in text and "test_4" not in text
    out = pytester.path / "sme2-report"
    assert [b["nodeid"] for b in results(out)][:2] == ["test_i.py::test_1", "test_i.py::test_2"]
    session = json.loads((out / "results.json").read_text())["session"]
    assert session["interrupted"] == {"by": "KeyboardInterrupt (Ctrl-C)",
                                      "in_flight": "test_i.py::test_3", "comparison": True}
    assert (out / "report.md").read_text().split("\n")[2] == (
        "**Interrupted** by KeyboardInterrupt (Ctrl-C) while `test_i.py::test_3` was running (a "
        "comparison: the blocks it had measured are not in this report, a comparison is judged "
        "whole): this session is incomplete; what follows is what finished before it stopped.")
    assert [b["nodeid"] for b in results(out)] == ["test_i.py::test_1", "test_i.py::test_2"]
    assert [b["threads"] for b in results(out)] == [1, 2]
    assert all(len(b["e2e_ms"]) == 3 for b in results(out))
    report_says(out, 2)
    assert not list(out.glob(".results.json.*"))   # no temporary file left behind
