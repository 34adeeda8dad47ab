"""What does a benchmark session cost beside its runs? (Not a unit test: prints figures.)

    python evaluations/costs_session.py [--models LIST] [--dtypes LIST] [--threads LIST]
        [--no-compare] [--report-dir DIR] [--skip-session] [--skip-loop] [-- PYTEST ARGS]

From one invocation, on a warm export cache (a cold one is filled before anything is timed):

1. the hand-written loop: the runner invocations a default session makes, done directly with
   our native runner (as issue 17 measured it: the comparison's python-runner blocks too) on the
   same cached .pte files, with the same timed and warm-up runs and thread counts, one process
   per matrix case, its load-only processes (``--sme2-loads`` - 1 per case: load and one
   execute), plus the comparison's 2 x blocks processes;
2. ``pytest benchmarks -p no:cacheprovider`` on the same matrix in a subprocess, timed whole and
   broken into phases by a probe plugin (this module, loaded with ``-p costs_session``): start-up,
   time inside runner processes, analysis, CSVs, results.json writes, the end-of-session report;

then the ratio and the issue-17 target: session <= 1.5 x loop + 3 s of fixed start-up, and
the session split into fixed costs (start-up, preparing, waiting for the python runner's fork
server, the end) and the rest, which should scale with the loop.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from _common import ROOT, comma_list

PROBE_ENV = "SESSION_COST_PROBE"   # where the probe plugin writes its timings
TARGET_RATIO, TARGET_FIXED_S = 1.5, 3.0


# -- the probe plugin (runs inside the pytest subprocess) ------------------------------------

_spent: dict[str, float] = defaultdict(float)
_calls: dict[str, int] = defaultdict(int)
_marks: dict[str, float] = {}
_depth = [0]   # phases nest (finish() writes results.json): count only the outermost


def _timed(name: str, fn, inner: bool = False):
    """``fn`` timed under ``name``; ``inner`` phases count also inside another phase."""
    def wrapper(*args, **kwargs):
        outer = _depth[0] == 0 or inner
        _depth[0] += 1
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            _depth[0] -= 1
            if outer:
                _spent[name] += time.perf_counter() - t0
                _calls[name] += 1
    return wrapper


def _patch(module: str, attr: str, phase: str, inner: bool = False) -> None:
    import importlib

    mod = importlib.import_module(module)
    owner, _, name = attr.rpartition(".")
    target = getattr(mod, owner) if owner else mod
    setattr(target, name, _timed(phase, getattr(target, name), inner))


def pytest_configure(config) -> None:
    if not os.environ.get(PROBE_ENV):
        return
    _marks["configure"] = time.time()
    # Modules the plugin has imported by now. The measuring stack (pandas) is patched once the
    # session imported it itself (BenchSession.prepare): importing it here would move its cost
    # before the fork server starts, and the probe would change what it measures.
    for module, attr, phase in (
            ("pytest_sme2.devices.host", "HostDevice.run", "runner processes"),
            ("pytest_sme2.measure.session", "BenchSession.write", "results.json writes"),
            ("pytest_sme2.measure.session", "BenchSession.finish",
             "report (results.json, report.md, charts)"),
            ("pytest_sme2.measure.session", "BenchSession.close", "session close (fork server)")):
        _patch(module, attr, phase)
    from pytest_sme2.api import BenchSession

    prepare = _timed("preparing (imports, exports, templates)", BenchSession.prepare)

    def prepare_then_patch(self) -> None:
        prepare(self)
        if not _deferred_done:
            _deferred_done.append(True)
            for module, attr, phase in _DEFERRED:
                _patch(module, attr, phase)

    BenchSession.prepare = prepare_then_patch
    # The python runner's server: spawned ahead (start_ahead), it imports between measurements;
    # what is left of its start is waited for by its first run (inside "runner processes").
    _patch("pytest_sme2.runners.fork_server", "ForkServer._await_ready",
           "waiting for the fork server", inner=True)


_deferred_done: list[bool] = []
_DEFERRED = (("pytest_sme2.measure.block", "export_model", "export cache lookup"),
             ("pytest_sme2.measure.block", "read_etdump", "analysis"),
             ("pytest_sme2.measure.block", "read_etrecord", "analysis"),
             ("pytest_sme2.measure.block", "analyze", "analysis"),
             ("pytest_sme2.measure.block", "write_csvs", "CSVs"),
             ("pytest_sme2.measure.block", "write_trace", "Chrome traces"),
             ("pytest_sme2.gate.rule", "evaluate", "baseline gate"),
             ("pytest_sme2.report.terminal", "summary_table", "summary table"))


def pytest_runtest_setup(item) -> None:
    if os.environ.get(PROBE_ENV):
        _marks.setdefault("first_test", time.time())


def pytest_runtest_teardown(item) -> None:
    if os.environ.get(PROBE_ENV):
        _marks["last_test"] = time.time()


def pytest_sessionfinish(session) -> None:
    if os.environ.get(PROBE_ENV):
        _marks["sessionfinish"] = time.time()


def pytest_terminal_summary(terminalreporter) -> None:
    if os.environ.get(PROBE_ENV):
        _marks.setdefault("terminal_summary", time.time())


def pytest_unconfigure(config) -> None:
    path = os.environ.get(PROBE_ENV)
    if path:
        _marks["unconfigure"] = time.time()
        Path(path).write_text(json.dumps({"marks": _marks, "spent": _spent, "calls": _calls}))


# -- the measurement -------------------------------------------------------------------------

def _cases(models: list[str], dtypes: list[str], threads: list[int]) -> list[tuple]:
    return [(m, d, t) for m in models for d in dtypes for t in threads]


def hand_loop(cases: list[tuple], compare: bool, runs: int, warmup: int, blocks: int,
              tmp: Path, loads: int = 1) -> tuple[float, int]:
    """Seconds for the session's runner invocations done by hand, and how many there were."""
    from pytest_sme2.api import export_model, RunRequest, native_runner

    runner = native_runner(progress=print)
    requests = []
    for i, (model, dtype, threads) in enumerate(cases):
        ex = export_model(model, dtype, progress=print)   # fills a cold cache, untimed
        requests.append(RunRequest(ex.pte, tmp / f"c{i}.etdump", threads, runs, warmup,
                                   inputs=ex.inputs))
        requests += [RunRequest(ex.pte, tmp / f"c{i}.load{j}.etdump", threads, 1, 0,
                                inputs=ex.inputs) for j in range(1, loads)]
    if compare:  # test_host_runners_agree: toy_cnn fp32 t1, blocks per side, outputs of block 0
        ex = export_model("toy_cnn", "fp32", progress=print)
        requests += [RunRequest(ex.pte, tmp / f"b{i}.etdump", 1, runs, warmup, inputs=ex.inputs,
                                outputs=tmp / f"b{i}.bin" if i < 2 else None)
                     for i in range(2 * blocks)]
    t0 = time.perf_counter()
    for req in requests:
        subprocess.run(runner.command(req), check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0, len(requests)


def session(args: argparse.Namespace, report_dir: Path, probe: Path
            ) -> tuple[float, float, int, str]:
    """Launch time (epoch), wall seconds, exit status and output of one pytest session."""
    argv = [sys.executable, "-m", "pytest", "benchmarks", "-p", "no:cacheprovider",
            "-p", "costs_session", "--report-dir", str(report_dir),
            "--sme2-models", args.models, "--sme2-dtypes", args.dtypes,
            "--sme2-threads", args.threads, *args.pytest_args]
    if args.no_compare:
        argv += ["-k", "not host_runners"]
    env = {**os.environ, PROBE_ENV: str(probe),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).parent),
                                                       os.environ.get("PYTHONPATH")]))}
    start = time.time()
    t0 = time.perf_counter()
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
    return start, time.perf_counter() - t0, proc.returncode, proc.stdout + proc.stderr


def breakdown(probe: Path, launch: float, wall: float) -> list[tuple[str, float, str]]:
    doc = json.loads(probe.read_text())
    m, spent, calls = doc["marks"], doc["spent"], doc["calls"]
    first, last = m.get("first_test", m["unconfigure"]), m.get("last_test", m["unconfigure"])
    rows = [("start-up (launch -> first test)", first - launch, "")]
    in_tests = last - first
    named = 0.0
    wait = spent.get("waiting for the fork server", 0.0)
    for phase in ("preparing (imports, exports, templates)", "runner processes",
                  "export cache lookup", "analysis", "CSVs", "Chrome traces",
                  "results.json writes", "baseline gate"):
        if phase in spent:
            secs = spent[phase] - (wait if phase == "runner processes" else 0.0)
            rows.append((f"  {phase}", secs, f"{calls[phase]} calls"))
            named += spent[phase]
        if phase == "runner processes":
            rows.append(("  waiting for the fork server", wait,
                         "(what is left of its start when its first run comes)"))
    rows.insert(1, ("tests (first setup -> last teardown)", in_tests, ""))
    rows.append(("  other (pytest, fixtures, live lines)", in_tests - named, ""))
    rows.append(("end (last teardown -> exit)", launch + wall - last, ""))
    for phase in ("session close (fork server)", "summary table",
                  "report (results.json, report.md, charts)"):
        rows.append((f"  {phase}", spent.get(phase, 0.0), ""))
    rows.append(("  pytest_unconfigure -> exit", launch + wall - m["unconfigure"], ""))
    if os.environ.get("SESSION_COST_MARKS"):
        rows += [(f"mark {k}", v - launch, "") for k, v in sorted(m.items(), key=lambda kv: kv[1])]
    return rows


def main(argv: list[str] | None = None) -> int:
    from pytest_sme2.measure.matrix import DEFAULT_DTYPES, DEFAULT_MODELS, DEFAULT_THREADS
    from pytest_sme2.api import BenchSettings
    from pytest_sme2.measure.settings import MIN_BLOCKS

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default=",".join(DEFAULT_MODELS))
    p.add_argument("--dtypes", default=",".join(DEFAULT_DTYPES))
    p.add_argument("--threads", default=",".join(map(str, DEFAULT_THREADS)))
    p.add_argument("--no-compare", action="store_true",
                   help="leave out test_host_runners_agree (and its processes from the loop)")
    p.add_argument("--report-dir", type=Path, help="the session's report folder (default: temp)")
    p.add_argument("--skip-session", action="store_true")
    p.add_argument("--skip-loop", action="store_true")
    p.add_argument("--show-output", action="store_true", help="print pytest's output")
    p.add_argument("pytest_args", nargs="*", help="after --: more pytest arguments")
    args = p.parse_args(argv)
    defaults = BenchSettings()
    cases = _cases(comma_list(args.models), comma_list(args.dtypes),
                   [int(t) for t in comma_list(args.threads)])
    with tempfile.TemporaryDirectory() as tmp:
        loop_s = None
        if not args.skip_loop:
            loop_s, n = hand_loop(cases, not args.no_compare, defaults.runs, defaults.warmup,
                                  MIN_BLOCKS, Path(tmp), defaults.loads)
            print(f"hand-written loop: {loop_s:7.2f} s for {n} native runner processes "
                  f"({defaults.runs} timed + {defaults.warmup} warm-up runs each; "
                  f"{defaults.loads - 1} load-only processes per case)")
        if args.skip_session:
            return 0
        probe = Path(tmp) / "probe.json"
        report_dir = args.report_dir or Path(tmp) / "report"
        launch, wall, rc, output = session(args, report_dir, probe)
        if args.show_output or rc != 0:
            print(output)
        print(f"pytest session:    {wall:7.2f} s (exit status {rc}, report in {report_dir})")
        fixed = None
        if probe.is_file():
            rows = breakdown(probe, launch, wall)
            for name, secs, note in rows:
                print(f"  {name:<46} {secs:7.2f} s  {note}")
            by_name = {name.strip(): secs for name, secs, _ in rows}
            fixed = (by_name["start-up (launch -> first test)"]
                     + by_name.get("preparing (imports, exports, templates)", 0.0)
                     + by_name.get("waiting for the fork server", 0.0)
                     + by_name["end (last teardown -> exit)"])
        if rc != 0:
            print("the session failed: no figures to compare")
            return 1
        if loop_s:
            budget = TARGET_RATIO * loop_s + TARGET_FIXED_S
            print(f"ratio session / loop: {wall / loop_s:.1f}x; target "
                  f"<= {TARGET_RATIO} x loop + {TARGET_FIXED_S:g} s = {budget:.2f} s: "
                  f"{'met' if wall <= budget else 'NOT met'}")
            if fixed is not None:
                print(f"fixed costs (start-up, preparing, fork server wait, end): {fixed:.2f} s "
                      f"(target <= {TARGET_FIXED_S:g} s); the rest: {wall - fixed:.2f} s = "
                      f"{(wall - fixed) / loop_s:.2f} x loop (target <= {TARGET_RATIO})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
