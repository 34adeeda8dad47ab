"""The evidence process of a benchmark (``--sme2-sample``): one more runner process after the
first block, never a timed one, whose kernels join the block's evidence; when it fails, the
measured block is kept and says why. On the host with ``on`` (x86 has no SME2: ``auto`` does
not sample here)."""

from __future__ import annotations

from pathlib import Path

from pytest_sme2.measure.block import BenchmarkRun, run_benchmark
from pytest_sme2.devices.host import HostDevice
from pytest_sme2.runners.base import RunnerError, RunOutcome, RunRequest
from pytest_sme2.runners.native import NativeRunner, build_native_runner
from pytest_sme2.measure.settings import BenchSettings


def _settings(tmp_path: Path, sample: str, cache: Path) -> BenchSettings:
    return BenchSettings(runs=5, warmup=1, report_dir=tmp_path, timeout_s=300, loads=1,
                         sample=sample, cache_dir=cache)


def test_the_host_samples_its_runner_when_asked(tmp_path, export_cache):
    runner = NativeRunner.from_build(build_native_runner())
    result = run_benchmark(BenchmarkRun("toy_cnn", label="toy"), runner, HostDevice(),
                           _settings(tmp_path, "on", export_cache))
    ev = result.kernel_evidence
    assert ev.samples_total and ev.samples_total > 0, ev
    assert Path(result.context.kernel_sample).is_file() and result.context.sample_problem is None
    assert ev.sme2 == "absent"              # x86: the hwcaps settle it, sampling adds a note
    assert "sampling: no SME2 micro-kernel in" in ev.reason
    # The timed block is the block's own process: its ETDump has the asked-for runs only.
    assert len(result.e2e_ms) == 5


def test_auto_does_not_sample_where_sme2_cannot_run(tmp_path, export_cache):
    runner = NativeRunner.from_build(build_native_runner())
    result = run_benchmark(BenchmarkRun("toy_cnn", label="toy"), runner, HostDevice(),
                           _settings(tmp_path, "auto", export_cache))
    assert result.kernel_evidence.samples_total is None and result.context.kernel_sample is None


class _SamplerBreaks(HostDevice):
    def run(self, runner, request: RunRequest) -> RunOutcome:
        if request.kernel_sample is not None:
            raise RunnerError("runner 'native' wrote no kernel samples at /x: the preload "
                              "library did not run in its process")
        return super().run(runner, request)


def test_a_failed_evidence_process_keeps_the_measured_block(tmp_path, export_cache):
    lines: list[str] = []
    runner = NativeRunner.from_build(build_native_runner())
    result = run_benchmark(BenchmarkRun("toy_cnn", label="toy", progress=lines.append), runner,
                           _SamplerBreaks(), _settings(tmp_path, "on", export_cache))
    assert len(result.e2e_ms) == 5 and result.kernel_evidence.samples_total is None
    problem = result.context.sample_problem
    assert problem.startswith("kernel sampling failed: runner 'native' wrote no kernel samples")
    assert any(line == f"toy: {problem}" for line in lines)
    assert result.to_json()["sample_problem"] == problem
