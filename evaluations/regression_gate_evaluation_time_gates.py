"""The four verdicts of the two time gates on this machine (issue 37; not a unit test: tens of
minutes on 2 cores; prints one table; raw block values in OUT/raw.json, kept as it goes).

    python evaluations/regression_gate_evaluation_time_gates.py [--out DIR] [--unchanged 40]
        [--changed 20] [--threads 1,2] [--conditions clean,hog] [--max-pairs 40] [--budget 60]
    python evaluations/regression_gate_evaluation_time_gates.py --reanalyze OUT/raw.json

Both gates end in one of four verdicts by the one rule (``pytest_sme2.api.decide``):
regression, improvement, no change, cannot tell. Threshold 10%.

- **A/B** (``--sme2-gate-mode ab``): 3 ABBA pairs of base and candidate blocks, then, while the
  verdict is "cannot tell", the pairs double (``until_told``) up to ``--max-pairs`` and
  ``--budget`` seconds, as the plugin does (``judge_ab``: disturbed pairs screened out).
- **stored** (the default mode): the candidate's first block against three stored baseline
  sessions of 3 blocks (``judge_levels`` through the robust screen of one disagreeing session);
  a suspected regression is judged on 3 blocks; "cannot tell" or a regression goes on as the
  plugin does where the base program is kept: the A/B pairs of the same trial decide.

Changes: toy_cnn made ~5/10/20% more expensive by extra convolutions after its residual block
(the instruction-gate evaluation's way), and unchanged reruns (the base program itself). Each
block is one native-runner process, 30 runs after 3 warm-ups timed **without the tracer** (the
runner's own clock, as every benchmark is timed since issue 36), its median. Per thread count
and baseline condition, three baseline sessions of 3 blocks are recorded between batches of
trials; under ``hog`` the second one runs while four processes spin on the two cores copying
64 MB buffers (started and stopped here). Trials are shuffled over the changes. A trial's pairs
are measured as the A/B gate asks for them, so its cost is the gate's own.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import _common  # noqa: F401  (the repository root on sys.path)
import instruction_gate_evaluation as ige  # its Bench and variant modules
from pytest_sme2.api import (CANNOT_TELL, IMPROVEMENT, NO_CHANGE, REGRESSION, PairBudget, Pairs,
                             RunRequest, judge_ab, judge_levels, parse_summary, until_told)
from pytest_sme2.gate.robust import judge_robust
from _rules_before import judge_before, screen, t_slowdown

THRESHOLD = 10.0
BASE_BLOCKS = 3
START_PAIRS = 6        # --sme2-blocks' default
CHANGES = [("+5%", ((1, False),)),
           ("+10%", ((1, False), (1, False))),
           ("+20%", ((5, True), (1, False)))]
VERDICTS = (REGRESSION, CANNOT_TELL, NO_CHANGE, IMPROVEMENT)
SHORT = {REGRESSION: "R", CANNOT_TELL: "?", NO_CHANGE: "=", IMPROVEMENT: "I"}
say = ige.say


class Hog:
    """Processes spinning on every core, copying 64 MB buffers over and over (they contend for
    the caches and memory too: a process that only spins barely moves 30 short runs, NOTES),
    started and stopped by this script (by their pid)."""

    CODE = "b = bytearray(64 << 20)\nwhile True:\n    c = bytes(b)"

    def __init__(self, n: int = 4):
        self.procs = [subprocess.Popen([sys.executable, "-c", self.CODE]) for _ in range(n)]

    def stop(self) -> None:
        for p in self.procs:
            p.kill()
            p.wait()


def _exports(bench: ige.Bench, out: Path) -> dict:
    folder = Path(tempfile.mkdtemp(prefix="toy-variants-", dir=out))
    progs = {"unchanged": bench.export(ige.TOY, "fp32")}
    try:
        for i, (label, extra) in enumerate(CHANGES):
            module = ige._variant_module(folder, f"timegate_variant_{i}", False)
            ige._models.register_model(ige.TOY, module.build_variant, extra=extra)
            progs[label] = bench.export(ige.TOY, "fp32", variant_cache=True)
    finally:
        ige._models.register_model(ige.TOY, ige.TOY_TARGET)
    return progs


def _block(bench: ige.Bench, exported, threads: int) -> float:
    """One runner process, untraced: the median of its 30 timed executes (ms)."""
    request = RunRequest(pte=exported.pte, etdump=bench.out / "untraced.etdump",
                         threads=threads, runs=30, warmup=3, inputs=exported.inputs,
                         untraced=True)
    timed = parse_summary(bench.device.run(bench.runner, request).stdout).execute_ms[-30:]
    return float(np.median(timed))


def _ab(pairs: dict) -> object:
    return judge_ab(Pairs(tuple(pairs["base"]), tuple(pairs["cand"])), THRESHOLD)


def _trial(bench, progs, change, t, budget: PairBudget) -> dict:
    """ABBA pairs (base, candidate, candidate, base, ...), every block its own process, as
    many as the A/B gate asks for."""
    pairs: dict = {"base": [], "cand": []}

    def one_pair() -> None:
        order = ("b", "c") if len(pairs["base"]) % 2 == 0 else ("c", "b")
        for side in order:
            value = _block(bench, progs["unchanged" if side == "b" else change], t)
            pairs["base" if side == "b" else "cand"].append(value)

    t0 = time.perf_counter()
    for _ in range(START_PAIRS):
        one_pair()
    told = until_told(START_PAIRS, one_pair, lambda: _ab(pairs), budget)
    return {"change": change, **pairs, "seconds": time.perf_counter() - t0,
            "spent": told.spent, "load": ige._loadavg()}


def measure(args) -> dict:
    args.out.mkdir(parents=True, exist_ok=True)
    bench = ige.Bench(args.out)
    progs = _exports(bench, args.out)
    budget = PairBudget(args.max_pairs, args.budget)
    raw: dict = {"load_before": ige._loadavg(), "cells": [], "max_pairs": args.max_pairs,
                 "budget_s": args.budget}
    t_start = time.perf_counter()
    rng = random.Random(0)
    for t in args.threads:
        for cond in args.conditions:
            unchanged = args.unchanged_t1 if t == 1 and cond == "clean" else args.unchanged
            trials = ["unchanged"] * unchanged + [c for c, _ in CHANGES] * args.changed
            rng.shuffle(trials)
            thirds = [trials[i::3] for i in range(3)]
            cell = {"threads": t, "condition": cond, "sessions": [], "trials": []}
            for s in range(3):
                hog = Hog() if cond == "hog" and s == 1 else None
                try:
                    time.sleep(1.0 if hog else 0)    # let the hog take the cores
                    cell["sessions"].append([_block(bench, progs["unchanged"], t)
                                             for _ in range(BASE_BLOCKS)])
                finally:
                    if hog:
                        hog.stop()
                for change in thirds[s]:
                    cell["trials"].append(_trial(bench, progs, change, t, budget))
            say(f"  t{t} {cond}: {len(cell['trials'])} trials, sessions "
                + ", ".join(f"{sorted(x)[1]:.4f}" for x in cell["sessions"])
                + f" ms ({time.perf_counter() - t_start:.0f} s, load {ige._loadavg()})")
            raw["cells"].append(cell)
            (args.out / "raw.json").write_text(json.dumps(raw))    # kept if a later step fails
    raw["seconds"] = time.perf_counter() - t_start
    raw["load_after"] = ige._loadavg()
    (args.out / "raw.json").write_text(json.dumps(raw, indent=1))
    return raw


def _stored(cell: dict, trial: dict) -> tuple[str, int]:
    """The stored gate's verdict and the candidate blocks it took (pairs count twice: a
    "cannot tell" or a regression re-measures the kept base program beside the candidate)."""
    def rule(current):
        return judge_robust(judge_levels, cell["sessions"], current, THRESHOLD)

    j = rule(trial["cand"][:1])
    blocks = 1
    if j.status == REGRESSION:            # confirmation: the first block and two more
        j, blocks = rule(trial["cand"][:3]), 3
    if j.status not in (CANNOT_TELL, REGRESSION):
        return j.status, blocks
    return _ab(trial).status, blocks + 2 * len(trial["base"])


def _ab_before(trial: dict) -> tuple[str, int]:
    """The A/B rule before issue 37, on the same blocks: regression when the interval's lower
    bound passed 1 + T/2, else ok; one more pair while the median pair ratio passed that line,
    up to 10 pairs."""
    line = 1 + THRESHOLD / 200

    def called(n: int) -> tuple[bool, bool]:
        base, cand = trial["base"][:n], trial["cand"][:n]
        keep = [i for i in range(n) if i not in screen(base, cand)]
        ratios = sorted(c / b for b, c in zip(base, cand))
        return (t_slowdown([base[i] for i in keep], [cand[i] for i in keep]).low > line,
                ratios[n // 2] > line)

    n = START_PAIRS
    regressed, suspected = called(n)
    while suspected and not regressed and n < min(10, len(trial["base"])):
        n += 1
        regressed, suspected = called(n)
    return ("regression" if regressed else "ok"), 2 * n


def _stored_before(cell: dict, trial: dict) -> tuple[str, int]:
    """The stored rule before issue 37: regression when the interval's lower bound passed
    1 + max(T, noise floor), confirmed on 3 blocks; else ok."""
    def called(current) -> bool:
        j = judge_robust(judge_levels, cell["sessions"], current, THRESHOLD)
        return j.ratio is not None and j.ratio.low > 1 + max(THRESHOLD, j.noise_floor_pct) / 100

    if not called(trial["cand"][:1]):
        return "ok", 1
    return ("regression" if called(trial["cand"][:3]) else "ok"), 3


def analyze_issue44_before(raw: dict) -> None:
    """The A/B rule of issue 37 (t-interval, screened pairs, sign test) on the same trials:
    each trial's verdict on the pairs it took under today's rule (a doubling driven by the
    other rule would have stopped elsewhere: a view of the rule, not of its whole loop)."""
    changes = ["unchanged"] + [c for c, _ in CHANGES]
    say("\n== issue 37's paired rule (mean log ratio, t-interval), the same pairs ==")
    for cell in raw["cells"]:
        row = []
        for c in changes:
            got = [judge_before(tr["base"], tr["cand"], THRESHOLD)[0]
                   for tr in cell["trials"] if tr["change"] == c]
            row.append(" ".join(f"{SHORT[v]}{got.count(v)}" for v in VERDICTS) + f"/{len(got)}")
        say(f"{cell['threads']:>7d} {cell['condition']:>8s} {'A/B':6s} "
            + " ".join(f"{x:>18s}" for x in row))


def analyze_before(raw: dict) -> None:
    """The rules before issue 37 on the same blocks: regression or ok (nothing else)."""
    changes = ["unchanged"] + [c for c, _ in CHANGES]
    say("\n== before issue 37, the same blocks: regression / ok ==")
    for cell in raw["cells"]:
        for gate, rule in (("A/B", lambda tr: _ab_before(tr)),
                           ("stored", lambda tr, cell=cell: _stored_before(cell, tr))):
            row = []
            for c in changes:
                got = [rule(tr)[0] for tr in cell["trials"] if tr["change"] == c]
                row.append(f"R{got.count('regression')} ok{got.count('ok')}/{len(got)}")
            say(f"{cell['threads']:>7d} {cell['condition']:>8s} {gate:6s} "
                + " ".join(f"{x:>18s}" for x in row))


def analyze(raw: dict) -> None:
    changes = ["unchanged"] + [c for c, _ in CHANGES]
    say(f"\nload average {raw['load_before']} before, {raw['load_after']} after; "
        f"{raw['seconds']:.0f} s of measuring; at most {raw['max_pairs']} pairs and "
        f"{raw['budget_s']:g} s per benchmark")
    say("\n== verdicts per change (R regression, ? cannot tell, = no change, I improvement), "
        "threshold 10% ==")
    say(f"{'threads':>7s} {'baseline':>8s} {'gate':6s} "
        + " ".join(f"{c:>18s}" for c in changes))
    pairs_by_verdict: dict = {g: {v: [] for v in VERDICTS} for g in ("A/B", "stored")}
    seconds = []
    for cell in raw["cells"]:
        for gate in ("A/B", "stored"):
            row = []
            for c in changes:
                got = []
                for tr in cell["trials"]:
                    if tr["change"] != c:
                        continue
                    if gate == "A/B":
                        v, n = _ab(tr).status, 2 * len(tr["base"])
                    else:
                        v, n = _stored(cell, tr)
                    got.append(v)
                    pairs_by_verdict[gate][v].append(n)
                row.append(" ".join(f"{SHORT[v]}{got.count(v)}" for v in VERDICTS)
                           + f"/{len(got)}")
            say(f"{cell['threads']:>7d} {cell['condition']:>8s} {gate:6s} "
                + " ".join(f"{x:>18s}" for x in row))
        seconds += [tr["seconds"] for tr in cell["trials"]]
        levels = [float(np.median(s)) for s in cell["sessions"]]
        size = {c: float(np.exp(np.median([np.median(np.log(np.array(tr["cand"])
                                                            / np.array(tr["base"])))
                                           for tr in cell["trials"] if tr["change"] == c])))
                for c in changes}
        say(f"{'':>7s} {'':>8s} baseline levels " + ", ".join(f"{x:.4f}" for x in levels)
            + " ms; measured change " + ", ".join(f"{c} {size[c]:.3f}x" for c in changes[1:]))
    say("\n== blocks per benchmark, by verdict (mean; a pair is two blocks) ==")
    for gate, by in pairs_by_verdict.items():
        say(f"  {gate:6s} " + "; ".join(f"{v.replace('_', ' ')}: {np.mean(n):.1f} blocks "
                                       f"({len(n)} trials)" for v, n in by.items() if n))
    say(f"  an A/B trial took {np.median(seconds):.1f} s (median), {np.percentile(seconds, 90):.1f}"
        f" s (p90), {max(seconds):.1f} s (most)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path("/tmp/timegate-eval"))
    ap.add_argument("--unchanged", type=int, default=40)
    ap.add_argument("--unchanged-t1", type=int, default=100,
                    help="unchanged trials at 1 thread, clean (the no-change target's 95/100)")
    ap.add_argument("--changed", type=int, default=20)
    ap.add_argument("--threads", type=lambda s: [int(x) for x in s.split(",")], default=[1, 2])
    ap.add_argument("--conditions", type=lambda s: s.split(","), default=["clean", "hog"])
    ap.add_argument("--max-pairs", type=int, default=PairBudget().max_pairs)
    ap.add_argument("--budget", type=float, default=PairBudget().seconds)
    ap.add_argument("--reanalyze", type=Path)
    args = ap.parse_args()
    raw = json.loads(args.reanalyze.read_text()) if args.reanalyze else measure(args)
    analyze(raw)
    analyze_issue44_before(raw)
    analyze_before(raw)


if __name__ == "__main__":
    main()
