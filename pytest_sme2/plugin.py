"""pytest glue: options, fixtures, per-benchmark lines and the summary table. The work itself
lives in the library (:mod:`pytest_sme2.bench` and friends)."""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path
from typing import Callable

import pytest

from pytest_sme2.bench import BenchmarkRun, BenchSettings, run_benchmark
from pytest_sme2.errors import Sme2Error
from pytest_sme2.report.terminal import benchmark_line, summary_table
from pytest_sme2.results import BenchmarkResult
from pytest_sme2.session import BenchSession

SESSION_KEY = pytest.StashKey[BenchSession]()
RESULT_PROPERTY = "sme2_result"

# option name -> (ini name, default, help)
_OPTIONS = {
    "device": ("sme2_device", "host", "where to run benchmarks: host (default)"),
    "runs": ("sme2_runs", "30", "timed runs per benchmark (default 30)"),
    "warmup": ("sme2_warmup", "3", "warm-up runs per benchmark, discarded (default 3)"),
    "report_dir": ("sme2_report_dir", "sme2-report",
                   "folder for results.json and artifacts (default sme2-report/)"),
    "sme2_cache_dir": ("sme2_cache_dir", "",
                       "export cache folder (default ~/.cache/pytest-sme2/exports)"),
    "sme2_timeout": ("sme2_timeout", "600", "seconds one runner invocation may take"),
    "sme2_taskset": ("sme2_taskset", "auto",
                     "CPU pinning on Android: auto (the biggest cores), none, or a hex mask"),
}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("sme2", "pytest-sme2 benchmarking")
    for dest, (ini, default, help_text) in _OPTIONS.items():
        flag = "--" + dest.replace("_", "-")
        group.addoption(flag, dest=dest, default=None, help=help_text + f" [ini: {ini}]")
        parser.addini(ini, help_text, default=default)
    group.addoption("--sme2-reexport", action="store_true", default=False,
                    help="export models again even when the cache has them")
    group.addoption("--runner", dest="runners", action="append", default=[],
                    metavar="NAME=SPEC",
                    help="add a runner: NAME=python, NAME=native or NAME=/path/to/executor_runner"
                         "[,libs=DIR][,label=value...] (repeatable) [ini: sme2_runners]")
    parser.addini("sme2_runners", "runner specs, one per line (see --runner)", type="linelist",
                  default=[])


def _setting(config: pytest.Config, dest: str) -> tuple[str, bool]:
    """The value of an option (command line first, then ini) and whether it came from the
    command line (paths from there are relative to the invocation folder, from ini to rootdir)."""
    value = config.getoption(dest)
    if value is not None:
        return str(value), True
    return str(config.getini(_OPTIONS[dest][0])), False


def _path(config: pytest.Config, dest: str) -> Path | None:
    value, from_cli = _setting(config, dest)
    if not value:
        return None
    base = config.invocation_params.dir if from_cli else config.rootpath
    return (base / value).resolve()


def _int(config: pytest.Config, dest: str) -> int:
    value, _ = _setting(config, dest)
    try:
        return int(value)
    except ValueError:
        raise pytest.UsageError(f"--{dest.replace('_', '-')} must be a whole number, "
                                f"got {value!r}") from None


def settings_from_config(config: pytest.Config) -> BenchSettings:
    try:
        return BenchSettings(runs=_int(config, "runs"), warmup=_int(config, "warmup"),
                             report_dir=_path(config, "report_dir") or Path("sme2-report"),
                             cache_dir=_path(config, "sme2_cache_dir"),
                             reexport=bool(config.getoption("sme2_reexport")),
                             timeout_s=float(_int(config, "sme2_timeout")))
    except Sme2Error as e:
        raise pytest.UsageError(str(e)) from None


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "sme2: a pytest-sme2 benchmark")
    texts = list(config.getini("sme2_runners")) + list(config.getoption("runners") or [])
    taskset = _setting(config, "sme2_taskset")[0]
    try:
        session = BenchSession(settings_from_config(config), device_spec=_setting(config, "device")[0],
                               runner_texts=texts, taskset=None if taskset == "none" else taskset)
    except Sme2Error as e:
        raise pytest.UsageError(str(e)) from None
    config.stash[SESSION_KEY] = session
    if not _is_xdist_worker(config):
        config.pluginmanager.register(_Collector(config), "sme2-collector")


def pytest_sessionfinish(session: pytest.Session) -> None:
    # Every process (each xdist worker included) removes what it left on its device.
    bench_session = session.config.stash.get(SESSION_KEY, None)
    if bench_session is not None:
        try:
            bench_session.close()
        except Sme2Error as e:
            _write_live(session.config, f"sme2: cleanup: {e}")


def _is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def _write_live(config: pytest.Config, line: str) -> None:
    """Write to the terminal now, even while output capture is on."""
    tr = config.pluginmanager.get_plugin("terminalreporter")
    if tr is None or _is_xdist_worker(config):
        return
    capman = config.pluginmanager.get_plugin("capturemanager")
    with capman.global_and_fixture_disabled() if capman else nullcontext():
        if tr._tw.width_of_current_line:  # after progress dots: start a fresh line
            tr._tw.line()
        tr.write_line(line)


@pytest.fixture(scope="session")
def sme2_session(pytestconfig: pytest.Config) -> BenchSession:
    return pytestconfig.stash[SESSION_KEY]


@pytest.fixture(scope="session")
def sme2_settings(sme2_session: BenchSession) -> BenchSettings:
    return sme2_session.settings


@pytest.fixture(scope="session")
def sme2_device(sme2_session: BenchSession):
    try:
        return sme2_session.device()
    except Sme2Error as e:
        pytest.fail(str(e), pytrace=False)


@pytest.fixture
def sme2_bench(request: pytest.FixtureRequest, sme2_session: BenchSession,
               sme2_device) -> Callable[..., BenchmarkResult]:
    """Run one benchmark setting and return its :class:`BenchmarkResult`::

        def test_latency(sme2_bench):
            result = sme2_bench("toy_cnn", dtype="fp32", threads=1)
            assert result.e2e.median_ms < 5
    """
    config = request.config

    def progress(msg: str) -> None:
        _write_live(config, f"sme2: {msg}")

    def bench(model: str, dtype: str = "fp32", threads: int = 1,
              runner: str = "python") -> BenchmarkResult:
        try:
            result = run_benchmark(
                BenchmarkRun(model, dtype, threads, label=request.node.nodeid, progress=progress),
                sme2_session.runner(runner, progress), sme2_device, sme2_session.settings)
        except Sme2Error as e:
            pytest.fail(str(e), pytrace=False)
        request.node.user_properties.append((RESULT_PROPERTY, result.to_json()))
        return result

    return bench


class _Collector:
    """Receives results on the process that reports (the xdist controller, or the only one):
    results travel on test reports, so they reach it from every worker."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.session: BenchSession = config.stash[SESSION_KEY]

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call":
            return
        for name, value in report.user_properties:
            if name == RESULT_PROPERTY:
                result = BenchmarkResult.from_json(value)
                self.session.add(result)
                _write_live(self.config, benchmark_line(result))

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.session.results:
            return
        terminalreporter.section("pytest-sme2 summary")
        for line in summary_table(self.session.results):
            terminalreporter.write_line(line)
        terminalreporter.write_line(f"results: {self.session.results_path}")
