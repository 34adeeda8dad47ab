"""What a real benchmark writes beside its ETDump: toy_cnn exported and run by the native runner,
its trace (tests/unit/measure/test_trace.py) and its CSVs
(tests/unit/measure/test_report_csv.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_sme2.analysis.summary import analyze
from pytest_sme2.readers.etdump import read_etdump
from pytest_sme2.measure.artifacts.trace import median_run
from tests.unit.measure.test_report_csv import pandas_files
from tests.unit.measure.test_trace import check_viewer_parse


def test_a_real_toy_cnn_benchmark_writes_its_trace(tmp_path):
    """toy_cnn exported and run by the native runner: the trace beside the ETDump parses as a
    viewer parses it, and its outer slice is the median run's Method::execute."""
    from pytest_sme2.measure.block import BenchmarkRun, run_benchmark
    from pytest_sme2.devices.host import HostDevice
    from pytest_sme2.runners.native import NativeRunner, build_native_runner
    from pytest_sme2.measure.settings import BenchSettings

    runner = NativeRunner.from_build(build_native_runner())
    settings = BenchSettings(runs=5, warmup=1, report_dir=tmp_path, timeout_s=300)
    result = run_benchmark(BenchmarkRun("toy_cnn", label="toy"), runner, HostDevice(),
                           settings)
    path = Path(result.context.trace)
    assert path == Path(result.etdump).with_name("native.trace.json") and path.is_file()
    assert result.to_json()["trace"] == str(path)
    trace = json.loads(path.read_text())
    slices = check_viewer_parse(trace)
    events = read_etdump(result.etdump)
    analysis = analyze(events, warmup=1)
    run = trace["otherData"]["run"]
    assert run == median_run(events, warmup=1) and run >= 1
    # The trace is of the traced runs (the timed ones carry no tracer): their median run.
    assert result.timing.mode == "untraced" and result.timing.traced_runs == 10
    assert len(analysis.timed_e2e) == 10
    assert sorted(analysis.timed_e2e)[(10 - 1) // 2] == pytest.approx(analysis.e2e_all[run],
                                                                      abs=1e-6)
    (outer,) = [e for e in slices if e["depth"] == 0]
    assert outer["name"] == "Method::execute"
    assert outer["dur"] == pytest.approx(analysis.e2e_all[run] * 1000, abs=1e-3)
    names = {e["name"] for e in slices}
    assert "DELEGATE_CALL" in names
    ops = [e for e in slices if e["cat"] == "operator"]
    assert ops and all(e["depth"] >= 1 for e in ops)
    assert any(e["args"]["delegated"] and e["args"]["category"] for e in ops)
    assert len(slices) == (events["run"] == run).sum()


@pytest.mark.parametrize("dtype", ["fp32", "int8"])
def test_a_real_toy_cnn_block_writes_the_csvs_pandas_wrote(tmp_path, dtype):
    """toy_cnn from the (cached) export, run by the native runner as a session runs it: the
    three files beside its ETDump are pandas' bytes for the same analysis."""
    from pytest_sme2.measure.block import BenchmarkRun, run_benchmark
    from pytest_sme2.devices.host import HostDevice
    from pytest_sme2.readers.etdump import read_etdump
    from pytest_sme2.readers.etrecord import read_etrecord
    from pytest_sme2.programs.export import export_model
    from pytest_sme2.runners.native import NativeRunner, build_native_runner
    from pytest_sme2.measure.settings import BenchSettings

    runner = NativeRunner.from_build(build_native_runner())
    settings = BenchSettings(runs=5, warmup=2, report_dir=tmp_path, timeout_s=300)
    result = run_benchmark(BenchmarkRun("toy_cnn", dtype, label="toy"), runner, HostDevice(),
                           settings)
    etdump = Path(result.etdump)
    analysis = analyze(read_etdump(etdump), warmup=2,
                       etrecord=read_etrecord(export_model("toy_cnn", dtype).etrecord))
    written = [etdump.with_name(name) for name in (
        "native_all_runs_timeline.csv", "native_ops_stats.csv", "kernels.csv",
        "native_run0_timeline.csv", "native_warmup_timeline.csv")]
    assert analysis.events["op_types"].str.len().gt(0).any()   # the ETRecord columns are there
    model_id = f"toy_cnn_{dtype}_t1_native"
    assert [p.read_bytes() for p in written] == pandas_files(analysis, model_id)


@pytest.mark.parametrize("dtype", ["fp32", "int8"])
def test_a_real_etdumps_timeline_csv_gives_our_e2e_per_run(tmp_path, dtype):
    """The seed kit's tools read a run's latency as Method::execute's duration_ms summed per
    run_index: on a real toy_cnn ETDump (its traced runs) that is our analysis' runs, value for
    value, and the warm-up file holds the warm-up runs; the timed runs' CSV holds the block's
    e2e_ms."""
    import pandas as pd

    from pytest_sme2.measure.block import BenchmarkRun, run_benchmark
    from pytest_sme2.devices.host import HostDevice
    from pytest_sme2.runners.native import NativeRunner, build_native_runner
    from pytest_sme2.measure.settings import BenchSettings

    runner = NativeRunner.from_build(build_native_runner())
    settings = BenchSettings(runs=4, warmup=2, report_dir=tmp_path, timeout_s=300)
    result = run_benchmark(BenchmarkRun("toy_cnn", dtype, label="toy"), runner, HostDevice(),
                           settings)
    analysis = analyze(read_etdump(result.etdump), warmup=2)
    folder = Path(result.etdump).parent

    def per_run(name: str) -> list[float]:
        frame = pd.read_csv(folder / name)
        executes = frame[frame["name"] == "Method::execute"]
        return executes.groupby("run_index")["duration_ms"].sum().tolist()

    assert per_run("native_all_runs_timeline.csv") == analysis.timed_e2e.tolist()
    timed = pd.read_csv(folder / "native_timed_runs.csv")
    assert timed["e2e_ms"][~timed["warmup"]].tolist() == pytest.approx(result.e2e_ms, abs=1e-9)
    assert timed["warmup"].sum() == 2 and len(timed) == 6
    assert per_run("native_run0_timeline.csv") == analysis.timed_e2e.tolist()[:1]
    assert per_run("native_warmup_timeline.csv") == analysis.e2e_all.tolist()[:2]
    # What the ETDump holds is written beside it: `analyze` drops the same warm-up.
    from pytest_sme2.measure.offline import analyze_recorded  # pandas: this check's alone

    found = analyze_recorded(result.etdump)
    assert (found.record.warmup, found.record.runs, found.record.runs_option) == (
        2, settings.trace_runs, "--sme2-trace-runs")
    assert found.analysis.timed_e2e.tolist() == analysis.timed_e2e.tolist()
