"""Detection and false-alarm rates of three time gates on this machine (issue 24; not a unit
test: ~5-10 minutes on 2 cores; prints one table; raw block values in OUT/raw.json).

    python evaluations/regression_gate_evaluation_time_gates.py [--out DIR] [--unchanged 100]
        [--changed 20]
    python evaluations/regression_gate_evaluation_time_gates.py --reanalyze OUT/raw.json

Gates: the stored baseline with today's rule (``gate.judge_levels``: first block, and with two
confirmation blocks when suspected), the stored baseline with the new rule
(``gate_robust.judge_robust``, same blocks), and the same-job A/B gate (``gate_ab``: 3 ABBA
pairs of base and candidate, then confirmation pairs one at a time while a regression is
suspected and not yet called, up to 10 pairs, disturbed pairs screened out: ``gate_ab``; also
shown: the earlier design, 2 confirmation pairs when the mean ratio passed the line, no
screening). Threshold 10%.

Changes: toy_cnn made ~5/10/20% more expensive by extra convolutions after its residual block
(the instruction-gate evaluation's way: the model registered again under its own name), and
unchanged reruns (the base program itself). Each block is one native-runner process (30 runs
after 3 warm-ups, ETDump ``Method::execute`` median). Per thread count (1, 2) and baseline
condition, three baseline sessions of 3 blocks are recorded between batches of trials; under
``hog`` the second one runs while four processes spin on the two cores copying 64 MB buffers
(started and stopped here). Trials are shuffled over the changes.

Cost: blocks and seconds each gate spends per benchmark, and ``--sme2-precision 2%``
(``precision.until_precise``, budget 20 s) on toy_cnn at 1 and 2 threads against the fixed
design of 3 pairs.
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

import instruction_gate_evaluation as ige  # its Bench and variant modules

THRESHOLD = 10.0
BASE_BLOCKS = 3
PAIRS, CONFIRM_PAIRS = 3, 2
RECORDED_PAIRS = 10    # per trial, so rules that take more pairs are judged on the same data
CHANGES = [("+5%", ((1, False),)),
           ("+10%", ((1, False), (1, False))),
           ("+20%", ((5, True), (1, False)))]
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


def _block(bench, prog, t, tag) -> float:
    return bench.time_block(prog, t, tag)["median_ms"]


def _trial(bench, progs, change, t, tag) -> dict:
    """ABBA pairs: base, candidate, candidate, base, ...; every block its own process."""
    base, cand, secs = [], [], []
    for p in range(RECORDED_PAIRS):
        t0 = time.perf_counter()
        order = (("b", "c") if p % 2 == 0 else ("c", "b"))
        got = {}
        for side in order:
            prog = progs["unchanged"] if side == "b" else progs[change]
            got[side] = _block(bench, prog, t, f"{tag}-p{p}{side}")
        base.append(got["b"])
        cand.append(got["c"])
        secs.append(time.perf_counter() - t0)
    return {"change": change, "base": base, "cand": cand, "pair_s": secs,
            "load": ige._loadavg()}


def measure(args) -> dict:
    args.out.mkdir(parents=True, exist_ok=True)
    from pytest_sme2.measure.precision import until_precise

    bench = ige.Bench(args.out)
    progs = _exports(bench, args.out)
    raw: dict = {"load_before": ige._loadavg(), "cells": [], "precision": []}
    t_start = time.perf_counter()
    rng = random.Random(0)
    for t in (1, 2):
        for cond in ("clean", "hog"):
            trials = ["unchanged"] * args.unchanged + [c for c, _ in CHANGES] * args.changed
            rng.shuffle(trials)
            thirds = [trials[i::3] for i in range(3)]
            cell = {"threads": t, "condition": cond, "sessions": [], "trials": []}
            for s in range(3):
                hog = Hog() if cond == "hog" and s == 1 else None
                try:
                    time.sleep(1.0 if hog else 0)    # let the hog take the cores
                    t0 = time.perf_counter()
                    cell["sessions"].append(
                        [_block(bench, progs["unchanged"], t, f"s-{t}-{cond}-{s}-{b}")
                         for b in range(BASE_BLOCKS)])
                    cell.setdefault("base_s", []).append(time.perf_counter() - t0)
                finally:
                    if hog:
                        hog.stop()
                for i, change in enumerate(thirds[s]):
                    cell["trials"].append(_trial(bench, progs, change, t,
                                                 f"tr-{t}-{cond}-{s}-{i}"))
            say(f"  t{t} {cond}: {len(cell['trials'])} trials, sessions "
                + ", ".join(f"{sorted(x)[1]:.4f}" for x in cell["sessions"])
                + f" ms ({time.perf_counter() - t_start:.0f} s, load {ige._loadavg()})")
            raw["cells"].append(cell)
            (args.out / "raw.json").write_text(json.dumps(raw))    # kept if a later step fails
    for t in (1, 2):
        for rep in range(args.precision_reps):
            def pair(n, t=t, rep=rep):
                b = _block(bench, progs["unchanged"], t, f"prec-{t}-{rep}-{n}b")
                c = _block(bench, progs["+10%"], t, f"prec-{t}-{rep}-{n}c")
                return b, c
            p = until_precise(pair, 2.0, budget_s=20.0)
            raw["precision"].append({"threads": t, "pairs": len(p.pairs.base),
                                     "seconds": p.seconds, "reached": p.reached,
                                     "why": p.why, "half_width_pct": p.half_width_pct})
    raw["seconds"] = time.perf_counter() - t_start
    raw["load_after"] = ige._loadavg()
    (args.out / "raw.json").write_text(json.dumps(raw, indent=1))
    return raw


def _verdicts(cell: dict, trial: dict) -> dict:
    from pytest_sme2.api import REGRESSION, judge_levels
    from pytest_sme2.gate.ab import Pairs, judge_ab, line, needs_more, slowdown
    from pytest_sme2.gate.robust import judge_robust

    out, cost = {}, {}
    def new_rule(sessions, current, pct):
        return judge_robust(judge_levels, sessions, current, pct)

    for name, rule in (("stored, today's rule", judge_levels), ("stored, new rule", new_rule)):
        j = rule(cell["sessions"], trial["cand"][:1], THRESHOLD)
        blocks = 1
        if j.status == REGRESSION:   # confirmation: the first block and two more
            j = rule(cell["sessions"], trial["cand"][:3], THRESHOLD)
            blocks = 3
        out[name], cost[name] = j.status == REGRESSION, blocks
    first = Pairs(tuple(trial["base"][:PAIRS]), tuple(trial["cand"][:PAIRS]))
    fixed = first     # the earlier design: point-estimate suspicion, 2 more pairs, no screening
    if slowdown(first).point > line(THRESHOLD):
        k = PAIRS + CONFIRM_PAIRS
        fixed = Pairs(tuple(trial["base"][:k]), tuple(trial["cand"][:k]))
    out["A/B, 3+2 fixed pairs"] = slowdown(fixed).low > line(THRESHOLD)
    cost["A/B, 3+2 fixed pairs"] = 2 * len(fixed.base)
    pairs = first                        # the shipped rule: one pair at a time (gate_ab)
    while needs_more(pairs, THRESHOLD) and len(pairs.base) < len(trial["base"]):
        n = len(pairs.base) + 1
        pairs = Pairs(tuple(trial["base"][:n]), tuple(trial["cand"][:n]))
    out["same-job A/B"] = judge_ab(pairs, THRESHOLD).status == REGRESSION
    cost["same-job A/B"] = 2 * len(pairs.base)
    return {"called": out, "blocks": cost}


def analyze(raw: dict) -> None:
    import numpy as np

    from pytest_sme2.api import judge_levels
    from pytest_sme2.gate.robust import judge_robust
    from pytest_sme2.stats import noise_floor

    gates = ["stored, today's rule", "stored, new rule", "A/B, 3+2 fixed pairs", "same-job A/B"]
    changes = ["unchanged"] + [c for c, _ in CHANGES]
    say(f"\nload average {raw['load_before']} before, {raw['load_after']} after; "
        f"{raw['seconds']:.0f} s of measuring")
    say("\n== detection (changed) and false-alarm (unchanged) rates, threshold 10% ==")
    head = f"{'threads':>7s} {'baseline':>8s} {'gate':22s} " + " ".join(
        f"{c + ' (' + 'FA' + ')' if c == 'unchanged' else c:>14s}" for c in changes)
    say(head)
    blocks: dict = {g: [] for g in gates}
    block_s = []
    for cell in raw["cells"]:
        v = [(tr, _verdicts(cell, tr)) for tr in cell["trials"]]
        for _, r in v:
            for g in gates:
                blocks[g].append(r["blocks"][g])
        block_s += [s / 2 for tr, _ in v for s in tr["pair_s"]]
        for g in gates:
            row = []
            for c in changes:
                hits = [r["called"][g] for tr, r in v if tr["change"] == c]
                row.append(f"{sum(hits)}/{len(hits)}")
            say(f"{cell['threads']:>7d} {cell['condition']:>8s} {g:22s} "
                + " ".join(f"{x:>14s}" for x in row))
        levels = [float(np.median(s)) for s in cell["sessions"]]
        size = {c: float(np.exp(np.median([np.log(np.array(tr["cand"]) / np.array(tr["base"]))
                                           for tr in cell["trials"] if tr["change"] == c])))
                for c in changes}
        j = judge_robust(judge_levels, cell["sessions"], cell["trials"][0]["cand"][:1],
                         THRESHOLD)
        today = noise_floor(cell["sessions"])[0] * 100
        say(f"{'':>7s} {'':>8s} baseline session levels "
            + ", ".join(f"{x:.4f}" for x in levels) + " ms; measured change "
            + ", ".join(f"{c} {size[c]:.3f}x" for c in changes[1:])
            + f"; floors: today {today:.0f}%, new {j.noise_floor_pct:.0f}%")
    bs = float(np.median(block_s))
    say(f"\n== cost per benchmark (a block is one runner process, median {bs * 1000:.0f} ms "
        "here) ==")
    for g in gates:
        n = float(np.mean(blocks[g]))
        say(f"  {g:22s} {n:5.2f} blocks on average ({n * bs:.2f} s)"
            + ("; plus the baseline's 3 sessions x 3 blocks, recorded once" if "stored" in g
               else "; nothing stored but the base program"))
    say("\n== --sme2-precision 2% (toy_cnn vs +10%, budget 20 s) against the fixed 3 pairs ==")
    for p in raw["precision"]:
        hw = f"±{p['half_width_pct']:.1f}%" if p["half_width_pct"] is not None else "-"
        say(f"  t{p['threads']}: {p['pairs']:3d} pairs, {p['seconds']:5.1f} s, {hw} "
            + ("reached" if p["reached"] else f"NOT reached: {p['why']}"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path("/tmp/timegate-eval"))
    ap.add_argument("--unchanged", type=int, default=100)
    ap.add_argument("--changed", type=int, default=20)
    ap.add_argument("--precision-reps", type=int, default=3)
    ap.add_argument("--reanalyze", type=Path)
    args = ap.parse_args()
    raw = json.loads(args.reanalyze.read_text()) if args.reanalyze else measure(args)
    analyze(raw)


if __name__ == "__main__":
    main()
