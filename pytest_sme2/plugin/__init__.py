"""pytest glue, hooks only: options, the session's lifecycle, collection (the benchmark matrix,
runners declared ahead), xdist wiring. What a test touches is :mod:`pytest_sme2.plugin.fixtures`;
the process that reports, :mod:`pytest_sme2.plugin.collector`; the benchmark itself,
:mod:`pytest_sme2.measure.benchmark`; what the session costs, :mod:`pytest_sme2.measure.cost`.
This module is the ``pytest11`` entry point: the fixtures are found here because it imports
them."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pytest_sme2._util.text import plain
from pytest_sme2.measure import cost as session_cost
from pytest_sme2.runners.spec import runner_kinds, spec_forms
from pytest_sme2.plugin.collector import (COLLECTOR_NAME, Collector, is_xdist_worker,
                                          live_progress, write_live)
from pytest_sme2.measure.config import BaseDirs, Sme2Config, config_from_options
from pytest_sme2.measure.options import FLAGS, OPTIONS, REPEATABLE, RUNNERS_DEST, RUNNERS_INI
from pytest_sme2.devices.base import Device
from pytest_sme2.devices.kinds import HOST
from pytest_sme2.devices.registry import (check_only_device, open_plugin_devices,
                                          remote_adb_warning, resolve_devices)
from pytest_sme2.hookspec import category_rules
from pytest_sme2.errors import Sme2Error
from pytest_sme2.plugin.fixtures import (  # noqa: F401 - pytest finds the fixtures here
    SESSION_KEY, item_device, session_devices, sme2_bench, sme2_capable_device, sme2_compare,
    sme2_device, sme2_device_spec, sme2_emulated, sme2_generate, sme2_min_speedup, sme2_model,
    sme2_off, sme2_on, sme2_runners, sme2_session, sme2_settings, sme_off, sme_on)
from pytest_sme2.measure.matrix import (Case, build_llm_matrix, build_matrix, llm_models_on,
                                        with_devices)
from pytest_sme2.report.outputs import warm_up
from pytest_sme2.measure.session import BenchSession
from pytest_sme2 import hookspec
from pytest_sme2.plugin.scheduling import configure_worker, configure_controller

MATRIX_KEY = pytest.StashKey[list[Case]]()
NOTES_KEY = pytest.StashKey[list[str]]()      # header lines: devices left out, --dist chosen
REMOTE_ADB_KEY = pytest.StashKey[str]()       # the line saying an adb server is on the network


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    """The hooks plugins and conftest.py files implement: :mod:`pytest_sme2.hookspec`."""

    pluginmanager.add_hookspecs(hookspec)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("sme2", "pytest-sme2 benchmarking")
    for dest, option in OPTIONS.items():
        flag = "--" + dest.replace("_", "-")
        help_text = plain(option.help)     # shown on a terminal: no reST markup
        # argparse formats help with %: "5% of" would read as a conversion ("% o")
        group.addoption(flag, dest=dest, default=None,
                        help=f"{help_text} [ini: {option.ini}]".replace("%", "%%"),
                        **({"action": "append"} if dest in REPEATABLE else {}))
        parser.addini(option.ini, help_text, default=option.default)
    for dest, flag in FLAGS.items():
        group.addoption("--" + dest.replace("_", "-"), dest=dest, action="store_true",
                        default=False, help=plain(flag.help).replace("%", "%%"))
    group.addoption("--runner", dest=RUNNERS_DEST, action="append", default=[],
                    metavar="NAME=SPEC",
                    help=f"add a runner: {spec_forms()} (repeatable) [ini: {RUNNERS_INI}]")
    parser.addini(RUNNERS_INI, "runner specs, one per line (see --runner)", type="linelist",
                  default=[])


def _config(config: pytest.Config) -> Sme2Config:
    """The session's configuration from pytest's option and ini values (one usage error)."""
    values = {dest: config.getoption(dest) for dest in (*OPTIONS, *FLAGS, RUNNERS_DEST)}
    ini = {name: config.getini(name) for name in (*(o.ini for o in OPTIONS.values()),
                                                   RUNNERS_INI)}
    try:
        cfg = config_from_options(values, ini,
                                  BaseDirs(config.invocation_params.dir, config.rootpath),
                                  runner_kinds(config.hook), category_rules(config.hook))
        if cfg.measure == "instructions" and HOST.name in cfg.devices:
            from pytest_sme2.instructions.count import (  # instructions.count: 15 ms of start-up
                find_valgrind)

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
    opened: dict[str, Device] = {}
    if is_xdist_worker(config):   # the controller's list: every worker collects the same ids

        devices = configure_worker(config, item_device) or cfg.devices
    else:
        opened = _open_plugin_devices(config, cfg.devices)
        devices = _resolve_devices(config, cfg)
    if cfg.history and cfg.history_baseline:   # the gate reads the store's last sessions
        from pytest_sme2.history.baselines import baseline_dir_from_store  # pandas: not at start-up

        folder, note = baseline_dir_from_store(cfg.history, cfg.history_baseline,
                                               cfg.settings.report_dir)
        config.stash[NOTES_KEY].append(note)
        cfg = replace(cfg, baseline_dir=folder or cfg.baseline_dir)
    session = config.stash[SESSION_KEY] = BenchSession(cfg, hook=config.hook, devices=devices,
                                                       warm_ups=(warm_up,))
    session.adopt_devices(opened)
    if not is_xdist_worker(config):
        config.pluginmanager.register(Collector(config, session), COLLECTOR_NAME)


def _open_plugin_devices(config: pytest.Config, specs: tuple[str, ...]) -> dict[str, Device]:
    """The devices of a kind a plugin opens, opened now: a kind that none opens (a typo) is one
    usage error before anything runs, not one error per benchmark."""
    try:
        return open_plugin_devices(specs, config.hook)
    except Sme2Error as e:
        raise pytest.UsageError(str(e)) from None


def _resolve_devices(config: pytest.Config, cfg: Sme2Config) -> tuple[str, ...]:
    """``android:*`` expanded, once, on the process that schedules (one usage error)."""
    remote = remote_adb_warning(cfg.devices)    # said once, at the session's start
    if remote:
        config.stash[REMOTE_ADB_KEY] = remote
    try:
        devices, notes = resolve_devices(cfg.devices)
        check_only_device(devices)
    except Sme2Error as e:
        raise pytest.UsageError(str(e)) from None
    config.stash[NOTES_KEY].extend(f"sme2: {n}" for n in notes)
    if config.pluginmanager.hasplugin("xdist"):
        config.stash[NOTES_KEY].extend(configure_controller(config, devices))
    return devices


def pytest_report_header(config: pytest.Config) -> list[str]:
    session = config.stash.get(SESSION_KEY, None)
    lines = list(config.stash.get(NOTES_KEY, []))
    if session is not None and session.devices and len(session.devices) > 1:
        lines.insert(0, f"sme2: {len(session.devices)} devices: {', '.join(session.devices)}")
    return lines


def pytest_sessionstart(session: pytest.Session) -> None:
    remote = session.config.stash.get(REMOTE_ADB_KEY, None)
    if remote:                  # the controller only: workers never resolve the devices
        write_live(session.config, remote)
    # After conftest files had their say (they may register models), check the matrix: a typo
    # in --sme2-models stops the session with one line instead of failing every benchmark.
    _matrix(session.config)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Runners the collected benchmarks declare (``@pytest.mark.sme2(runners=[...])``) are
    prepared before the first measurement instead of in the middle of the session (the python
    runner's fork server imports torch: seconds). Not on pytest-xdist workers: each collects
    every test, and a worker measuring on the host must not share the CPU with the import."""
    if is_xdist_worker(session.config):
        return
    _export_ahead(session)
    _say_threads_left_out(session)
    declared = {name for item in session.items
                for marker in item.iter_markers("sme2")
                for name in marker.kwargs.get("runners", ())}
    if declared:
        cases = [case for item in session.items
                 if isinstance(case := getattr(getattr(item, "callspec", None), "params",
                                               {}).get("sme2_case"), Case)]
        session.config.stash[SESSION_KEY].start_ahead(
            declared, [(c.model, c.dtype) for c in cases])


def _say_threads_left_out(session: pytest.Session) -> None:
    """One line when ``--sme2-threads`` asked for thread counts that a collected test's
    ``@pytest.mark.sme2(threads=[...])`` leaves out: they would disappear without a word."""
    cfg = session.config.stash[SESSION_KEY].config
    if not cfg.threads_given:
        return
    left: dict[str, tuple[int, ...]] = {}
    for item in session.items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        asked = (cfg.threads if "sme2_case" in params
                 else cfg.llm_threads if "sme2_llm_case" in params else ())
        marker = item.get_closest_marker("sme2")
        if asked and marker and "threads" in marker.kwargs:
            kept = set(marker.kwargs["threads"])
            dropped = tuple(t for t in asked if t not in kept)
            if dropped:
                left[getattr(item, "originalname", item.name)] = dropped
    if left:
        counts = sorted({t for d in left.values() for t in d})
        write_live(session.config, (
            f"sme2: --sme2-threads {','.join(map(str, cfg.threads))}: "
            f"{', '.join(map(str, counts))} thread(s) not measured by {', '.join(sorted(left))} "
            "(their @pytest.mark.sme2(threads=[...]) keeps fewer)"))


def _export_ahead(session: pytest.Session) -> None:
    """The collected matrix cases' exports that the cache lacks, side by side before the first
    measurement (pytest_sme2.programs.ahead): a fresh machine's first session is mostly
    exports. Not for --collect-only, nor on xdist (its workers share the CPUs already)."""
    if session.config.option.collectonly or not session.items:
        return
    points = []
    for item in session.items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        case = params.get("sme2_case") or params.get("sme2_llm_case")
        if isinstance(case, Case):
            points.append((case.model, case.dtype))
    if points:
        session.config.stash[SESSION_KEY].export_ahead(
            points, live_progress(session.config))


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
    devices = session_devices(metafunc.config)
    if "sme2_case" in metafunc.fixturenames:
        cases = _matrix(metafunc.config)
        marker = metafunc.definition.get_closest_marker("sme2")
        if marker and "threads" in marker.kwargs:  # e.g. @pytest.mark.sme2(threads=[1])
            keep = set(marker.kwargs["threads"])
            cases = [c for c in cases if c.threads in keep]
        cases = with_devices(cases, devices)
        metafunc.parametrize("sme2_case", cases,
                             ids=[c.device_id if len(devices) > 1 else c.id for c in cases])
    elif "sme2_llm_case" in metafunc.fixturenames:
        cfg = metafunc.config.stash[SESSION_KEY].config
        threads = cfg.llm_threads
        marker = metafunc.definition.get_closest_marker("sme2")
        if marker and "threads" in marker.kwargs:
            threads = tuple(t for t in threads if t in set(marker.kwargs["threads"]))
        try:
            cases = [c for d in devices
                     for c in with_devices(build_llm_matrix(llm_models_on(cfg.llm_models, d),
                                                            cfg.llm_schemes, threads,
                                                            cfg.context_depths), [d])]
        except Sme2Error as e:
            raise pytest.UsageError(str(e)) from None
        metafunc.parametrize("sme2_llm_case", cases,
                             ids=[c.device_id if len(devices) > 1 else c.id for c in cases])
    elif len(devices) > 1 and "sme2_device_spec" in metafunc.fixturenames:
        metafunc.parametrize("sme2_device_spec", devices, ids=list(devices))


def pytest_sessionfinish(session: pytest.Session) -> None:
    # Every process (each xdist worker included) removes what it left on its device.
    bench_session = session.config.stash.get(SESSION_KEY, None)
    if bench_session is not None:
        try:
            bench_session.close()
        except Sme2Error as e:
            write_live(session.config, f"sme2: cleanup: {e}")
    session_cost.skip_idle_hypothesis_summary(session.config)
