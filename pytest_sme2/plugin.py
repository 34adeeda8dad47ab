"""pytest glue: options, fixtures, the benchmark matrix, live lines and the summary table. The
work itself lives in the library: the configuration in :mod:`pytest_sme2.config`, measuring in
:mod:`pytest_sme2.bench`, the regression gate in :mod:`pytest_sme2.gate`."""

from __future__ import annotations

import re
import sys
from contextlib import nullcontext
from dataclasses import replace
from typing import TYPE_CHECKING, Callable, Sequence

import pytest

from pytest_sme2.config import (FLAGS, OPTIONS, REPEATABLE, RUNNERS_DEST, RUNNERS_INI, BaseDirs,
                                GatePolicy, Sme2Config, config_from_options)
from pytest_sme2.devices.registry import check_only_device, resolve_devices
from pytest_sme2.errors import Sme2Error
from pytest_sme2.export import ExportedModel, export_model
from pytest_sme2.matrix import Case, build_matrix, with_devices
from pytest_sme2.progress import SessionProgress
from pytest_sme2.session import BenchSession
from pytest_sme2.settings import DEFAULT_MARGIN, BenchSettings

# The measuring and reporting library (numpy, pandas) is imported where it is used, not here:
# every pytest run of a project that has pytest-sme2 installed imports this module.
if TYPE_CHECKING:
    from pytest_sme2.bench import BenchmarkRun
    from pytest_sme2.compare import Comparison
    from pytest_sme2.gate import GateReport, Judgement
    from pytest_sme2.results import BenchmarkResult

SESSION_KEY = pytest.StashKey[BenchSession]()
MATRIX_KEY = pytest.StashKey[list[Case]]()
PROGRESS_KEY = pytest.StashKey["SessionProgress"]()
BENCH_FIXTURES = ("sme2_bench", "sme2_compare")   # a test using one is a benchmark case
NOTES_KEY = pytest.StashKey[list[str]]()      # header lines: devices left out, --dist chosen
RESULT_PROPERTY = "sme2_result"
COMPARISON_PROPERTY = "sme2_comparison"


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    """The hooks plugins and conftest.py files implement: :mod:`pytest_sme2.hookspec`."""
    from pytest_sme2 import hookspec

    pluginmanager.add_hookspecs(hookspec)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("sme2", "pytest-sme2 benchmarking")
    for dest, option in OPTIONS.items():
        flag = "--" + dest.replace("_", "-")
        group.addoption(flag, dest=dest, default=None, help=f"{option.help} [ini: {option.ini}]",
                        **({"action": "append"} if dest in REPEATABLE else {}))
        parser.addini(option.ini, option.help, default=option.default)
    for dest, help_text in FLAGS.items():
        group.addoption("--" + dest.replace("_", "-"), dest=dest, action="store_true",
                        default=False, help=help_text)
    group.addoption("--runner", dest=RUNNERS_DEST, action="append", default=[],
                    metavar="NAME=SPEC",
                    help="add a runner: NAME=python, NAME=native or NAME=/path/to/executor_runner"
                         f"[,libs=DIR][,label=value...] (repeatable) [ini: {RUNNERS_INI}]")
    parser.addini(RUNNERS_INI, "runner specs, one per line (see --runner)", type="linelist",
                  default=[])


def _config(config: pytest.Config) -> Sme2Config:
    """The session's configuration from pytest's option and ini values (one usage error)."""
    values = {dest: config.getoption(dest) for dest in (*OPTIONS, *FLAGS, RUNNERS_DEST)}
    ini = {name: config.getini(name) for name in (*(o.ini for o in OPTIONS.values()),
                                                   RUNNERS_INI)}
    from pytest_sme2.hooks import category_rules, runner_kinds

    try:
        cfg = config_from_options(values, ini,
                                  BaseDirs(config.invocation_params.dir, config.rootpath),
                                  runner_kinds(config.hook), category_rules(config.hook))
        if cfg.measure == "instructions" and "host" in cfg.devices:
            from pytest_sme2.measure.instructions import find_valgrind

            find_valgrind()   # missing or too old: one line naming the package, up front
        return cfg
    except Sme2Error as e:
        raise pytest.UsageError(str(e)) from None


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    # A config's cleanups run last in, first out: one added before any plugin's configure runs
    # after pytest's own end-of-session garbage collections, which the session's frozen
    # objects (BenchSession.prepare) spared a walk of the whole heap.
    config.add_cleanup(lambda: _release_session(config))


def _release_session(config: pytest.Config) -> None:
    session = config.stash.get(SESSION_KEY, None)
    if session is not None:
        session.release()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "sme2(threads=[...], runners=[...]): a pytest-sme2 "
                            "benchmark; threads= filters its matrix cases, runners= names the "
                            "runners it uses so the session prepares them before measuring")
    cfg = _config(config)
    config.stash[NOTES_KEY] = []
    if _is_xdist_worker(config):   # the controller's list: every worker collects the same ids
        from pytest_sme2.scheduling import configure_worker

        devices = configure_worker(config, _item_device) or cfg.devices
    else:
        devices = _resolve_devices(config, cfg)
    config.stash[SESSION_KEY] = BenchSession(cfg, hook=config.hook, devices=devices)
    if not _is_xdist_worker(config):
        config.pluginmanager.register(_Collector(config), "sme2-collector")


def _resolve_devices(config: pytest.Config, cfg: Sme2Config) -> tuple[str, ...]:
    """``android:*`` expanded, once, on the process that schedules (one usage error)."""
    try:
        devices, notes = resolve_devices(cfg.devices)
        check_only_device(devices)
    except Sme2Error as e:
        raise pytest.UsageError(str(e)) from None
    config.stash[NOTES_KEY].extend(f"sme2: {n}" for n in notes)
    if config.pluginmanager.hasplugin("xdist"):
        from pytest_sme2.scheduling import configure_controller

        config.stash[NOTES_KEY].extend(configure_controller(config, devices))
    return devices


def pytest_report_header(config: pytest.Config) -> list[str]:
    session = config.stash.get(SESSION_KEY, None)
    lines = list(config.stash.get(NOTES_KEY, []))
    if session is not None and session.devices and len(session.devices) > 1:
        lines.insert(0, f"sme2: {len(session.devices)} devices: {', '.join(session.devices)}")
    return lines


def pytest_sessionstart(session: pytest.Session) -> None:
    # After conftest files had their say (they may register models), check the matrix: a typo
    # in --sme2-models stops the session with one line instead of failing every benchmark.
    _matrix(session.config)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Runners the collected benchmarks declare (``@pytest.mark.sme2(runners=[...])``) are
    prepared before the first measurement instead of in the middle of the session (the python
    runner's fork server imports torch: seconds). Not on pytest-xdist workers: each collects
    every test, and a worker measuring on the host must not share the CPU with the import."""
    if _is_xdist_worker(session.config):
        return
    declared = {name for item in session.items
                for marker in item.iter_markers("sme2")
                for name in marker.kwargs.get("runners", ())}
    if declared:
        cases = [case for item in session.items
                 if isinstance(case := getattr(getattr(item, "callspec", None), "params",
                                               {}).get("sme2_case"), Case)]
        session.config.stash[SESSION_KEY].start_ahead(
            declared, [(c.model, c.dtype) for c in cases])


def _matrix(config: pytest.Config) -> list[Case]:
    if MATRIX_KEY not in config.stash:
        try:
            cfg = config.stash[SESSION_KEY].config
            config.stash[MATRIX_KEY] = build_matrix(list(cfg.models), list(cfg.dtypes),
                                                    cfg.threads)
        except Sme2Error as e:
            raise pytest.UsageError(str(e)) from None
    return config.stash[MATRIX_KEY]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Any test asking for ``sme2_case`` runs once per matrix case — on each device, when the
    session has several (ids gain ``-<device>``); any other test that uses a device runs once
    per device then."""
    devices = _devices(metafunc.config)
    if "sme2_case" in metafunc.fixturenames:
        cases = _matrix(metafunc.config)
        marker = metafunc.definition.get_closest_marker("sme2")
        if marker and "threads" in marker.kwargs:  # e.g. @pytest.mark.sme2(threads=[1])
            keep = set(marker.kwargs["threads"])
            cases = [c for c in cases if c.threads in keep]
        cases = with_devices(cases, devices)
        metafunc.parametrize("sme2_case", cases,
                             ids=[c.device_id if len(devices) > 1 else c.id for c in cases])
    elif len(devices) > 1 and "sme2_device_spec" in metafunc.fixturenames:
        metafunc.parametrize("sme2_device_spec", devices, ids=list(devices))


def _devices(config: pytest.Config) -> tuple[str, ...]:
    devices = config.stash[SESSION_KEY].devices
    assert devices
    return devices


def _item_device(item: pytest.Item) -> str | None:
    """The device a collected test runs on; None when it uses none."""
    if "sme2_device_spec" not in getattr(item, "fixturenames", ()):
        return None
    params = getattr(item, "callspec", None)
    params = params.params if params else {}
    case = params.get("sme2_case")
    if isinstance(case, Case) and case.device:
        return case.device
    return params.get("sme2_device_spec") or _devices(item.config)[0]




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


@pytest.fixture
def sme2_device_spec(request: pytest.FixtureRequest, sme2_session: BenchSession) -> str:
    """The ``--device`` spec this test runs on: its ``sme2_case``'s device, or (a test without
    the matrix) its device parameter when the session has several, else the only device."""
    device = _item_device(request.node)
    return device if device is not None else _devices(request.config)[0]


@pytest.fixture
def sme2_device(pytestconfig: pytest.Config, sme2_session: BenchSession, sme2_device_spec: str):
    """The device this test runs on (``--device``; one per test when there are several); a
    device that cannot be opened, or is gone, fails each test that needs it with one line
    saying what to do."""
    if _is_xdist_worker(pytestconfig):
        from pytest_sme2.scheduling import overlap_problem

        problem = overlap_problem(pytestconfig)
        if problem:
            pytest.fail(problem, pytrace=False)
    try:
        return sme2_session.device(sme2_device_spec)
    except Sme2Error as e:
        _fail(e, pytestconfig)


@pytest.fixture(scope="session")
def sme2_runners(sme2_session: BenchSession) -> dict[str, dict]:
    """The configured runners by name: kind and labels (made on first use, not here)."""
    return {name: {"kind": s.kind, "labels": dict(s.labels),
                   "path": str(s.path) if s.path else None}
            for name, s in sme2_session.specs.items()}


def _sme2_runner(session: BenchSession, state: str, config: pytest.Config, device: str) -> str:
    try:
        name = session.sme2_runner(state, device)
    except Sme2Error as e:   # the device could not be opened to ask it about SME2
        _fail(e, config)
    if name is None:
        pytest.skip(f"no SME2-{state} runner configured: pass --runner "
                    f"sme2_{state}=/path/to/executor_runner,sme2={state} "
                    "(build recipe: docs/native-runner.md), or run on --device qemu, where "
                    "the native runner with SME2 hidden is the SME2-off side")
    return name


@pytest.fixture
def sme2_on(pytestconfig: pytest.Config, sme2_session: BenchSession,
            sme2_device_spec: str) -> str:
    """Name of the runner labelled sme2=on (or named sme2_on); on an SME2 device that can hide
    SME2 from a process (QEMU) the native runner as built; skips when there is none."""
    return _sme2_runner(sme2_session, "on", pytestconfig, sme2_device_spec)


@pytest.fixture
def sme2_off(pytestconfig: pytest.Config, sme2_session: BenchSession,
             sme2_device_spec: str) -> str:
    """Name of the runner labelled sme2=off (or named sme2_off); on an SME2 device that can hide
    SME2 from a process (QEMU) the same native binary with SME and SME2 masked; skips when there
    is none."""
    return _sme2_runner(sme2_session, "off", pytestconfig, sme2_device_spec)


@pytest.fixture
def sme2_emulated(sme2_device) -> bool:
    """True on an emulated CPU (QEMU): its timings say nothing about speed, so tests assert
    kernels and outputs there, not speed-ups."""
    return bool(sme2_device.facts().extra.get("emulated"))


@pytest.fixture
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
    return lambda dtype: sme2_session.config.min_speedup.get(dtype, 1.0)


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


def _recorder(request: pytest.FixtureRequest
              ) -> Callable[[Sequence[BenchmarkResult], dict[str, GateReport]], None]:
    """Records a benchmark's blocks once the gate judged them (or could not). Results ride on
    the test report, so pytest-xdist carries them to the controller; every exit of a fixture
    records what it measured, so a failure in the test loses nothing. Every block of
    results.json has the same keys, whatever the gate did: what was under test
    (``under_test``) and the verdicts on its benchmark — all the benchmark's blocks judged
    together — (``baseline``, ``baseline_categories``); a benchmark the gate could not judge
    (a corrupt baseline, a failed run) has a ``not_compared`` verdict saying why."""
    from pytest_sme2 import gate
    from pytest_sme2.baseline_key import UNDER_TEST, UnderTest

    def record(blocks: Sequence[BenchmarkResult], reports: dict[str, GateReport]) -> None:
        for result in blocks:
            report = reports.get(result.runner_name) or \
                gate.GateReport.unjudged("not judged: the test stopped first")
            result.extra.setdefault(UNDER_TEST, UnderTest.of(result).to_dict())
            report.record_on(result)
            request.config.hook.pytest_sme2_amend_result(result=result)
            request.node.user_properties.append((RESULT_PROPERTY, result.to_json()))

    return record


def _progress(config: pytest.Config) -> Callable[[str], None]:
    return lambda msg: _write_live(config, f"sme2: {msg}")


def _block_done(config: pytest.Config, block: int, blocks: int | None = None) -> None:
    """A progress line after a block, when one is due (pytest_sme2.progress)."""
    tracker = config.stash.get(PROGRESS_KEY, None)
    line = tracker.block_done(block, blocks) if tracker is not None else None
    if line:
        _write_live(config, f"sme2: {line}")


def _judge(session: BenchSession, run: BenchmarkRun, runner: str,
           measured: list[BenchmarkResult], policy: GatePolicy,
           progress: Callable[[str], None], device: str,
           side_label: bool = False,
           config: pytest.Config | None = None) -> GateReport:
    """The gate on ``runner``'s blocks in ``measured``; confirmation blocks, measured when a
    regression is suspected, are added to ``measured``. ``side_label``: name them as
    comparison blocks (``test[runner#3]``). A live line says what changed under test since
    the baseline, with the verdict."""
    from pytest_sme2 import gate

    def measure_more(block: int) -> BenchmarkResult:
        label = f"{run.label}[{runner}#{block}]" if side_label else run.label
        measured.append(session.measure(replace(run, label=label, block=block), runner,
                                        progress, export_again=False, device=device))
        if config is not None:
            _block_done(config, len(measured))
        return measured[-1]

    side = [r for r in measured if r.runner_name == runner]
    report = gate.run_with_confirmation(side, measure_more, session.config.baseline_dir, policy,
                                        progress)[1]
    if report.e2e.changed_since_baseline:  # what the test changed, and what it did to speed
        progress(f"{run.model} {run.dtype} t{run.threads} {runner}: {report.e2e.summary}")
    return report


def _label(request: pytest.FixtureRequest) -> str:
    """The test's node id as results name it: without the ``@group`` suffix xdist's loadgroup
    adds on workers, so a benchmark is named alike with and without -n."""
    nodeid = request.node.nodeid
    mark = request.node.get_closest_marker("xdist_group")
    if mark and mark.args and nodeid.endswith(f"@{mark.args[0]}"):
        return nodeid[:-len(mark.args[0]) - 1]
    return nodeid


@pytest.fixture
def sme2_bench(request: pytest.FixtureRequest, sme2_session: BenchSession,
               sme2_device, sme2_device_spec: str) -> Callable[..., BenchmarkResult]:
    """Run one benchmark setting and return its :class:`BenchmarkResult`, judged against its
    baseline (a suspected regression measured again first)::

        def test_latency(sme2_bench):
            result = sme2_bench("toy_cnn", dtype="fp32", threads=1)
            assert result.e2e.median_ms < 5
    """
    sme2_session.prepare()   # the measuring stack, imported once the way the session wants it
    from pytest_sme2.bench import BenchmarkRun
    from pytest_sme2.gate import GateReport

    cfg, record, progress = sme2_session.config, _recorder(request), _progress(request.config)

    def bench(model: str, dtype: str = "fp32", threads: int = 1,
              runner: str | None = None) -> BenchmarkResult:
        device = sme2_device_spec
        runner = runner or sme2_session.default_runner(progress, device)
        run = BenchmarkRun(model, dtype, threads, label=_label(request), progress=progress,
                           rules=sme2_session.config.category_rules,
                           measuring=sme2_session.measuring)
        measured: list[BenchmarkResult] = []
        reports: dict[str, GateReport] = {}
        try:
            measured.append(sme2_session.measure(run, runner, progress, device=device))
            _block_done(request.config, 1)
            if cfg.measure == "instructions":
                sme2_session.count_instructions(measured[0], progress, device)
            reports[runner] = _judge(sme2_session, run, runner, measured, cfg.gate, progress,
                                     device, config=request.config)
        except Sme2Error as e:  # a failed run, a corrupt baseline file
            reports[runner] = GateReport.unjudged(f"not judged: {e}")
            _fail(e, request.config)
        finally:
            record(measured, reports)
        _enforce_gate(request, cfg.gate, reports[runner])
        return measured[0]

    return bench


@pytest.fixture
def sme2_compare(request: pytest.FixtureRequest, sme2_session: BenchSession,
                 sme2_device, sme2_device_spec: str) -> Callable[..., Comparison]:
    """Compare two runners on the same device in interleaved blocks::

        def test_sme2(sme2_compare, sme2_off, sme2_on):
            cmp = sme2_compare(sme2_off, sme2_on, "mobilenet_v3_small", dtype="fp16")
            assert cmp.speedup.low >= 1.5

    ``speedup`` is base time / candidate time with a 95% CI over paired blocks. Each side is
    judged against its baseline end to end, on all its blocks."""
    sme2_session.prepare()
    from pytest_sme2.bench import BenchmarkRun, run_comparison
    from pytest_sme2.gate import GateReport

    cfg, record, progress = sme2_session.config, _recorder(request), _progress(request.config)
    policy = replace(cfg.gate, categories=())

    def compare(base: str, candidate: str, model: str, dtype: str = "fp32", threads: int = 1,
                blocks: int | None = None, margin: float = DEFAULT_MARGIN) -> Comparison:
        device = sme2_device_spec
        run = BenchmarkRun(model, dtype, threads, label=_label(request), progress=progress,
                           rules=sme2_session.config.category_rules,
                           measuring=sme2_session.measuring)
        measured: list[BenchmarkResult] = []        # every block, in the order measured
        reports: dict[str, GateReport] = {}         # by runner name, as the blocks carry it
        cmp = None
        per_side = blocks or cfg.blocks

        def on_block(result: BenchmarkResult) -> None:
            measured.append(result)
            _block_done(request.config, len(measured), 2 * per_side)

        try:
            cmp = run_comparison(
                run, sme2_session.runner(base, progress, device),
                sme2_session.runner(candidate, progress, device),
                sme2_device, sme2_session.settings, blocks=per_side, margin=margin,
                on_block=on_block)
            for side in (cmp.base, cmp.candidate):
                reports[side] = _judge(sme2_session, run, side, measured, policy, progress,
                                       device, side_label=True, config=request.config)
        except Sme2Error as e:  # a failed run, a corrupt baseline file
            reports = dict.fromkeys({r.runner_name for r in measured},
                                    GateReport.unjudged(f"not judged: {e}"))
            _fail(e, request.config)
        finally:
            record(measured, reports)
            if cmp is not None:
                cmp.baselines = {r: report.e2e.to_dict() for r, report in reports.items()}
                request.node.user_properties.append((COMPARISON_PROPERTY, cmp.to_json()))
        _enforce_gate(request, policy, GateReport.of_all(list(reports.values())))
        return cmp

    return compare


def junit_properties(judgement: Judgement) -> list[tuple[str, object]]:
    """``record_property`` pairs, so CI systems show medians and ratios beside the test."""
    pre = "sme2_gate" + (f"_{judgement.measure}" if judgement.measure != "time" else "") \
        + (f"_{re.sub(r'[^A-Za-z0-9]+', '_', judgement.category)}"
           if judgement.category else "")
    props: list[tuple[str, object]] = [(f"{pre}_status", judgement.status)]
    r = judgement.ratio
    if r is not None:
        props += [(f"{pre}_baseline_median", round(judgement.baseline_median or 0.0, 6)),
                  (f"{pre}_current_median", round(judgement.current_median or 0.0, 6)),
                  (f"{pre}_ratio", round(r.point, 4)), (f"{pre}_ratio_ci_low", round(r.low, 4)),
                  (f"{pre}_ratio_ci_high", round(r.high, 4)),
                  (f"{pre}_noise_floor_pct", round(judgement.noise_floor_pct or 0.0, 2)),
                  (f"{pre}_baseline_sessions", judgement.baseline_sessions),
                  (f"{pre}_current_blocks", judgement.current_blocks)]
    if judgement.changed_since_baseline:
        props.append((f"{pre}_changed_since_baseline",
                      ", ".join(judgement.changed_since_baseline)))
    props += [(f"{pre}_threshold_pct", judgement.threshold_pct),
              (f"{pre}_reason", judgement.reason)]
    return props


def _enforce_gate(request: pytest.FixtureRequest, policy: GatePolicy,
                  report: GateReport) -> None:
    """JUnit properties always; a failure when the policy is enforced (--fail-on-regression)
    and the report shows a clear regression, or a baseline exists but cannot be compared
    (never a silent pass)."""
    for judgement in report.judgements:
        request.node.user_properties.extend(junit_properties(judgement))
    failure = report.failure(policy)
    if failure:
        pytest.fail(failure, pytrace=False)
    if not policy.enforced:  # one line per baseline file: its categories share the reason
        for reason in dict.fromkeys(j.reason for j in report.judgements if j.foreign):
            _write_live(request.config, f"sme2: {reason}")


class _Collector:
    """Receives results on the process that reports (the xdist controller, or the only one):
    results travel on test reports, so they reach it from every worker."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.session: BenchSession = config.stash[SESSION_KEY]
        self.cases: set[str] = set()        # node ids of the benchmark cases
        self.cooldown_told = False          # "--sme2-cooldown cannot be applied": said once

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """Count the benchmark cases for the progress lines (pytest_sme2.progress). Under
        pytest-xdist the controller collects nothing and workers print no live lines: none."""
        from pytest_sme2 import progress

        self.cases = {item.nodeid for item in session.items
                      if any(f in getattr(item, "fixturenames", ()) for f in BENCH_FIXTURES)}
        every = progress.interval(self.session.config.progress, self.config.option.verbose)
        if self.cases and every is not None:
            self.config.stash[PROGRESS_KEY] = SessionProgress(len(self.cases), every,
                                                              clock=progress.clock)

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        tracker = self.config.stash.get(PROGRESS_KEY, None)
        if tracker is not None and nodeid in self.cases:
            line = tracker.case_started(nodeid.split("::")[-1])
            if line:
                _write_live(self.config, f"sme2: {line}")

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        ours = [(name, value) for name, value in report.user_properties
                if name in (RESULT_PROPERTY, COMPARISON_PROPERTY)]
        if report.when != "call" or not ours:
            return  # a test that measured nothing costs no import of the measuring stack
        from pytest_sme2.report.terminal import benchmark_line, comparison_line, cooldown_lines
        from pytest_sme2.results import BenchmarkResult, ComparisonRecord

        for name, value in ours:
            if name == RESULT_PROPERTY:
                result = BenchmarkResult.from_json(value)
                self.session.add(result)
                if result.block is None:
                    several = len(self.session.devices or ()) > 1
                    _write_live(self.config, benchmark_line(result, device=several))
                for line in cooldown_lines(result, told=self.cooldown_told):
                    _write_live(self.config, line)
                held = result.context.cooldown
                self.cooldown_told |= held is not None and not held.applied
            elif name == COMPARISON_PROPERTY:
                record = ComparisonRecord.from_json(value)
                self.session.add_comparison(record)
                _write_live(self.config, comparison_line(record, self._device_of(record)))

    def _device_of(self, record) -> str | None:
        """The device a comparison ran on, in a session on several (its blocks say)."""
        if len(self.session.devices or ()) < 2:
            return None
        blocks = set(record.base_blocks)
        return next((r.device_label for r in self.session.results if r.nodeid in blocks), None)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if not self.session.config.save_baseline or not self.session.results:
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
                                 f"{self.session.config.baseline_dir}")

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
