"""`pytest --device android:SERIAL` end to end: the real adb server, our fake phone, the real
native runner and a real .pte — what a user runs against a phone, without one."""

import json

import pytest

pytestmark = pytest.mark.usefixtures("inner_session_env")

BENCH = """
def test_lat(sme2_bench, sme2_case):
    r = sme2_bench(sme2_case.model, dtype=sme2_case.dtype, threads=sme2_case.threads,
                   runner="{runner}")
    assert r.device.kind == "android"
"""


@pytest.fixture
def phone_session(pytester, run_pytest, fake_android, adb_server, monkeypatch, export_cache,
                  toy_export):
    for key, value in adb_server.env.items():
        monkeypatch.setenv(key, value)

    def run(runner: str, *args: str):
        pytester.makepyfile(test_a=BENCH.format(runner=runner))
        return run_pytest(
            f"--device=android:{fake_android.serial}",
            f"--sme2-cache-dir={export_cache}", "--sme2-models=toy_cnn", "--sme2-dtypes=fp32",
            "--sme2-threads=2", "--runs=5", "--warmup=1", *args)

    return run


def test_benchmark_on_the_phone_records_its_facts(phone_session, pytester, fake_android):
    res = phone_session("native")
    res.assert_outcomes(passed=1)
    res.stdout.fnmatch_lines(["sme2: toy_cnn fp32 t2 native: Method::execute median * ms*n=5*"])
    (b,) = json.loads((pytester.path / "sme2-report" / "results.json").read_text())["benchmarks"]
    device = b["device"]
    assert device["kind"] == "android" and device["serial"] == fake_android.serial
    assert device["abi"] == "arm64-v8a" and device["sme2"] is True
    assert b["thermal_before"] and b["thermal_after"]
    assert len(b["e2e_ms"]) == 5
    assert {op["backend"] for op in b["operators"] if op["delegated"]} == {"XnnpackBackend"}
    # The session folder on the phone is gone at the end; the runner and the program stay
    # cached for the next session (by content: a second session pushes neither).
    tmp = fake_android.root / "data" / "local" / "tmp"
    assert [p.name for p in tmp.iterdir() if p.name.startswith("pytest-sme2-")] == [
        "pytest-sme2-cache"]
    # (not the machine-state probe's program: a 2-thread block is not probed by default;
    # test_the_probe_reaches_a_phone_with_the_program_and_runs_beside_it asks for it)
    assert sorted(p.name[:6] for p in (tmp / "pytest-sme2-cache").iterdir()) == [
        "model-", "runner"]
    assert (pytester.path / "sme2-report" / "report.md").is_file()


def test_the_probe_reaches_a_phone_with_the_program_and_runs_beside_it(phone_session, pytester,
                                                                        fake_android):
    """A phone times the machine-state probe in the runner's process (DVFS, a little core):
    its program is pushed once, by content, and read back per block; off leaves it out."""
    res = phone_session("native", "--sme2-probe=on")
    res.assert_outcomes(passed=1)
    (b,) = json.loads((pytester.path / "sme2-report" / "results.json").read_text())["benchmarks"]
    assert len(b["probe"]["before_us"]) == len(b["probe"]["after_us"]) == 24
    cache = fake_android.root / "data" / "local" / "tmp" / "pytest-sme2-cache"
    [folder] = [p for p in cache.iterdir() if p.name.startswith("probe-")]
    [program] = list(folder.iterdir())
    pushed = program.stat().st_mtime_ns
    phone_session("native", "--sme2-probe=on").assert_outcomes(passed=1)
    assert program.stat().st_mtime_ns == pushed            # there already: not pushed again
    phone_session("native", "--sme2-probe=off").assert_outcomes(passed=1)
    (b,) = json.loads((pytester.path / "sme2-report" / "results.json").read_text())["benchmarks"]
    assert "probe" not in b


def test_python_runner_on_the_phone_fails_clearly(phone_session):
    res = phone_session("python")
    res.assert_outcomes(failed=1)
    res.stdout.fnmatch_lines(["*runner 'python' runs only on the host*"])
    assert "Traceback" not in res.stdout.str()


def test_the_host_runners_test_skips_on_a_phone_that_runs_host_programs(
        pytester, run_pytest, fake_android, adb_server, monkeypatch, export_cache, toy_export):
    """benchmarks/test_sme2.py compares the Python runtime with the native runner: the fake
    phone runs host programs, but the Python runtime never runs on a phone."""
    from pathlib import Path

    for key, value in adb_server.env.items():
        monkeypatch.setenv(key, value)
    source = Path(__file__).parents[2] / "benchmarks" / "test_sme2.py"
    pytester.makepyfile(test_sme2=source.read_text())
    res = run_pytest(f"--device=android:{fake_android.serial}", "-rs", "-k", "host_runners",
                     f"--sme2-cache-dir={export_cache}")
    res.assert_outcomes(skipped=1)
    res.stdout.fnmatch_lines(["*the Python runtime runs on the host only, not on --device "
                              f"android:{fake_android.serial}*"])
