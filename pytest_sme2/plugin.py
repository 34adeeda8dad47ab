"""pytest glue: options, fixtures, the benchmark matrix, live lines and the summary table. The
work itself lives in the library (:mod:`pytest_sme2.bench`, :mod:`pytest_sme2.compare`, ...)."""

from __future__ import annotations

import sys
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import pytest

from pytest_sme2.errors import Sme2Error
from pytest_sme2.export import DTYPES, ExportedModel, export_model
from pytest_sme2.matrix import (DEFAULT_DTYPES, DEFAULT_MODELS, DEFAULT_THREADS, Case,
                                build_matrix, parse_threads, split_list)
from pytest_sme2.session import BenchSession
from pytest_sme2.settings import (DEFAULT_CONFIRM_BLOCKS, DEFAULT_MARGIN, MIN_BLOCKS,
                                  BenchSettings)

# The measuring and reporting library (numpy, pandas) is imported where it is used, not here:
# every pytest run of a project that has pytest-sme2 installed imports this module.
if TYPE_CHECKING:
    from pytest_sme2.compare import Comparison
    from pytest_sme2.results import BenchmarkResult

SESSION_KEY = pytest.StashKey[BenchSession]()
MATRIX_KEY = pytest.StashKey[list[Case]]()
RESULT_PROPERTY = "sme2_result"
COMPARISON_PROPERTY = "sme2_comparison"

# Lower bounds asserted on the SME2 speed-up's confidence interval. The seed kit measured, on
# one core, 3.9x (fp16) and 1.8x (int8) end to end on a conv-heavy model; a model whose time is
# not in Convolution/GEMM gains less, so the defaults ask for a clear but modest effect.
DEFAULT_MIN_SPEEDUP = "fp32=1.2,fp16=1.5,int8=1.2,int8_dynamic=1.2"

# option dest -> (ini name, default, help)
_OPTIONS = {
    "device": ("sme2_device", "host", "where to run: host, android, android:SERIAL, "
               "android:SERIAL@HOST:PORT, or qemu[:CPU] (an emulated Arm64 CPU with SME2)"),
    "runs": ("sme2_runs", "30", "timed runs per benchmark (default 30)"),
    "warmup": ("sme2_warmup", "3", "warm-up runs per benchmark, discarded (default 3)"),
    "report_dir": ("sme2_report_dir", "sme2-report",
                   "folder for results.json, report.md and artifacts (default sme2-report/)"),
    "sme2_cache_dir": ("sme2_cache_dir", "",
                       "export cache folder (default ~/.cache/pytest-sme2/exports)"),
    "sme2_timeout": ("sme2_timeout", "600", "seconds one runner invocation may take"),
    "sme2_taskset": ("sme2_taskset", "auto",
                     "CPU pinning on Android: auto (the biggest cores), none, or a hex mask"),
    "sme2_models": ("sme2_models", ",".join(DEFAULT_MODELS), "models of the benchmark matrix"),
    "sme2_dtypes": ("sme2_dtypes", ",".join(DEFAULT_DTYPES),
                    f"dtypes of the benchmark matrix ({', '.join(DTYPES)})"),
    "sme2_threads": ("sme2_threads", ",".join(map(str, DEFAULT_THREADS)),
                     "thread counts of the benchmark matrix"),
    "sme2_blocks": ("sme2_blocks", str(MIN_BLOCKS),
                    f"interleaved blocks per side in a comparison (default {MIN_BLOCKS})"),
    "sme2_confirm_blocks": ("sme2_confirm_blocks", str(DEFAULT_CONFIRM_BLOCKS),
                            "when the baseline gate suspects a regression, measure this many "
                            "more blocks (fresh runner processes) and judge all of them "
                            f"(default {DEFAULT_CONFIRM_BLOCKS}; 0: judge the first block "
                            "alone)"),
    "sme2_gate_categories": ("sme2_gate_categories", "",
                             "operator categories the baseline gate judges besides end-to-end "
                             "latency, comma-separated (e.g. Convolution,GEMM), or 'all'; "
                             "a category too small to be a bottleneck is not gated"),
    "sme2_min_speedup": ("sme2_min_speedup", DEFAULT_MIN_SPEEDUP,
                         "SME2-on vs -off speed-up the CI's lower bound must reach, per dtype"),
    "baseline_dir": ("sme2_baseline_dir", "benchmarks/baselines",
                     "folder of stored baselines, one JSON file per benchmark key"),
    "fail_on_regression": ("sme2_fail_on_regression", "",
                           "fail a benchmark (and the session) whose slow-down beyond PCT "
                           "percent is statistically clear against its baseline"),
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
    group.addoption("--save-baseline", action="store_true", default=False,
                    help="record this session's results as a new baseline session")
    group.addoption("--allow-foreign-baseline", action="store_true", default=False,
                    help="compare against baselines recorded in another environment (other "
                         "SoC, runner build, executorch version) instead of refusing")


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


# An emulated CPU runs a model 100-1000x slower than the host, and its timings say nothing about
# speed: fewer runs and blocks suffice for what it does prove (kernels, outputs). Applied only
# where the user left the default.
EMULATED_DEFAULTS = {"runs": "5", "warmup": "1", "sme2_blocks": "2"}


def _is_emulated(config: pytest.Config) -> bool:
    return _setting(config, "device")[0].split(":", 1)[0] == "qemu"


def _int(config: pytest.Config, dest: str) -> int:
    value, _ = _setting(config, dest)
    if dest in EMULATED_DEFAULTS and value == _OPTIONS[dest][1] and _is_emulated(config):
        value = EMULATED_DEFAULTS[dest]
    try:
        return int(value)
    except ValueError:
        raise Sme2Error(f"--{dest.replace('_', '-')} must be a whole number, got {value!r}") \
            from None


def settings_from_config(config: pytest.Config) -> BenchSettings:
    return BenchSettings(runs=_int(config, "runs"), warmup=_int(config, "warmup"),
                         report_dir=_path(config, "report_dir") or Path("sme2-report"),
                         cache_dir=_path(config, "sme2_cache_dir"),
                         reexport=bool(config.getoption("sme2_reexport")),
                         timeout_s=float(_int(config, "sme2_timeout")))


def _pct(config: pytest.Config) -> float | None:
    text, _ = _setting(config, "fail_on_regression")
    if not text:
        return None
    try:
        pct = float(text)
        if pct < 0 or pct != pct:
            raise ValueError
    except ValueError:
        raise Sme2Error(f"--fail-on-regression must be a percentage of 0 or more, got "
                        f"{text!r}") from None
    return pct


def _min_speedups(config: pytest.Config) -> dict[str, float]:
    text, _ = _setting(config, "sme2_min_speedup")
    out = {}
    for item in split_list(text):
        dtype, sep, value = item.partition("=")
        try:
            if not sep or dtype.strip() not in DTYPES:
                raise ValueError
            out[dtype.strip()] = float(value)
        except ValueError:
            raise Sme2Error(f"--sme2-min-speedup: {item!r} is not DTYPE=NUMBER with DTYPE one "
                            f"of {', '.join(DTYPES)}") from None
    return out


def _gate_categories(config: pytest.Config) -> list[str]:
    from pytest_sme2.analysis.categories import OTHER, named_categories

    names = split_list(_setting(config, "sme2_gate_categories")[0])
    known = {c.lower(): c for c in (*named_categories(), OTHER)}
    out = []
    for name in names:
        if name.lower() == "all":
            return ["all"]
        if name.lower() not in known:
            raise Sme2Error(f"--sme2-gate-categories: unknown category {name!r}; known: "
                            f"{', '.join(known.values())}, or all")
        out.append(known[name.lower()])
    return out


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "sme2: a pytest-sme2 benchmark")
    texts = list(config.getini("sme2_runners")) + list(config.getoption("runners") or [])
    taskset = _setting(config, "sme2_taskset")[0]
    try:
        session = BenchSession(settings_from_config(config),
                               device_spec=_setting(config, "device")[0], runner_texts=texts,
                               taskset=None if taskset == "none" else taskset)
        session.min_speedup = _min_speedups(config)
        session.blocks = _int(config, "sme2_blocks")
        session.baseline_dir = _path(config, "baseline_dir")
        session.fail_on_regression = _pct(config)
        session.save_baseline = bool(config.getoption("save_baseline"))
        session.allow_foreign = bool(config.getoption("allow_foreign_baseline"))
        if session.blocks < 2:
            raise Sme2Error(f"--sme2-blocks must be 2 or more, got {session.blocks}")
        session.gate_categories = _gate_categories(config)
        session.confirm_blocks = _int(config, "sme2_confirm_blocks")
        if session.confirm_blocks < 0:
            raise Sme2Error(f"--sme2-confirm-blocks must be 0 or more, got "
                            f"{session.confirm_blocks}")
    except Sme2Error as e:
        raise pytest.UsageError(str(e)) from None
    config.stash[SESSION_KEY] = session
    if not _is_xdist_worker(config):
        config.pluginmanager.register(_Collector(config), "sme2-collector")


def pytest_sessionstart(session: pytest.Session) -> None:
    # After conftest files had their say (they may register models), check the matrix: a typo
    # in --sme2-models stops the session with one line instead of failing every benchmark.
    _matrix(session.config)


def _matrix(config: pytest.Config) -> list[Case]:
    if MATRIX_KEY not in config.stash:
        try:
            config.stash[MATRIX_KEY] = build_matrix(
                split_list(_setting(config, "sme2_models")[0]),
                split_list(_setting(config, "sme2_dtypes")[0]),
                parse_threads(_setting(config, "sme2_threads")[0]))
        except Sme2Error as e:
            raise pytest.UsageError(str(e)) from None
    return config.stash[MATRIX_KEY]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Any test asking for ``sme2_case`` runs once per matrix case."""
    if "sme2_case" in metafunc.fixturenames:
        cases = _matrix(metafunc.config)
        marker = metafunc.definition.get_closest_marker("sme2")
        if marker and "threads" in marker.kwargs:  # e.g. @pytest.mark.sme2(threads=[1])
            keep = set(marker.kwargs["threads"])
            cases = [c for c in cases if c.threads in keep]
        metafunc.parametrize("sme2_case", cases, ids=[c.id for c in cases])


def pytest_sessionfinish(session: pytest.Session) -> None:
    # Every process (each xdist worker included) removes what it left on its device.
    bench_session = session.config.stash.get(SESSION_KEY, None)
    if bench_session is not None:
        try:
            bench_session.close()
        except Sme2Error as e:
            _write_live(session.config, f"sme2: cleanup: {e}")
    _skip_idle_hypothesis_summary(session.config)


def _skip_idle_hypothesis_summary(config: pytest.Config) -> None:
    """hypothesis, installed with executorch, imports itself in its terminal summary (~1 s at
    the end of every session) to look for output only a session that ran it can have: when
    nothing imported it, its plugin sits the summary out (it runs after this hook)."""
    plugin = config.pluginmanager.get_plugin("hypothesispytest")
    if plugin is not None and "hypothesis" not in sys.modules and \
            not config.getoption("--hypothesis-show-statistics", False):
        config.pluginmanager.unregister(plugin)


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


def _fail(e: Sme2Error, config: pytest.Config | None = None):
    """Fail the test with the error's one line; the traceback only when asked for with an
    explicit --tb (long, short, native)."""
    if config is not None and config.getoption("tbstyle", "auto") in ("long", "short", "native"):
        raise pytest.fail.Exception(str(e), pytrace=True) from e
    # "from None": called while handling ``e``, and pytest prints a chained exception's message
    # again under "During handling of the above exception..." even with pytrace=False.
    raise pytest.fail.Exception(str(e), pytrace=False) from None


@pytest.fixture(scope="session")
def sme2_session(pytestconfig: pytest.Config) -> BenchSession:
    return pytestconfig.stash[SESSION_KEY]


@pytest.fixture(scope="session")
def sme2_settings(sme2_session: BenchSession) -> BenchSettings:
    return sme2_session.settings


@pytest.fixture(scope="session")
def sme2_device(pytestconfig: pytest.Config, sme2_session: BenchSession):
    """The target device (``--device``); a device that cannot be opened errors each test that
    needs it with one line saying what to do."""
    try:
        return sme2_session.device()
    except Sme2Error as e:
        _fail(e, pytestconfig)


@pytest.fixture(scope="session")
def sme2_runners(sme2_session: BenchSession) -> dict[str, dict]:
    """The configured runners by name: kind and labels (made on first use, not here)."""
    return {name: {"kind": s.kind, "labels": dict(s.labels),
                   "path": str(s.path) if s.path else None}
            for name, s in sme2_session.specs.items()}


def _sme2_runner(session: BenchSession, state: str, config: pytest.Config) -> str:
    try:
        name = session.sme2_runner(state)
    except Sme2Error as e:   # the device could not be opened to ask it about SME2
        _fail(e, config)
    if name is None:
        pytest.skip(f"no SME2-{state} runner configured: pass --runner "
                    f"sme2_{state}=/path/to/executor_runner,sme2={state} "
                    "(build recipe: docs/native-runner.md), or run on --device qemu, where "
                    "the native runner with SME2 hidden is the SME2-off side")
    return name


@pytest.fixture(scope="session")
def sme2_on(pytestconfig: pytest.Config, sme2_session: BenchSession) -> str:
    """Name of the runner labelled sme2=on (or named sme2_on); on an SME2 device that can hide
    SME2 from a process (QEMU) the native runner as built; skips when there is none."""
    return _sme2_runner(sme2_session, "on", pytestconfig)


@pytest.fixture(scope="session")
def sme2_off(pytestconfig: pytest.Config, sme2_session: BenchSession) -> str:
    """Name of the runner labelled sme2=off (or named sme2_off); on an SME2 device that can hide
    SME2 from a process (QEMU) the same native binary with SME and SME2 masked; skips when there
    is none."""
    return _sme2_runner(sme2_session, "off", pytestconfig)


@pytest.fixture(scope="session")
def sme2_emulated(sme2_device) -> bool:
    """True on an emulated CPU (QEMU): its timings say nothing about speed, so tests assert
    kernels and outputs there, not speed-ups."""
    return bool(sme2_device.facts().extra.get("emulated"))


@pytest.fixture(scope="session")
def sme2_capable_device(sme2_device):
    """The device, skipping when its hwcaps say it has no SME2 (unknown capability runs)."""
    facts = sme2_device.facts()
    if facts.sme2 is False:
        pytest.skip(f"device {facts.serial} ({facts.cpu}, {facts.abi}) has no SME2 in its "
                    "hwcaps: an SME2-on runner cannot use SME2 kernels there")
    return sme2_device


@pytest.fixture(scope="session")
def sme2_min_speedup(sme2_session: BenchSession) -> Callable[[str], float]:
    """``sme2_min_speedup(dtype)``: the configured lower bound for an SME2 speed-up."""
    return lambda dtype: sme2_session.min_speedup.get(dtype, 1.0)


def _case_params(request: pytest.FixtureRequest) -> tuple[str, str]:
    params = getattr(request.node, "callspec", None)
    params = params.params if params else {}
    case = params.get("sme2_case")
    if isinstance(case, Case):
        return case.model, case.dtype
    if "model" in params:
        return params["model"], params.get("dtype", "fp32")
    pytest.fail(f"{request.node.nodeid}: sme2_model needs the test parametrized with sme2_case, "
                "or with 'model' (and optionally 'dtype')", pytrace=False)


@pytest.fixture
def sme2_model(request: pytest.FixtureRequest, sme2_session: BenchSession) -> ExportedModel:
    """The exported model (.pte, .etrecord, inputs, metadata) of this test's parametrization."""
    model, dtype = _case_params(request)
    s = sme2_session.settings
    try:
        return export_model(model, dtype, s.cache_dir, s.reexport,
                            progress=lambda m: _write_live(request.config, f"sme2: {m}"))
    except Sme2Error as e:
        _fail(e, request.config)


def _recorder(request: pytest.FixtureRequest) -> Callable[[BenchmarkResult], None]:
    # Results ride on the test report so pytest-xdist carries them to the controller; each is
    # attached as soon as it is measured, so a later failure in the test loses nothing.
    return lambda r: request.node.user_properties.append((RESULT_PROPERTY, r.to_json()))


@pytest.fixture
def sme2_bench(request: pytest.FixtureRequest, sme2_session: BenchSession,
               sme2_device) -> Callable[..., BenchmarkResult]:
    """Run one benchmark setting and return its :class:`BenchmarkResult`::

        def test_latency(sme2_bench):
            result = sme2_bench("toy_cnn", dtype="fp32", threads=1)
            assert result.e2e.median_ms < 5
    """
    from pytest_sme2.bench import BenchmarkRun, run_benchmark

    config = request.config
    record = _recorder(request)

    def progress(msg: str) -> None:
        _write_live(config, f"sme2: {msg}")

    def bench(model: str, dtype: str = "fp32", threads: int = 1,
              runner: str | None = None) -> BenchmarkResult:
        runner = runner or sme2_session.default_runner(progress)
        run = BenchmarkRun(model, dtype, threads, label=request.node.nodeid, progress=progress)
        try:
            result = run_benchmark(run, sme2_session.runner(runner, progress), sme2_device,
                                   sme2_session.settings)
        except Sme2Error as e:
            _fail(e, config)
        try:
            judgements = sme2_session.judge_all([result])
            # A suspected regression is measured again before it can fail the test; the extra
            # blocks are recorded as they come (reports pool them with the first).
            judgements = sme2_session.confirm(run, runner, sme2_device, result, judgements,
                                              on_block=record, progress=progress)
        except Sme2Error as e:  # a corrupt baseline file, a failed confirmation run
            record(result)
            _fail(e, config)
        result.extra["baseline"] = judgements[0].to_dict()
        if len(judgements) > 1:
            result.extra["baseline_categories"] = {j.category: j.to_dict()
                                                   for j in judgements[1:]}
        record(result)
        _enforce_gate(request, sme2_session, judgements)
        return result

    return bench


@pytest.fixture
def sme2_compare(request: pytest.FixtureRequest, sme2_session: BenchSession,
                 sme2_device) -> Callable[..., Comparison]:
    """Compare two runners on the same device in interleaved blocks::

        def test_sme2(sme2_compare, sme2_off, sme2_on):
            cmp = sme2_compare(sme2_off, sme2_on, "mobilenet_v3_small", dtype="fp16")
            assert cmp.speedup.low >= 1.5

    ``speedup`` is base time / candidate time with a 95% CI over paired blocks."""
    from pytest_sme2.bench import BenchmarkRun, run_comparison

    config = request.config
    record = _recorder(request)

    def progress(msg: str) -> None:
        _write_live(config, f"sme2: {msg}")

    def compare(base: str, candidate: str, model: str, dtype: str = "fp32", threads: int = 1,
                blocks: int | None = None, margin: float = DEFAULT_MARGIN) -> Comparison:
        try:
            cmp = run_comparison(
                BenchmarkRun(model, dtype, threads, label=request.node.nodeid, progress=progress),
                sme2_session.runner(base, progress), sme2_session.runner(candidate, progress),
                sme2_device, sme2_session.settings, blocks=blocks or sme2_session.blocks,
                margin=margin, on_block=record)
        except Sme2Error as e:
            _fail(e, config)
        try:
            judgements = {runner: sme2_session.judge(blocks) for runner, blocks in
                          ((base, cmp.base_blocks), (candidate, cmp.candidate_blocks))}
        except Sme2Error as e:
            request.node.user_properties.append((COMPARISON_PROPERTY, cmp.to_json()))
            _fail(e, config)
        cmp.extra["baselines"] = {r: j.to_dict() for r, j in judgements.items()}
        request.node.user_properties.append((COMPARISON_PROPERTY, cmp.to_json()))
        _enforce_gate(request, sme2_session, list(judgements.values()))
        return cmp

    return compare


def _enforce_gate(request: pytest.FixtureRequest, session: BenchSession,
                  judgements: list) -> None:
    """JUnit properties always; a failure when --fail-on-regression is set and a judgement
    shows a clear regression, or a baseline exists but cannot be compared (never a silent
    pass). Every regression of the test is named in the one failure."""
    from pytest_sme2.baselines import junit_properties

    for judgement in judgements:
        for name, value in junit_properties(judgement):
            request.node.user_properties.append((name, value))
    # One line per baseline file: a file's categories share its reason for not comparing.
    foreign = list(dict.fromkeys(j.reason for j in judgements if j.foreign))
    if session.fail_on_regression is None:
        for reason in foreign:
            _write_live(request.config, f"sme2: {reason}")
        return
    regressions = [j.reason for j in judgements if j.regressed]
    if regressions:
        pytest.fail("regression against the baseline: " + "; and ".join(regressions),
                    pytrace=False)
    if foreign:
        pytest.fail("; ".join(foreign), pytrace=False)


class _Collector:
    """Receives results on the process that reports (the xdist controller, or the only one):
    results travel on test reports, so they reach it from every worker."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.session: BenchSession = config.stash[SESSION_KEY]

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call":
            return
        from pytest_sme2.report.terminal import benchmark_line, comparison_line
        from pytest_sme2.results import BenchmarkResult

        for name, value in report.user_properties:
            if name == RESULT_PROPERTY:
                result = BenchmarkResult.from_json(value)
                self.session.add(result)
                if result.extra.get("block") is None:
                    _write_live(self.config, benchmark_line(result))
            elif name == COMPARISON_PROPERTY:
                self.session.add_comparison(value)
                _write_live(self.config, comparison_line(value))

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if not self.session.save_baseline or not self.session.results:
            return
        if exitstatus == pytest.ExitCode.INTERRUPTED:
            _write_live(self.config, "sme2: interrupted: no baseline saved from a partial session")
            return
        try:
            saved = self.session.save_baselines()
        except Sme2Error as e:
            _write_live(self.config, f"sme2: {e}")
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
            return
        _write_live(self.config, f"sme2: saved {len(saved)} baseline(s) in "
                                 f"{self.session.baseline_dir}")

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.session.results:
            return
        from pytest_sme2.report.terminal import summary_table

        terminalreporter.section("pytest-sme2 summary")
        for line in summary_table(self.session.results, self.session.comparisons):
            terminalreporter.write_line(line)
        try:
            written = self.session.finish()
        except Sme2Error as e:
            terminalreporter.write_line(f"sme2: {e}", red=True)
            written = [self.session.results_path]
        except KeyboardInterrupt:
            terminalreporter.write_line(f"sme2: interrupted while writing report.md; "
                                        f"{self.session.results_path} is complete", red=True)
            return
        for path in written:
            terminalreporter.write_line(f"wrote {path}")
        _skip_exit_collection()


_EXIT_HOOKS: set[str] = set()


def _skip_exit_collection() -> None:
    """At exit, Python's final garbage collections walk every object a benchmark session made
    (pandas, matplotlib, results): ~0.4 s for nothing. Freezing them first skips that walk;
    done at exit only, so a pytest run inside a longer-lived process is not affected."""
    import atexit
    import gc

    if "freeze" not in _EXIT_HOOKS:  # once, however many sessions this process runs
        _EXIT_HOOKS.add("freeze")
        atexit.register(gc.freeze)
