"""Load time, first inference and memory measured for real: toy_cnn through the native runner
and the Python runtime on the host, each cold load a fresh process."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from pytest_sme2.analysis.latency import e2e_per_run
from pytest_sme2.measure.block import BenchmarkRun, run_benchmark
from pytest_sme2.devices.host import HostDevice
from pytest_sme2.readers.etdump import read_etdump
from pytest_sme2.runners.base import RunnerError
from pytest_sme2.runners.native import NativeRunner, build_native_runner
from pytest_sme2.runners.python import PythonRunner
from pytest_sme2.measure.settings import BenchSettings


@pytest.fixture(scope="module")
def native() -> NativeRunner:
    return NativeRunner.from_build(build_native_runner())


@pytest.mark.parametrize("kind", ["native", "python"])
def test_every_cold_load_is_a_process_with_its_own_figures(tmp_path, export_cache, kind, native):
    runner = native if kind == "native" else PythonRunner()
    settings = BenchSettings(runs=3, warmup=1, report_dir=tmp_path, cache_dir=export_cache,
                             timeout_s=300, loads=3)
    r = run_benchmark(BenchmarkRun("toy_cnn", label=f"toy-{kind}"), runner, HostDevice(),
                      settings)
    s = r.startup
    assert s.pte_bytes == Path(r.pte).stat().st_size
    assert len(s.processes) == s.loads == 3
    for p in s.processes:
        assert p.method_load_ms > 0 and p.program_load_ms > 0
        assert p.load_ms == pytest.approx(p.method_load_ms + p.program_load_ms, abs=1e-5)
        assert p.first_inference_ms > 0
        # Peak memory: at least what the process held after the load.
        assert p.peak_rss_kb > 0 and p.load_rss_kb > 0 and p.peak_rss_kb >= p.load_rss_kb
    # The block's own process is the first: its first inference is its first timed run,
    # untraced (the runner's clock: the first row of its timed runs' CSV), not the ETDump's
    # first traced run, which comes after the timed ones.
    timed = pd.read_csv(Path(r.etdump).with_name(f"{kind}_timed_runs.csv"))
    assert s.processes[0].first_inference_ms == pytest.approx(timed["e2e_ms"][0], abs=1e-5)
    assert e2e_per_run(read_etdump(r.etdump)).size == 1 + 10    # the traced runs alone
    # The load-only processes trace nothing: no ETDump of theirs.
    assert not list(Path(r.etdump).parent.glob(f"{kind}.load*.etdump"))
    assert s.load_source == "method load (runner's timer) + Module::load (runner's timer)"
    if kind == "python":
        assert "first run" not in s.memory_source      # the method loads apart from it
        assert "torch" in s.memory_source
    else:
        assert s.memory_source == "VmHWM / VmRSS of the runner process"


def test_one_load_means_no_extra_process(tmp_path, export_cache, native):
    settings = BenchSettings(runs=2, warmup=0, report_dir=tmp_path, cache_dir=export_cache,
                             timeout_s=300, loads=1)
    class Counting(HostDevice):
        started = 0

        def run(self, runner, request):
            Counting.started += 1
            return super().run(runner, request)

    r = run_benchmark(BenchmarkRun("toy_cnn", label="toy"), native, Counting(), settings)
    assert r.startup.loads == 1 and Counting.started == 1     # the block's own process only


def test_a_failed_load_only_process_keeps_the_measured_block(tmp_path, export_cache, native):
    """The block was measured: a load-only process that fails after it costs the extra cold
    loads, said in one line, not the benchmark."""
    class FailsAfterTheBlock(HostDevice):
        def run(self, runner, request):
            if request.runs == 1 and request.warmup == 0:   # a load-only process
                raise RunnerError("runner 'native' on model.pte was killed by SIGKILL")
            return super().run(runner, request)

    said: list[str] = []
    settings = BenchSettings(runs=3, warmup=1, report_dir=tmp_path, cache_dir=export_cache,
                             timeout_s=300, loads=3)
    r = run_benchmark(BenchmarkRun("toy_cnn", label="toy", progress=said.append), native,
                      FailsAfterTheBlock(), settings)
    assert len(r.e2e_ms) == 3 and r.startup.loads == 1
    assert r.startup.problem == ("load-only process 1 of 2 failed: runner 'native' on "
                                 "model.pte was killed by SIGKILL")
    assert said == [f"toy: {r.startup.problem}"]
    assert r.to_json()["startup"]["problem"] == r.startup.problem


def test_every_measured_process_runs_inside_the_callers_measuring_context(tmp_path,
                                                                          export_cache, native):
    """The session stops its fork server (still importing) around each measured process and
    lets it go on in between: the block's process and the load-only ones, nothing else."""
    from contextlib import contextmanager

    inside, seen = [False], []

    @contextmanager
    def measuring():
        inside[0] = True
        try:
            yield
        finally:
            inside[0] = False

    class Watched(HostDevice):
        def run(self, runner, request):
            seen.append(inside[0])
            return super().run(runner, request)

        def facts(self):
            assert not inside[0]   # the analysis and everything after: outside
            return super().facts()

    settings = BenchSettings(runs=2, warmup=0, report_dir=tmp_path, cache_dir=export_cache,
                             timeout_s=300, loads=3)
    run_benchmark(BenchmarkRun("toy_cnn", label="toy", measuring=measuring), native, Watched(),
                  settings)
    assert seen == [True, True, True] and not inside[0]
