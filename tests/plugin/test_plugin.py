"""The plugin as users meet it: an inner pytest session on a tiny benchmark file."""

import json
from pathlib import Path
import statistics

import pandas as pd
import pytest

from pytest_sme2.analysis.latency import e2e_per_run
from pytest_sme2.readers.etdump import read_etdump

pytestmark = pytest.mark.usefixtures("inner_session_env")

BENCH = """
def test_toy(sme2_bench):
    r = sme2_bench("toy_cnn", dtype="fp32", threads=1)
    assert r.e2e.n == r.runs
"""


@pytest.fixture
def bench_dir(pytester, export_cache, toy_export):
    pytester.makepyfile(test_bench=BENCH)
    return pytester


def test_runs_benchmark_prints_latency_and_writes_results(bench_dir, export_cache, run_pytest):
    res = run_pytest(f"--sme2-cache-dir={export_cache}", "--runs=6", "--warmup=2",
               "--report-dir=out")
    res.assert_outcomes(passed=1)
    res.stdout.fnmatch_lines([
        "sme2: toy_cnn fp32 t1 native: Method::execute median * ms, p90 * ms, CV *%, n=6 "
        "(+2 warm-up discarded)*",
        "*pytest-sme2 summary*",
        "benchmark*model*dtype*threads*runner*median ms*p90 ms*CV %*runs*speedup*top category"
        "*SME2*vs baseline",
        "test_toy*toy_cnn*fp32*1*native*6*Convolution*absent*-",
    ])
    assert "exporting" not in res.stdout.str()  # the session's cache already holds it
    doc = json.loads((bench_dir.path / "out" / "results.json").read_text())
    assert doc["schema"] == "pytest-sme2/results/1"
    (b,) = doc["benchmarks"]
    assert (b["model"], b["dtype"], b["threads"], b["runner"]) == ("toy_cnn", "fp32", 1, "native")
    assert b["runs"] == 6 and b["warmup"] == 2 and len(b["e2e_ms"]) == 6
    assert b["median_ms"] == pytest.approx(statistics.median(b["e2e_ms"]))
    assert b["device"]["kind"] == "host"
    # The figures are the untraced runs' (the runner's clock), warm-up removed; the ETDump
    # holds the traced runs alone (as many warm-up, then --sme2-trace-runs), and what tracing
    # added is recorded beside them.
    assert b["timing"]["mode"] == "untraced" and b["timing"]["traced_runs"] == 10
    from_trace = e2e_per_run(read_etdump(b["etdump"])).tolist()
    assert len(from_trace) == 2 + 10
    assert b["timing"]["traced_median_ms"] == pytest.approx(statistics.median(from_trace[2:]),
                                                            abs=1e-6)
    assert b["timing"]["overhead_pct"] == pytest.approx(
        100 * (b["timing"]["traced_median_ms"] / b["median_ms"] - 1), abs=0.01)
    folder = Path(b["etdump"]).parent
    assert {p.name for p in folder.glob("*.csv")} == {
        "native_all_runs_timeline.csv", "native_ops_stats.csv", "kernels.csv",
        "native_run0_timeline.csv", "native_warmup_timeline.csv", "native_timed_runs.csv"}
    timed = pd.read_csv(folder / "native_timed_runs.csv")
    assert timed["e2e_ms"][~timed["warmup"]].tolist() == pytest.approx(b["e2e_ms"], abs=1e-9)
    # The seed kit's reading of the timeline (Method::execute summed per run_index) gives the
    # traced runs, and its model_id names the block.
    timeline = pd.read_csv(folder / "native_all_runs_timeline.csv")
    executes = timeline[timeline["name"] == "Method::execute"]
    assert executes.groupby("run_index")["duration_ms"].sum().tolist() == pytest.approx(
        from_trace[2:], abs=1e-9)
    assert set(timeline["model_id"]) == {"toy_cnn_fp32_t1_native"}
    # The machine-state probe, timed in the block's own process at both ends of its runs
    # (issue 44), and the session's reading of the machine.
    probe = b["probe"]
    assert len(probe["before_us"]) == len(probe["after_us"]) == 24
    assert all(v > 0 for v in probe["before_us"] + probe["after_us"])
    machine = doc["session"]["machine"]
    assert machine["probed_blocks"] == 1 and machine["note"] == ""


def test_without_a_native_runner_benchmarks_use_python_and_say_why(bench_dir, export_cache,
                                                                     monkeypatch, run_pytest):
    monkeypatch.setenv("CXX", "no-such-compiler")   # the native runner cannot be built
    res = run_pytest(f"--sme2-cache-dir={export_cache}", "--runs=3", "--warmup=1",
               "--report-dir=out")
    res.assert_outcomes(passed=1)
    res.stdout.fnmatch_lines([
        "sme2: benchmarks that name no runner use 'python': CXX=no-such-compiler is not an "
        "executable on PATH*",
        "sme2: toy_cnn fp32 t1 python: Method::execute median * ms*n=3*",
    ])
    assert res.stdout.str().count("benchmarks that name no runner") == 1


def test_second_session_reuses_the_export(pytester, tmp_path_factory, run_pytest):
    cache = tmp_path_factory.mktemp("fresh-cache")
    pytester.makepyfile(test_bench=BENCH)
    first = run_pytest(f"--sme2-cache-dir={cache}", "--runs=3", "--warmup=1")
    first.assert_outcomes(passed=1)
    first.stdout.fnmatch_lines(["sme2: exporting toy_cnn fp32 ...", "sme2: exported toy_cnn*"])
    second = run_pytest(f"--sme2-cache-dir={cache}", "--runs=3", "--warmup=1")
    second.assert_outcomes(passed=1)
    assert "exporting" not in second.stdout.str()


def test_options_from_ini(bench_dir, export_cache, run_pytest):
    bench_dir.makeini(f"""
        [pytest]
        sme2_runs = 4
        sme2_warmup = 1
        sme2_report_dir = from-ini
        sme2_cache_dir = {export_cache}
    """)
    run_pytest().assert_outcomes(passed=1)
    doc = json.loads((bench_dir.path / "from-ini" / "results.json").read_text())
    assert len(doc["benchmarks"][0]["e2e_ms"]) == 4


def test_command_line_beats_ini(bench_dir, export_cache, run_pytest):
    bench_dir.makeini(f"[pytest]\nsme2_runs = 4\nsme2_cache_dir = {export_cache}\n")
    run_pytest("--runs=3").assert_outcomes(passed=1)
    doc = json.loads((bench_dir.path / "sme2-report" / "results.json").read_text())
    assert len(doc["benchmarks"][0]["e2e_ms"]) == 3


@pytest.mark.parametrize("arg,msg", [("--runs=0", "--runs must be a positive number"),
                                     ("--runs=many", "--runs must be a whole number"),
                                     ("--warmup=-1", "--warmup must be 0 or more")])
def test_bad_options_are_usage_errors(pytester, arg, msg, run_pytest):
    pytester.makepyfile(test_bench=BENCH)
    res = run_pytest(arg)
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    res.stderr.fnmatch_lines([f"*{msg}*"])


def test_unknown_model_fails_clearly_and_the_others_go_on(bench_dir, export_cache, run_pytest):
    bench_dir.makepyfile(test_more="""
        def test_unknown(sme2_bench):
            sme2_bench("no_such_model")
    """)
    res = run_pytest(f"--sme2-cache-dir={export_cache}", "--runs=3", "--warmup=0")
    res.assert_outcomes(passed=1, failed=1)
    res.stdout.fnmatch_lines(["*unknown model 'no_such_model'; registered models: *toy_cnn*"])
    assert "Traceback" not in res.stdout.str()
    doc = json.loads((bench_dir.path / "sme2-report" / "results.json").read_text())
    assert [b["model"] for b in doc["benchmarks"]] == ["toy_cnn"]


def test_unknown_device_fails_clearly(bench_dir, export_cache, run_pytest):
    # One usage error before anything runs (exit 4), not an error per benchmark.
    res = run_pytest(f"--sme2-cache-dir={export_cache}", "--device=toaster")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    res.stderr.fnmatch_lines(["ERROR: --device 'toaster': unknown device kind 'toaster'*"])


def test_a_session_without_benchmarks_does_not_import_the_measuring_stack(pytester, run_pytest):
    # Every pytest run of a project with pytest-sme2 installed loads the plugin: it must not
    # pay for pandas (hundreds of ms) unless a benchmark runs.
    pytester.makeconftest("""
import sys

def pytest_sessionfinish(session):
    heavy = sorted(m for m in ("pandas", "torch", "executorch", "matplotlib", "jinja2")
                   if m in sys.modules)
    print("HEAVY:", ",".join(heavy) or "none")
""")
    pytester.makepyfile(test_plain="def test_plain():\n    assert True\n")
    res = run_pytest("-s")
    res.assert_outcomes(passed=1)
    res.stdout.fnmatch_lines(["*HEAVY: none*"])


MATRIX = """
def test_latency(sme2_bench, sme2_case):
    sme2_bench(sme2_case.model, dtype=sme2_case.dtype, threads=sme2_case.threads)
"""


def test_a_fresh_cache_is_filled_ahead_side_by_side_then_measured(pytester, tmp_path_factory,
                                                                  run_pytest):
    """The first session on a fresh machine: the matrix's exports run in two processes before
    anything is measured; each test then finds its export in the cache. --sme2-export-jobs 1
    leaves each export to its test, as before."""
    pytester.makepyfile(test_matrix=MATRIX)
    args = ("--sme2-models=toy_cnn", "--sme2-dtypes=fp32,fp16", "--sme2-threads=1",
            "--runs=2", "--warmup=0", "--sme2-loads=1")
    cache = tmp_path_factory.mktemp("ahead-cache")
    res = run_pytest(f"--sme2-cache-dir={cache}", "--sme2-export-jobs=2", *args)
    res.assert_outcomes(passed=2)
    out = res.stdout.str()
    res.stdout.fnmatch_lines([
        # The machine-state probe's program is exported with the session's models.
        "sme2: exporting 3 models ahead in 2 processes (nothing is measured until they are "
        "done): toy_cnn fp32, toy_cnn fp16, machine_probe fp32",
        "sme2: exported 3 of 3 models ahead in * s",
        "sme2: toy_cnn fp32 t1 native: Method::execute median*"])
    assert "sme2: exporting toy_cnn" not in out          # no test exported its own
    serial = run_pytest(f"--sme2-cache-dir={tmp_path_factory.mktemp('serial-cache')}",
                        "--sme2-export-jobs=1", *args)
    serial.assert_outcomes(passed=2)
    assert "models ahead" not in serial.stdout.str()
    serial.stdout.fnmatch_lines(["sme2: exporting toy_cnn fp32 ...", "sme2: exported toy_cnn*"])
    bad = run_pytest("--sme2-export-jobs=0", *args)
    bad.stderr.fnmatch_lines(["*--sme2-export-jobs must be auto or a number of processes*"])
