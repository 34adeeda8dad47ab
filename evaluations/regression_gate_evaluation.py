"""Measure the regression gate on this machine the way CI uses it: real ``pytest benchmarks``
sessions over the default host matrix (not a unit test: ~25 minutes on 2 cores; prints figures).

    python evaluations/regression_gate_evaluation.py [--baseline-sessions 3] [--reps 3]
        [--threshold 10]
    python evaluations/regression_gate_evaluation.py --reanalyze run1/raw.json [run2/raw.json ...]

Every *session* is one ``pytest benchmarks/test_latency.py`` process (18 benchmarks: 3 models x
fp32/fp16/int8 x 1/2 threads, one runner process per benchmark, 30 timed runs):

1. baseline: ``--baseline-sessions`` sessions with ``--save-baseline`` into ``OUT/baselines``;
2. then ``--reps`` rounds of two sessions with ``--fail-on-regression PCT``:
   *quiet* (the same code again: every regression call, every non-zero exit, is a false alarm)
   and *loaded* (every core kept busy by competing processes for the whole session). A round's
   quiet and loaded sessions run back to back, so their ratio per benchmark is the true
   slowdown the load caused; the median over rounds decides which benchmarks were *affected*
   (>= 1.25x) and must be flagged.

The loaded sessions' competitors are ``--per-core`` processes pinned to each CPU that stream
through 64 MB of memory (``--load stream``: they take CPU time *and* evict the shared cache,
the way a busy phone's other apps do) or spin (``--load spin``: CPU time only; on this VM a
spinning neighbour leaves a 1-thread run's median alone, as the scheduler's time slices are
longer than one inference).

A benchmark the gate suspects is measured again in the same session (``--sme2-confirm-blocks``,
2 more runner processes) and judged on all its blocks; ``raw.json`` keeps every block.

Analysis (also offline with ``--reanalyze``): the plugin's own verdicts and exit statuses;
the same samples judged against a 1-session baseline (the first); pytest-benchmark's
``--benchmark-compare-fail=median:PCT`` rule (median of all runs vs the newest saved session's)
on the same data; and the quiet sessions with their samples multiplied by 1.25/1.5/2 (known
slowdowns on this machine's real noise). Raw samples: ``OUT/raw.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from _common import ROOT

import numpy as np

from pytest_sme2.api import (DEFAULT_THRESHOLD_PCT, REGRESSION, Judgement, judge_levels, Interval,
                             paired_ratio)

AFFECTED = 1.25            # a true slowdown at least this large must be flagged
LOAD_LIMIT_S = 1800        # a competing process never outlives this, whatever happens here

_LOAD_CODE = {
    "stream": ("import os, time, numpy as np\nos.sched_setaffinity(0, {{{cpu}}})\n"
               "a = np.ones(4 << 20); b = np.empty_like(a)\n"
               "end = time.monotonic() + {limit}\n"
               "while time.monotonic() < end:\n    np.copyto(b, a); np.copyto(a, b)\n"),
    "spin": ("import os, time\nos.sched_setaffinity(0, {{{cpu}}})\n"
             "end = time.monotonic() + {limit}\nwhile time.monotonic() < end:\n    pass\n"),
}


class Load:
    """``per_core`` competing processes pinned to every CPU this process may use; started and
    stopped by pid, each bounded in time."""

    def __init__(self, kind: str, per_core: int):
        self.kind, self.per_core = kind, per_core
        self.procs: list[subprocess.Popen] = []

    def __enter__(self) -> "Load":
        for cpu in sorted(os.sched_getaffinity(0)):
            code = _LOAD_CODE[self.kind].format(cpu=cpu, limit=LOAD_LIMIT_S)
            self.procs += [subprocess.Popen([sys.executable, "-c", code])
                           for _ in range(self.per_core)]
        time.sleep(1.0)  # let them start (numpy import, first pages touched)
        return self

    def __exit__(self, *exc) -> None:
        for p in self.procs:
            p.kill()
        for p in self.procs:
            p.wait()


def _loadavg() -> str:
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:
        return "?"


def _name(doc: dict) -> str:
    return f"{doc['model']}-{doc['dtype']}-t{doc['threads']}"


def run_session(args: argparse.Namespace, tag: str, save: bool, loaded: bool) -> dict:
    """One real pytest session; what it measured (per benchmark: samples and the plugin's
    gate verdict), its exit status, time and the load average around it."""
    out = args.out / tag
    cmd = [sys.executable, "-m", "pytest", str(ROOT / "benchmarks" / "test_latency.py"),
           "-p", "no:cacheprovider", "-q", "--report-dir", str(out),
           "--baseline-dir", str(args.out / "baselines"), "--junitxml", str(out / "junit.xml"),
           "--fail-on-regression", f"{args.threshold:g}", *args.pytest_args]
    if save:
        cmd.append("--save-baseline")
    t0, before = time.perf_counter(), _loadavg()
    if loaded:
        with Load(args.load, args.per_core):
            proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    else:
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    (out / "pytest.log").parent.mkdir(parents=True, exist_ok=True)
    (out / "pytest.log").write_text(proc.stdout + proc.stderr)
    try:
        doc = json.loads((out / "results.json").read_text())
    except (OSError, ValueError) as e:
        raise SystemExit(f"session {tag}: no results.json ({e}); see {out / 'pytest.log'}") \
            from None
    benches: dict[str, dict] = {}
    for b in doc["benchmarks"]:  # the test's result first, then its confirmation blocks
        entry = benches.setdefault(_name(b), {"blocks": [], "gate": None})
        if b.get("block") is None:
            entry["blocks"].insert(0, b["e2e_ms"])
            entry["gate"] = b.get("baseline")
        else:
            entry["blocks"].append(b["e2e_ms"])
    flagged = sum((b["gate"] or {}).get("status") == REGRESSION for b in benches.values())
    print(f"  {tag:8s} exit {proc.returncode}  {len(benches)} benchmarks  {flagged} regression "
          f"verdict(s)  {seconds:5.0f} s  load average {before} -> {_loadavg()}", flush=True)
    return {"tag": tag, "exit": proc.returncode, "seconds": round(seconds, 1),
            "load_before": before, "load_after": _loadavg(), "benchmarks": benches}


def measure(args: argparse.Namespace) -> dict:
    args.out.mkdir(parents=True, exist_ok=True)
    if (args.out / "baselines").exists() and any((args.out / "baselines").iterdir()):
        raise SystemExit(f"{args.out / 'baselines'} is not empty: use a fresh --out")
    t0 = time.perf_counter()
    print(f"{args.baseline_sessions} baseline session(s), then {args.reps} x (quiet, loaded "
          f"with {args.per_core} {args.load} process(es) per CPU); threshold {args.threshold:g}%",
          flush=True)
    base = [run_session(args, f"base{i + 1}", save=True, loaded=False)
            for i in range(args.baseline_sessions)]
    quiet, loaded = [], []
    for i in range(args.reps):
        quiet.append(run_session(args, f"quiet{i + 1}", save=False, loaded=False))
        loaded.append(run_session(args, f"loaded{i + 1}", save=False, loaded=True))
    return {"threshold": args.threshold, "load": args.load, "per_core": args.per_core,
            "pytest_args": args.pytest_args, "baseline": base, "quiet": quiet,
            "loaded": loaded, "seconds": round(time.perf_counter() - t0, 1)}


# -- judging -----------------------------------------------------------------------------------


def judge(history: list[list[list[float]]], blocks: list[list[float]], pct: float) -> Judgement:
    """The gate's rule (pytest_sme2.gate.levels.judge_levels) on sessions of blocks of samples and
    this session's blocks: a block's value is its median, as the plugin judges it."""
    return judge_levels([[float(np.median(b)) for b in s] for s in history],
                        [float(np.median(b)) for b in blocks], pct)


def gate_offline(history: list[list[list[float]]], blocks: list[list[float]],
                 pct: float) -> Judgement:
    """The plugin's rule with this code: the first block, and when it is suspected, every
    block the session measured (its confirmation blocks)."""
    j = judge(history, blocks[:1], pct)
    return judge(history, blocks, pct) if j.regressed and len(blocks) > 1 else j


def pb_rule(base: list[float], cur: list[float], pct: float) -> bool:
    """pytest-benchmark's compare-fail=median:PCT: the median of the current run's rounds
    above the saved run's median by more than PCT."""
    return float(np.median(cur)) > float(np.median(base)) * (1 + pct / 100)


def _floor(pct: float | None) -> str:
    return "-" if pct is None else (f"{pct:.1f}" if pct < 1000 else ">999")


def _row(name: str, j: dict | Judgement | None, pb: bool, extra: str = "") -> str:
    d = j.to_dict() if isinstance(j, Judgement) else (j or {})
    r = d.get("ratio")
    ci = f"{r['point']:6.3f} [{r['low']:5.3f}, {r['high']:5.3f}]" if r else "-"
    return (f"{name:34s} {d.get('baseline_median') or 0:8.3f} {d.get('current_median') or 0:8.3f}"
            f" {ci:24s} {_floor(d.get('noise_floor_pct')):>6s} {d.get('status', '-'):12s} "
            f"{'FAIL' if pb else 'pass':5s}{extra}")


HEADER = (f"{'benchmark':34s} {'base ms':>8s} {'cur ms':>8s} {'ratio [95% CI]':24s} "
          f"{'floor%':>6s} {'gate':12s} pytest-benchmark median rule")


def _status(j: dict | Judgement | None) -> str | None:
    return (j.to_dict() if isinstance(j, Judgement) else (j or {})).get("status")


def analyze(raw: dict) -> dict[str, list[tuple]]:
    """Print the run's tables; return its judgements for a summary over runs:
    ``aa``: (threads, gate, gate 1-session, pytest-benchmark) per quiet judgement;
    ``loaded``: (threads, true slowdown, gate, gate 1-session, pytest-benchmark)."""
    pct = raw["threshold"]
    tally: dict[str, list[tuple]] = {"aa": [], "loaded": []}
    base = raw["baseline"]
    names = sorted(base[-1]["benchmarks"])
    history = {n: [s["benchmarks"][n]["blocks"] for s in base if n in s["benchmarks"]]
               for n in names}
    newest = {n: history[n][-1][0] for n in names}  # pytest-benchmark keeps one saved run
    nb, reps = len(base), len(raw["quiet"])
    print(f"\n== {len(names)} benchmarks; {nb} baseline session(s); {reps} quiet and {reps} "
          f"loaded sessions ({raw['per_core']} {raw['load']} process(es) per CPU); threshold "
          f"{pct:g}%; measured in {raw.get('seconds', '?')} s")
    print("sessions: " + ", ".join(f"{s['tag']} exit {s['exit']} ({s['seconds']:.0f} s, load "
                                   f"{s['load_before']})" for s in base + raw["quiet"] +
                                   raw["loaded"]))

    # (i) A/A
    print(f"\n== (i) A/A: the same code, {reps} quiet sessions; every regression is a false alarm")
    print(HEADER)
    plugin_fa = gate_fa = one_fa = pb_fa = 0
    for s in raw["quiet"]:
        for n in names:
            b = s["benchmarks"][n]
            j = gate_offline(history[n], b["blocks"], pct)
            j1 = gate_offline(history[n][:1], b["blocks"], pct)
            pb = pb_rule(newest[n], b["blocks"][0], pct)
            plugin_fa += _status(b["gate"]) == REGRESSION
            gate_fa += j.status == REGRESSION
            one_fa += j1.status == REGRESSION
            pb_fa += pb
            tally["aa"].append((_threads(n), j.regressed, j1.regressed, pb))
            print(_row(f"{s['tag']} {n}", j, pb))
    total = reps * len(names)
    flagged = [f"{s['tag']} {n}" for s in raw["quiet"] for n in names
               if gate_offline(history[n], s["benchmarks"][n]["blocks"], pct).regressed]
    suspected = [f"{s['tag']} {n} ({len(s['benchmarks'][n]['blocks'])} blocks)"
                 for s in raw["quiet"] for n in names
                 if judge(history[n], s["benchmarks"][n]["blocks"][:1], pct).regressed]
    print(f"\nA/A false alarms at {pct:g}% ({total} judgements; gate's: "
          f"{', '.join(flagged) or 'none'}):")
    print(f"  plugin gate, {nb}-session baseline           : {plugin_fa}/{total}; exit statuses "
          f"{[s['exit'] for s in raw['quiet']]}")
    print(f"  gate (this code), {nb}-session baseline      : {gate_fa}/{total}")
    print(f"    suspected on the first block alone      : {len(suspected)}/{total}: "
          f"{', '.join(suspected) or 'none'}")
    print(f"  gate, 1-session baseline                  : {one_fa}/{total}")
    print(f"  pytest-benchmark median:{pct:g} (newest saved) : {pb_fa}/{total}")

    # (ii) real slowdown
    print("\n== (ii) loaded sessions; true slowdown = loaded / quiet median of the same round")
    print(HEADER + "   true slowdown [paired 95% CI]")
    rows = []
    for n in names:
        q = [float(np.median(s["benchmarks"][n]["blocks"][0])) for s in raw["quiet"]]
        ld = [float(np.median(s["benchmarks"][n]["blocks"][0])) for s in raw["loaded"]]
        p = paired_ratio(q, ld)  # quiet / loaded as a "speed-up": invert for the slowdown
        true = Interval(1 / p.point, 1 / p.high, 1 / p.low) if reps > 1 else \
            Interval(ld[0] / q[0], 0.0, float("inf"))
        for s in raw["loaded"]:
            b = s["benchmarks"][n]
            j = gate_offline(history[n], b["blocks"], pct)
            j1 = gate_offline(history[n][:1], b["blocks"], pct)
            pb = pb_rule(newest[n], b["blocks"][0], pct)
            rows.append((n, true, _status(b["gate"]) == REGRESSION, j.status == REGRESSION,
                         j1.status == REGRESSION, pb))
            tally["loaded"].append((_threads(n), true.point, j.regressed, j1.regressed, pb))
            print(_row(f"{s['tag']} {n}", j, pb,
                       f"   {true.point:5.2f}x [{true.low:.2f}, {true.high:.2f}]"))

    def share(rs, i) -> str:
        return f"{sum(r[i] for r in rs)}/{len(rs)}"

    bands = [(f">= {AFFECTED:.2f}x (affected: must be flagged)", lambda x: x >= AFFECTED),
             (f"{1 + pct / 100:.2f}-{AFFECTED:.2f}x (real, above the threshold)",
              lambda x: 1 + pct / 100 <= x < AFFECTED),
             (f"< {1 + pct / 100:.2f}x (a flag is a false alarm)", lambda x: x < 1 + pct / 100)]
    print(f"\n{'true slowdown (per benchmark, over rounds)':46s} {'judged':>6s}  "
          f"{'plugin (run)':>12s}  {f'gate {nb}-session':>14s}  {'gate 1-session':>14s}  "
          f"{'pytest-benchmark':>16s}")
    for label, test in bands:
        for threads in [None] + sorted({r[0].rsplit("-t", 1)[1] for r in rows}):
            rs = [r for r in rows if test(r[1].point) and
                  (threads is None or r[0].endswith(f"-t{threads}"))]
            names_in = sorted({r[0] for r in rs})
            what = label if threads is None else f"  of which {threads} thread(s)"
            print(f"{what:46s} {len(rs):6d}  {share(rs, 2):>12s}  {share(rs, 3):>14s}  "
                  f"{share(rs, 4):>14s}  {share(rs, 5):>16s}   "
                  f"{', '.join(names_in) if threads is None else ''}")
    print(f"loaded sessions' exit statuses: {[s['exit'] for s in raw['loaded']]}")
    injected(raw, names, history, newest, pct)
    return tally


def _threads(name: str) -> int:
    return int(name.rsplit("-t", 1)[1])


def summary(tallies: list[dict[str, list[tuple]]], pct: float) -> None:
    """Every run's judgements together, by thread count."""
    print(f"\n== {len(tallies)} run(s) together: judgements called a regression (gate with "
          "the 3-session baseline / with the first session only / pytest-benchmark's rule)")
    print(f"{'what':44s} {'threads':>7s} {'judged':>6s} {'gate':>6s} {'gate-1':>6s} "
          f"{'p-b':>6s}")
    aa = [row for t in tallies for row in t["aa"]]
    loaded = [row for t in tallies for row in t["loaded"]]
    groups = [("A/A, same code (a flag is a false alarm)", aa, lambda r: True)]
    groups += [(f"loaded, true slowdown >= {AFFECTED:.2f}x (must flag)", loaded,
                lambda r: r[1] >= AFFECTED),
               (f"loaded, {1 + pct / 100:.2f}-{AFFECTED:.2f}x (may flag)", loaded,
                lambda r: 1 + pct / 100 <= r[1] < AFFECTED),
               (f"loaded, < {1 + pct / 100:.2f}x (a flag is a false alarm)", loaded,
                lambda r: r[1] < 1 + pct / 100)]
    for label, rows, keep in groups:
        for threads in sorted({r[0] for r in rows}):
            rs = [r for r in rows if r[0] == threads and keep(r)]
            cols = (2, 3, 4) if rows is loaded else (1, 2, 3)
            print(f"{label:44s} {threads:7d} {len(rs):6d} " +
                  " ".join(f"{sum(r[i] for r in rs):6d}" for i in cols))


def injected(raw: dict, names: list[str], history: dict, newest: dict, pct: float,
             factors=(1.25, 1.5, 2.0)) -> None:
    """Sensitivity on this machine's real noise: every quiet session with its samples
    multiplied by a known factor (a slowdown known exactly, unlike a loaded session's)."""
    nb = len(raw["baseline"])
    print("\n== (iii) known slowdowns injected into the quiet sessions (share flagged)")
    print(f"factor  threads  {f'gate {nb}-session':>14s}  {'gate 1-session':>14s}  "
          f"{'pytest-benchmark':>16s}")
    for f in factors:
        for t in sorted({n.rsplit("-t", 1)[1] for n in names}):
            g = g1 = pb = n_j = 0
            for s in raw["quiet"]:
                for n in (n for n in names if n.endswith(f"-t{t}")):
                    cur = [[v * f for v in blk] for blk in s["benchmarks"][n]["blocks"]]
                    g += gate_offline(history[n], cur, pct).status == REGRESSION
                    g1 += gate_offline(history[n][:1], cur, pct).status == REGRESSION
                    pb += pb_rule(newest[n], cur[0], pct)
                    n_j += 1
            print(f"{f:6.2f}  {t:>7s}  {f'{g}/{n_j}':>14s}  {f'{g1}/{n_j}':>14s}  "
                  f"{f'{pb}/{n_j}':>16s}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path("sme2-gate-eval"))
    p.add_argument("--baseline-sessions", type=int, default=3)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD_PCT)
    p.add_argument("--load", choices=sorted(_LOAD_CODE), default="stream")
    p.add_argument("--per-core", type=int, default=2,
                   help="competing processes pinned to each CPU (default 2)")
    p.add_argument("--reanalyze", type=Path, nargs="+",
                   help="judge raw.json files again without measuring (several: also a "
                        "summary over them)")
    p.add_argument("pytest_args", nargs="*",
                   help="more pytest options after --, e.g. -- --sme2-dtypes fp32")
    args = p.parse_args(argv)
    raws = []
    if args.reanalyze:
        for path in args.reanalyze:
            raw = json.loads(path.read_text())
            for s in raw["baseline"] + raw["quiet"] + raw["loaded"]:  # the first version's files
                for b in s["benchmarks"].values():
                    if "e2e_ms" in b:
                        b["blocks"] = [b.pop("e2e_ms")]
            raws.append(raw)
    else:
        args.out = args.out.resolve()
        raws.append(measure(args))
        (args.out / "raw.json").write_text(json.dumps(raws[0]) + "\n")
    tallies = []
    for path, raw in zip(args.reanalyze or [args.out / "raw.json"], raws):
        print(f"\n######## {path}")
        tallies.append(analyze(raw))
    if len(tallies) > 1:
        summary(tallies, raws[0]["threshold"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
