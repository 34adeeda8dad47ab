"""Measure the instruction-count gate against the time gate on this machine (not a unit test:
~25 minutes on 2 cores; prints figures; raw numbers in OUT/raw.json).

    python evaluations/instruction_gate_evaluation.py [--out DIR] [--models ...] [--dtypes ...]
    python evaluations/instruction_gate_evaluation.py --reanalyze OUT/raw.json

Instructions per ``Method::execute`` come from ``pytest_sme2.instructions.count`` (the native
runner under callgrind, slope between two processes, the thread pool's own code left out);
time is the native runner's ETDump ``Method::execute`` median over 30 runs after 3 warm-ups, one
runner process per block, as ``pytest benchmarks`` measures it. Both are judged by the gate's
rule (``judge_levels``: block values, noise floor from the baseline's sessions, lower bound of
the bootstrap interval above ``1 + max(threshold, floor)``) at thresholds of 1%, 2% and 10%.

1. **Method.** toy_cnn and mobilenet_v3_small fp32, 1 and 2 threads: the chosen count against
   the alternatives (the whole process's slope; the calling thread's ``Method::execute`` alone).
2. **A/A.** Every model x dtype x thread count (default toy_cnn, mobilenet_v3_small, vit_tiny x
   fp32, int8 x 1, 2): 3 baseline sessions, then 3 repetitions of the same code, each a fresh
   pair of processes, interleaved over the cases so sessions are minutes apart. Spread between
   sessions; any regression called is a false alarm. toy_cnn's time is measured alongside (one
   block per session) for the time gate's A/A.
3. **Real changes** on the same device: toy_cnn registered again under its own name (the
   registry's ``register_model``), ~4%, ~21% and ~49% more expensive (extra 1x1, 5x5-depthwise
   and 3x3 convolutions after the residual block, chosen by their instruction counts), and a
   copy of the model file with one comment added (the graph does not change: is the export the
   same?). Instructions: one session; time: a block, and, where the first block is judged a
   regression, two confirmation blocks judged with it (as ``--sme2-confirm-blocks 2``).
4. **Cost**: wall time of one count (two valgrind processes in parallel) per benchmark, next to
   one timed block.
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import pytest_sme2_models as _models
from _common import deeper_toy_source, toy_source
from pytest_sme2.api import REGRESSION, judge_levels

from pytest_sme2.instructions import count as ins
from pytest_sme2.instructions.callgrind import Costs, read_profiles

THRESHOLDS = (1.0, 2.0, 10.0)
TOY = "toy_cnn"
TOY_TARGET = f"{_models.__name__}.toy_cnn:build"
# (name, extra convolutions after the residual block: (kernel, depthwise)); the instruction
# ratios were measured when the script was written: +4.0%, +21%, +49%.
VARIANTS = [
    ("comment only", None),
    ("+1x1 conv (aim ~5%)", ((1, False),)),
    ("+5x5 dw + 1x1 conv (aim ~20%)", ((5, True), (1, False))),
    ("+3x3 + 2x 1x1 conv (aim ~50%)", ((3, False), (1, False), (1, False))),
]


def say(msg: str) -> None:
    print(msg, flush=True)


def _loadavg() -> str:
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:
        return "?"


# -- measuring ---------------------------------------------------------------------------------


class Bench:
    """Exports, the native runner, and the two measures of one (model, dtype, threads)."""

    def __init__(self, out: Path):
        from pytest_sme2.api import HostDevice, native_runner

        self.out = out
        self.runner = native_runner(progress=say)
        self.device = HostDevice()
        self.variant_cache = out / "exports"

    def export(self, model: str, dtype: str, variant_cache: bool = False):
        from pytest_sme2.api import export_model

        return export_model(model, dtype, self.variant_cache if variant_cache else None)

    def count(self, exported, threads: int) -> dict:
        c = ins.count_instructions(exported.pte, threads=threads, inputs=exported.inputs,
                                   runner=self.runner)
        return {"per_execute": c.per_execute, "wall_s": c.wall_s,
                "excluded": sum(c.excluded.values()), "hottest": c.hottest[:3]}

    def time_block(self, exported, threads: int, tag: str) -> dict:
        """One runner process: 3 warm-up + 30 timed runs; the block's median ms."""
        from pytest_sme2.api import e2e_per_run, read_etdump, RunRequest

        request = RunRequest(pte=exported.pte, etdump=self.out / "etdumps" / f"{tag}.etdump",
                             threads=threads, runs=30, warmup=3, inputs=exported.inputs)
        t0 = time.perf_counter()
        self.device.run(self.runner, request)
        runs = e2e_per_run(read_etdump(request.etdump)).to_numpy()[3:]
        return {"median_ms": float(np.median(runs)), "wall_s": time.perf_counter() - t0}


def method_check(bench: Bench, models: list[str]) -> list[dict]:
    """The chosen count against two alternatives, on the same two processes' worth of runs:
    'whole' = the whole process's instructions (every thread, no toggle), slope of 2 -> 4;
    'caller' = the calling thread's Method::execute alone (no worker threads), slope 2 -> 4."""
    valgrind, _ = ins.find_valgrind()
    symbol = ins.execute_symbol(bench.runner.binary, bench.runner.libs)
    rows = []
    for model in models:
        exported = bench.export(model, "fp32")
        for threads in (1, 2):
            row = {"case": f"{model}-fp32-t{threads}"}
            for label, extra in (("whole", ["--collect-atstart=yes"]),
                                 ("caller", ["--collect-atstart=no",
                                             f"--toggle-collect={symbol}"])):
                values = []
                for rep in range(2):
                    totals = []
                    for n in (2, 4):
                        folder = bench.out / "method" / f"{row['case']}-{label}-{rep}-n{n}"
                        folder.mkdir(parents=True, exist_ok=True)
                        from pytest_sme2.api import RunRequest

                        request = RunRequest(pte=exported.pte, etdump=folder / "run.etdump",
                                             threads=threads, runs=n, warmup=0,
                                             inputs=exported.inputs)
                        argv = [valgrind, "--tool=callgrind", "--cache-sim=no",
                                "--branch-sim=no", "--separate-threads=yes", *extra,
                                f"--callgrind-out-file={folder / 'callgrind.out'}",
                                f"--log-file={folder / 'valgrind.log'}",
                                *bench.runner.command(request)]
                        proc = ins._Process(n, folder)
                        ins._run_all([proc], [argv], 1800, "native", exported.pte)
                        profiles = read_profiles(folder.glob("callgrind.out*"))
                        if label == "caller":
                            profiles = [p for p in profiles if p.thread == 1]
                        totals.append(Costs.of(profiles).total)
                    values.append((totals[1] - totals[0]) / 2)
                row[label] = values
            row["chosen"] = [bench.count(exported, threads)["per_execute"] for _ in range(2)]
            say(f"  {row['case']:28s} chosen {_pair(row['chosen'])}  whole process "
                f"{_pair(row['whole'])}  calling thread only {_pair(row['caller'])}")
            rows.append(row)
    return rows


def _pair(v: list[float]) -> str:
    return f"{v[0]:,.0f} / {v[1]:,.0f} ({abs(v[1] - v[0]) / min(v):.1e} apart)"


def measure(args: argparse.Namespace) -> dict:
    args.out.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    bench = Bench(args.out)
    raw: dict = {"thresholds": list(THRESHOLDS), "valgrind": ins.find_valgrind()[1],
                 "load_before": _loadavg()}
    if not args.skip_method:
        say("1. method: chosen count vs whole-process slope vs calling thread only")
        raw["method"] = method_check(bench, [m for m in ("toy_cnn", "mobilenet_v3_small")
                                             if m in args.models])
    cases = [(m, d, t) for m in args.models for d in args.dtypes for t in args.threads]
    exports = {(m, d): bench.export(m, d) for m in args.models for d in args.dtypes}
    toy = bench.export(TOY, "fp32", variant_cache=True)
    sessions = args.baseline_sessions + args.reps
    say(f"2. A/A: {len(cases)} case(s) x {sessions} session(s) ({args.baseline_sessions} "
        f"baseline + {args.reps} repetitions), interleaved")
    aa = {f"{m}-{d}-t{t}": {"counts": [], "wall_s": []} for m, d, t in cases}
    toy_time = {t: [] for t in args.threads}
    for s in range(sessions):
        for m, d, t in cases:
            c = bench.count(exports[(m, d)], t)
            aa[f"{m}-{d}-t{t}"]["counts"].append(c["per_execute"])
            aa[f"{m}-{d}-t{t}"]["wall_s"].append(c["wall_s"])
        for t in args.threads:
            toy_time[t].append(bench.time_block(toy, t, f"aa-toy-t{t}-s{s}"))
        say(f"  session {s + 1}/{sessions} done ({time.perf_counter() - t_start:.0f} s, load "
            f"average {_loadavg()})")
    raw["aa"], raw["toy_time_aa"] = aa, {str(t): v for t, v in toy_time.items()}
    say("3. real changes to toy_cnn, registered under its own name")
    raw["changes"] = real_changes(bench, args, toy)
    raw["seconds"] = round(time.perf_counter() - t_start, 1)
    raw["load_after"] = _loadavg()
    return raw


def _variant_module(folder: Path, name: str, comment_only: bool) -> object:
    """A copy of the model file (with one comment, or with the deeper variant appended),
    imported as its own module: the export cache keys the model by its builder's source file."""
    if comment_only:
        lines = toy_source().splitlines(keepends=True)
        at = next(i for i, ln in enumerate(lines) if ln.startswith("class "))
        lines.insert(at, "# A comment: the graph does not change.\n")
        text = "".join(lines)
    else:
        text = deeper_toy_source()
    (folder / f"{name}.py").write_text(text)
    sys.path.insert(0, str(folder))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(folder))


def real_changes(bench: Bench, args: argparse.Namespace, toy) -> list[dict]:
    folder = Path(tempfile.mkdtemp(prefix="toy-variants-", dir=args.out))
    base_pte = toy.pte.read_bytes()
    rows = []
    try:
        for i, (label, extra) in enumerate(VARIANTS):
            module = _variant_module(folder, f"toy_variant_{i}", extra is None)
            if extra is None:
                _models.register_model(TOY, module.build)
            else:
                _models.register_model(TOY, module.build_variant, extra=extra)
            exported = bench.export(TOY, "fp32", variant_cache=True)
            row = {"variant": label, "export_key": exported.key, "base_export_key": toy.key,
                   "same_pte": exported.pte.read_bytes() == base_pte, "threads": {}}
            for t in args.threads:
                count = bench.count(exported, t)
                blocks = [bench.time_block(exported, t, f"change{i}-t{t}-b{b}")
                          for b in range(3)]  # the two confirmation blocks are used only
                row["threads"][str(t)] = {"count": count, "time_blocks": blocks}  # if needed
            say(f"  {label}: export {'identical' if row['same_pte'] else 'different'} "
                f"({exported.key[:10]} vs {toy.key[:10]})")
            rows.append(row)
    finally:
        _models.register_model(TOY, TOY_TARGET)
    return rows


# -- judging ------------------------------------------------------------------------------------


def judge_counts(base: list[float], current: float, pct: float):
    return judge_levels([[v] for v in base], [current], pct, measure="instructions")


def judge_time(base: list[float], blocks: list[float], pct: float):
    """As the plugin: the first block; when it is judged a regression, all blocks."""
    j = judge_levels([[v] for v in base], blocks[:1], pct)
    return judge_levels([[v] for v in base], blocks, pct) if j.status == REGRESSION else j


def analyze(raw: dict, nb: int) -> None:
    thresholds = raw["thresholds"]
    if raw.get("method"):
        say("\n== 1. Method (instructions per execute, two repetitions each) ==")
        say(f"{'case':28s} {'chosen':>30s} {'whole process (slope)':>34s} "
            f"{'calling thread only':>34s}")
        for row in raw["method"]:
            say(f"{row['case']:28s} {_pair(row['chosen']):>30s} {_pair(row['whole']):>34s} "
                f"{_pair(row['caller']):>34s}")

    say(f"\n== 2. A/A: same code, {nb} baseline sessions, then repetitions ==")
    say(f"{'case':28s} {'per execute':>14s} {'spread':>9s} {'floor':>9s} "
        + " ".join(f"{'FA@' + format(p, 'g') + '%':>7s}" for p in thresholds)
        + f" {'count s':>8s}")
    totals = {p: [0, 0] for p in thresholds}
    for case, d in raw["aa"].items():
        counts = d["counts"]
        base, reps = counts[:nb], counts[nb:]
        spread = (max(counts) - min(counts)) / min(counts)
        alarms = []
        floor = None
        for p in thresholds:
            js = [judge_counts(base, c, p) for c in reps]
            floor = js[0].noise_floor_pct if js else None
            n = sum(j.status == REGRESSION for j in js)
            totals[p][0] += n
            totals[p][1] += len(js)
            alarms.append(f"{n}/{len(js)}")
        say(f"{case:28s} {statistics.median(counts):14,.0f} {spread:9.1e} "
            f"{(floor or 0) / 100:9.1e} " + " ".join(f"{a:>7s}" for a in alarms)
            + f" {statistics.median(d['wall_s']):8.1f}")
    say("all cases: false alarms " + ", ".join(f"{totals[p][0]}/{totals[p][1]} at {p:g}%"
                                               for p in thresholds))
    for t, blocks in raw.get("toy_time_aa", {}).items():
        ms = [b["median_ms"] for b in blocks]
        base, reps = ms[:nb], ms[nb:]
        verdicts = [sum(judge_levels([[v] for v in base], [c], p).status == REGRESSION
                        for c in reps) for p in thresholds]
        say(f"time, toy_cnn-fp32-t{t}: block medians {', '.join(f'{v:.4f}' for v in ms)} ms; "
            f"spread {(max(ms) - min(ms)) / min(ms):.1%}; false alarms (one block, no "
            "confirmation) " + ", ".join(f"{n}/{len(reps)} at {p:g}%"
                                         for n, p in zip(verdicts, thresholds)))

    say("\n== 3. Real changes to toy_cnn (same name), judged against the A/A baseline ==")
    say(f"{'change':28s} {'t':>2s} {'export':>9s} {'instr ratio':>11s} {'time ratio':>10s}  "
        + "  ".join(f"{'instr@' + format(p, 'g') + '%':>12s}" for p in thresholds) + "  "
        + "  ".join(f"{'time@' + format(p, 'g') + '%':>12s}" for p in thresholds)
        + f" {'time floor':>10s}")
    for row in raw["changes"]:
        for t, d in row["threads"].items():
            key = f"{TOY}-fp32-t{t}"
            base_counts = raw["aa"][key]["counts"][:nb] if key in raw["aa"] else None
            base_ms = [b["median_ms"] for b in raw["toy_time_aa"][t][:nb]]
            ms = [b["median_ms"] for b in d["time_blocks"]]
            ir = (d["count"]["per_execute"] / statistics.median(base_counts)
                  if base_counts else float("nan"))
            tr = statistics.median(ms) / statistics.median(base_ms)
            iv = ["-" if not base_counts else
                  _verdict(judge_counts(base_counts, d["count"]["per_execute"], p))
                  for p in thresholds]
            tj = [judge_time(base_ms, ms, p) for p in thresholds]
            say(f"{row['variant']:28s} {t:>2s} {'same' if row['same_pte'] else 'changed':>9s} "
                f"{ir:11.4f} {tr:10.3f}  " + "  ".join(f"{v:>12s}" for v in iv) + "  "
                + "  ".join(f"{_verdict(j):>12s}" for j in tj)
                + f" {tj[0].noise_floor_pct or 0:9.1f}%")

    say("\n== 4. Cost per benchmark ==")
    for case, d in raw["aa"].items():
        say(f"{case:28s} counting {statistics.median(d['wall_s']):6.1f} s (median of "
            f"{len(d['wall_s'])})")
    for t, blocks in raw.get("toy_time_aa", {}).items():
        say(f"time block toy_cnn-fp32-t{t}: {statistics.median(b['wall_s'] for b in blocks):.2f}"
            " s per runner process (30 runs + 3 warm-up)")
    if "seconds" in raw:
        say(f"whole evaluation: {raw['seconds'] / 60:.1f} min; valgrind {raw.get('valgrind')}; "
            f"load average {raw.get('load_before')} -> {raw.get('load_after')}")


def _verdict(j) -> str:
    return {"regression": "REGRESSION", "not_compared": "n/c"}.get(j.status, j.status)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path("sme2-instruction-gate-eval"))
    p.add_argument("--models", nargs="+", default=["toy_cnn", "mobilenet_v3_small", "vit_tiny"])
    p.add_argument("--dtypes", nargs="+", default=["fp32", "int8"])
    p.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    p.add_argument("--baseline-sessions", type=int, default=3)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--skip-method", action="store_true")
    p.add_argument("--reanalyze", type=Path, help="judge OUT/raw.json again; measure nothing")
    args = p.parse_args(argv)
    if args.reanalyze:
        raw = json.loads(args.reanalyze.read_text())
        analyze(raw, raw.get("baseline_sessions", args.baseline_sessions))
        return 0
    if TOY not in args.models:
        args.models = [TOY, *args.models]          # the real changes are judged on it
    raw = measure(args)
    raw["baseline_sessions"] = args.baseline_sessions
    (args.out / "raw.json").write_text(json.dumps(raw, indent=1))
    analyze(raw, args.baseline_sessions)
    return 0


if __name__ == "__main__":
    sys.exit(main())
