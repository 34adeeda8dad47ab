"""Measure the regression gate on this machine with the real runtime (not a unit test: it takes
10-15 minutes on 2 cores and prints figures).

    python benchmarks/scripts/gate_eval.py [--blocks 3] [--reps 3] [--threshold 10]
    python benchmarks/scripts/gate_eval.py --reanalyze sme2-gate-eval/raw.json

Phases (models toy_cnn, mobilenet_v3_small, vit_tiny in fp32 at 1 and 2 threads; a *block* is one
runner process, a *session* is ``--blocks`` blocks of every benchmark, taken round-robin):

1. baseline: one session, saved with :func:`pytest_sme2.baselines.save` and loaded back;
2. A/A: ``--reps`` more sessions of the same code -> every regression call is a false alarm;
3. slowdown: ``--load-blocks`` rounds where each benchmark runs once quiet and once while every
   core is kept busy by competing busy-loop processes (ABBA order). The quiet/loaded blocks,
   taken in the same minutes, measure the true slowdown (ratio of their medians); the loaded
   blocks form the candidate session. (Loaded runs take ~3x longer: the child's imports
   compete too; 2 rounds keep the whole script under 15 minutes on 2 cores.)

4. (analysis only) the A/A sessions with their samples multiplied by 1.25, 1.5 and 2: known
   slowdowns on this machine's real noise.

Each candidate is judged by the gate (:func:`pytest_sme2.baselines.judge`) and by
pytest-benchmark's ``--benchmark-compare-fail=median:PCT`` rule (current median over all runs
vs baseline median over all runs). Raw samples go to ``OUT/raw.json`` so that ``--reanalyze``
can judge them again without measuring.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pytest_sme2.baselines import (DEFAULT_THRESHOLD_PCT, Baseline, BaselineKey, Judgement,
                                   Session, judge, load, save)
from pytest_sme2.stats import Interval, paired_ratio

MODELS = ("toy_cnn", "mobilenet_v3_small", "vit_tiny")
THREADS = (1, 2)
AFFECTED = 1.25          # a true slowdown at least this large must be flagged
BUSY_LIMIT_S = 120       # a competing process never outlives this, whatever happens here


@dataclass(frozen=True)
class Bench:
    model: str
    threads: int
    dtype: str = "fp32"

    @property
    def name(self) -> str:
        return f"{self.model}-{self.dtype}-t{self.threads}"


# -- measuring ---------------------------------------------------------------------------------


class Busy:
    """``n`` busy-loop processes, started and stopped by us (by pid), each bounded in time."""

    def __init__(self, n: int):
        self.n = n
        self.procs: list[subprocess.Popen] = []

    def __enter__(self) -> "Busy":
        code = f"import time\nend = time.monotonic() + {BUSY_LIMIT_S}\n" \
               "while time.monotonic() < end:\n    pass\n"
        self.procs = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(self.n)]
        time.sleep(0.3)  # let them start spinning
        return self

    def __exit__(self, *exc) -> None:
        for p in self.procs:
            p.kill()
        for p in self.procs:
            p.wait()


def _load() -> str:
    """1-minute load average: other processes on the machine are part of the result."""
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:
        return "?"


def measure(args: argparse.Namespace) -> dict:
    from pytest_sme2.bench import BenchmarkRun, BenchSettings, run_benchmark
    from pytest_sme2.devices import open_device
    from pytest_sme2.export import export_model
    from pytest_sme2.runners import runner_from_spec

    benches = [Bench(m, t) for m in args.models for t in args.threads]
    runner, device = runner_from_spec("python"), open_device("host")
    settings = BenchSettings(runs=args.runs, warmup=args.warmup,
                             report_dir=args.out)
    for m in args.models:  # exports (cached) before any clock starts
        export_model(m, "fp32")
    first: dict[str, dict] = {}

    def run(b: Bench, label: str) -> list[float]:
        r = run_benchmark(BenchmarkRun(b.model, b.dtype, b.threads, label=label), runner,
                          device, settings)
        first.setdefault(b.name, r.to_json())
        return r.e2e_ms

    def session(tag: str) -> dict[str, list[list[float]]]:
        t0 = time.perf_counter()
        out: dict[str, list[list[float]]] = {b.name: [] for b in benches}
        for i in range(args.blocks):
            for b in benches:
                out[b.name].append(run(b, f"{tag}-{b.name}-{i}"))
        print(f"  {tag}: {time.perf_counter() - t0:.0f} s, load average {_load()}", flush=True)
        return out

    t_start = time.perf_counter()
    print(f"measuring {len(benches)} benchmarks x {args.blocks} blocks, {args.runs} runs each",
          flush=True)
    base = session("baseline")
    reps = [session(f"aa{k + 1}") for k in range(args.reps)]
    quiet: dict[str, list[list[float]]] = {b.name: [] for b in benches}
    loaded: dict[str, list[list[float]]] = {b.name: [] for b in benches}
    t0 = time.perf_counter()
    for i in range(args.load_blocks):
        for b in benches:
            order = ("quiet", "loaded") if i % 2 == 0 else ("loaded", "quiet")
            for what in order:
                if what == "quiet":
                    quiet[b.name].append(run(b, f"quiet-{b.name}-{i}"))
                else:
                    with Busy(args.busy):
                        loaded[b.name].append(run(b, f"loaded-{b.name}-{i}"))
    print(f"  slowdown (quiet + loaded, {args.busy} busy processes): "
          f"{time.perf_counter() - t0:.0f} s, load average {_load()}", flush=True)
    return {"benches": [b.name for b in benches], "blocks": args.blocks,
            "load_blocks": args.load_blocks, "runs": args.runs,
            "warmup": args.warmup, "busy": args.busy, "baseline": base, "aa": reps,
            "quiet": quiet, "loaded": loaded, "first_result": first,
            "seconds": round(time.perf_counter() - t_start, 1)}


# -- judging -----------------------------------------------------------------------------------


def _baseline(sessions: list[list[list[float]]]) -> Baseline:
    key = BaselineKey("host", "cpu", "x86_64", False, "0-1", "m", "fp32", 1, "python", {}, "k")
    return Baseline(key, [Session(timestamp=f"t{i}", blocks=s) for i, s in enumerate(sessions)])


def pb_rule(base_blocks: list[list[float]], cur_blocks: list[list[float]], pct: float) -> bool:
    """pytest-benchmark's compare-fail=median:PCT: the median of the current run's rounds above
    the saved run's median by more than PCT."""
    base = float(np.median(np.concatenate(base_blocks)))
    cur = float(np.median(np.concatenate(cur_blocks)))
    return cur > base * (1 + pct / 100)


def _row(name: str, j: Judgement, pb: bool, extra: str = "") -> str:
    r = j.ratio
    ci = f"{r.point:6.3f} [{r.low:5.3f}, {r.high:5.3f}]" if r else "-"
    return (f"{name:28s} {j.baseline_median or 0:8.3f} {j.current_median or 0:8.3f} {ci:24s} "
            f"{_floor(j.noise_floor_pct):>6s} {j.status:12s} {'FAIL' if pb else 'pass':5s}{extra}")


def _floor(pct: float | None) -> str:
    return "-" if pct is None else (f"{pct:.1f}" if pct < 1000 else ">999")


HEADER = (f"{'benchmark':28s} {'base ms':>8s} {'cur ms':>8s} {'ratio [95% CI]':24s} "
          f"{'floor%':>6s} {'gate':12s} {'pytest-benchmark median rule'}")


def analyze(raw: dict, pct: float) -> None:
    names = raw["benches"]
    base = {n: raw["baseline"][n] for n in names}
    print(f"\n== settings: {len(names)} benchmarks, {raw['blocks']} blocks/session, "
          f"{raw['runs']} runs/block, threshold {pct:g}%, measured in {raw.get('seconds', '?')} s")

    # (i) A/A
    print(f"\n== (i) A/A: baseline = 1 session; {len(raw['aa'])} repetitions of the same code")
    print(HEADER)
    gate_fa = gate_imp = pb_fa = 0
    single = single_fa = single_pb = 0
    roll_fa = roll_n = 0
    for k, rep in enumerate(raw["aa"]):
        for n in names:
            j = judge(_baseline([base[n]]), rep[n], pct)
            pb = pb_rule(base[n], rep[n], pct)
            gate_fa += j.status == "regression"
            gate_imp += j.status == "improvement"
            pb_fa += pb
            print(_row(f"aa{k + 1} {n}", j, pb))
            for blk in rep[n]:  # what one block per test (the plugin's default) would see
                js = judge(_baseline([base[n]]), [blk], pct)
                single += 1
                single_fa += js.status == "regression"
                single_pb += pb_rule(base[n], [blk], pct)
            history = [base[n]] + [raw["aa"][i][n] for i in range(k)]
            jr = judge(_baseline(history), rep[n], pct)
            roll_n += 1
            roll_fa += jr.status == "regression"
    n_aa = len(raw["aa"]) * len(names)
    print(f"\nA/A false alarms at {pct:g}%:")
    print(f"  gate, {raw['blocks']}-block sessions vs 1-session baseline : {gate_fa}/{n_aa} "
          f"regressions ({gate_imp} 'improvement' calls)")
    print(f"  gate, 1 block vs 1-session baseline             : {single_fa}/{single}")
    print(f"  gate, rolling baseline (1..{len(raw['aa'])} sessions)         : {roll_fa}/{roll_n}")
    print(f"  pytest-benchmark median:{pct:g}, sessions              : {pb_fa}/{n_aa}")
    print(f"  pytest-benchmark median:{pct:g}, single blocks         : {single_pb}/{single}")

    # (ii) real slowdown
    history = {n: [base[n]] + [rep[n] for rep in raw["aa"]] for n in names}
    print(f"\n== (ii) slowdown: every core busy ({raw['busy']} busy-loop processes); "
          "true slowdown from paired quiet/loaded blocks")
    print(HEADER + "   true slowdown [paired 95% CI]")
    rows = []
    for n in names:
        q = [float(np.median(b)) for b in raw["quiet"][n]]
        ld = [float(np.median(b)) for b in raw["loaded"][n]]
        paired = paired_ratio(ld, q)  # loaded time / quiet time, pair by pair
        true = Interval(float(np.median(ld) / np.median(q)), paired.low, paired.high)
        j1 = judge(_baseline([base[n]]), raw["loaded"][n], pct)
        jh = judge(_baseline(history[n]), raw["loaded"][n], pct)
        pb = pb_rule(base[n], raw["loaded"][n], pct)
        rows.append((n, true, j1, jh, pb))
        print(_row(n, j1, pb, f"   {true.point:5.2f}x [{true.low:.2f}, {true.high:.2f}]"))
    def share(rs, idx) -> str:
        hit = sum((r[idx].status == "regression") if idx in (2, 3) else r[idx] for r in rs)
        return f"{hit}/{len(rs)}"

    nb = 1 + len(raw["aa"])
    bands = [(f">= {AFFECTED:.2f}x (must be flagged)", lambda x: x >= AFFECTED),
             (f"{1 + pct / 100:.2f}-{AFFECTED:.2f}x (real, above the threshold: may be flagged)",
              lambda x: 1 + pct / 100 <= x < AFFECTED),
             (f"< {1 + pct / 100:.2f}x (a flag is a false alarm)", lambda x: x < 1 + pct / 100)]
    print(f"\n{'true slowdown':58s} {'n':>2s}  {'gate 1-session':>14s}  "
          f"{f'gate {nb}-session':>14s}  {'pytest-benchmark':>16s}")
    for label, test in bands:
        rs = [r for r in rows if test(r[1].point)]
        print(f"{label:58s} {len(rs):2d}  {share(rs, 2):>14s}  {share(rs, 3):>14s}  "
              f"{share(rs, 4):>16s}   {', '.join(r[0] for r in rs)}")
    print(f"\n{1 + len(raw['aa'])}-session baseline judgements of the loaded session:")
    print(HEADER)
    for n, _, _, jh, pb in rows:
        print(_row(n, jh, pb))
    injected(raw, pct)


def injected(raw: dict, pct: float, factors=(1.25, 1.5, 2.0)) -> None:
    """Sensitivity on this machine's real noise: every A/A candidate session with its samples
    multiplied by a known factor (a slowdown that is exactly known, unlike a loaded run's)."""
    names = raw["benches"]
    print(f"\n== (iii) injected slowdowns on the real A/A sessions ({len(raw['aa'])} x "
          f"{len(names)} judgements per factor; 1-session baseline / rolling baseline)")
    groups = sorted({n.rsplit("-t", 1)[1] for n in names})
    print("factor  threads  gate 1-session  gate rolling  gate 1 block  pytest-benchmark")
    for f in factors:
        for t in groups:
            g1 = gr = gs = pb = n_s = n_b = 0
            for k, rep in enumerate(raw["aa"]):
                for n in (n for n in names if n.endswith(f"-t{t}")):
                    cur = [[v * f for v in b] for b in rep[n]]
                    one = _baseline([raw["baseline"][n]])
                    history = [raw["baseline"][n]] + [raw["aa"][i][n] for i in range(k)]
                    g1 += judge(one, cur, pct).status == "regression"
                    gr += judge(_baseline(history), cur, pct).status == "regression"
                    pb += pb_rule(raw["baseline"][n], cur, pct)
                    n_s += 1
                    for blk in cur:
                        gs += judge(one, [blk], pct).status == "regression"
                        n_b += 1
            print(f"{f:6.2f}  {t:>7s}  {f'{g1}/{n_s}':>14s}  {f'{gr}/{n_s}':>12s}  "
                  f"{f'{gs}/{n_b}':>12s}  {f'{pb}/{n_s}':>16s}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path("sme2-gate-eval"))
    p.add_argument("--blocks", type=int, default=3)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--load-blocks", type=int, default=2)
    p.add_argument("--runs", type=int, default=50)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--busy", type=int, default=2 * (os.cpu_count() or 1),
                   help="competing busy-loop processes (default: two per core)")
    p.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD_PCT)
    p.add_argument("--models", nargs="+", default=list(MODELS))
    p.add_argument("--threads", nargs="+", type=int, default=list(THREADS))
    p.add_argument("--reanalyze", type=Path, help="judge a raw.json again without measuring")
    args = p.parse_args(argv)
    if args.reanalyze:
        raw = json.loads(args.reanalyze.read_text())
    else:
        args.out.mkdir(parents=True, exist_ok=True)
        raw = measure(args)
        (args.out / "raw.json").write_text(json.dumps(raw) + "\n")
        _save_demo(raw, args.out / "baselines")
    analyze(raw, args.threshold)
    return 0


def _save_demo(raw: dict, folder: Path) -> None:
    """Store the baseline session the plugin's way and read it back: the file format in use."""
    from pytest_sme2.results import BenchmarkResult

    for name, doc in raw["first_result"].items():
        template = BenchmarkResult.from_json(doc)
        blocks = raw["baseline"][name]
        results = [BenchmarkResult.from_json({**doc, "e2e_ms": b}) for b in blocks]
        path = save(results, folder, session_id="gate-eval-baseline")
        loaded = load(path)
        assert loaded.sessions[-1].blocks == [[float(v) for v in b] for b in blocks], path
        assert loaded.key == BaselineKey.from_result(template)
    print(f"baseline files: {folder}")


if __name__ == "__main__":
    sys.exit(main())
