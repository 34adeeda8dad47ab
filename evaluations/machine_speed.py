"""Judgements on a machine that changes speed (issue 44): the paired rule before (issue 37's mean
log ratio with its t-interval, screened pairs, sign test) and now (Hodges-Lehmann with the
signed-rank interval, pairs the machine-state probe saw straddle two speeds left out), on

- **a simulated two-speed machine**: states 1.8x apart, each lasting 1-10 s at random; a block
  takes ~0.15 s (its 30 runs within it, so a block can straddle a switch), the probe is timed
  at both ends of it with 5% noise of its own; 1 thread;
- **real blocks of this machine** (``--real FILE``, recorded by ``--record FILE``): native
  toy_cnn blocks back to back with their probe readings; a pair is two consecutive blocks, a
  +10% change is the candidate's block times 1.10;
- **the stored gate** against its own fresh baseline (1-3 baseline sessions of 3 blocks) on
  the simulated machine: before (the stored rule alone) and now (the identity rule: the same
  program, runner and runtime is the machine).

Every judgement takes its pairs through the library's own loop (``take_pairs``: 6 pairs, then
doubling while it cannot tell, up to 40): the cost is the gate's. Prints the tables of
docs/regression-gate.md ("A machine that changes speed")::

    python evaluations/machine_speed.py [--trials 100] [--changed 20] [--seed 0]
    python evaluations/machine_speed.py --record real.json --blocks 600
    python evaluations/machine_speed.py --real tests/data/speed_states/toy_cnn_native_probed.json
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np

import _common  # noqa: F401  (the repository root on sys.path)
from _rules_before import judge_before, t_slowdown
from pytest_sme2.analysis.latency import latency_stats
from pytest_sme2.api import (CANNOT_TELL, IMPROVEMENT, NO_CHANGE, REGRESSION, BlockResult,
                             GatePolicy, Judgement, PairBudget, PairPlan, Pairs, evaluate,
                             judge_ab, judge_pairs, take_pairs)
from pytest_sme2.baselines.store import save
from pytest_sme2.results.machine import ProbeReading

THRESHOLD = 10.0
DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "speed_states"
VERDICTS = (REGRESSION, CANNOT_TELL, NO_CHANGE, IMPROVEMENT)
SHORT = {REGRESSION: "R", CANNOT_TELL: "?", NO_CHANGE: "=", IMPROVEMENT: "I"}
PLAN = PairPlan(first=6, budget=PairBudget(40, 1e9))
UNDER_TEST = {"export_key": "e", "model_source": "m", "recipe": "r", "program": "p" * 64,
              "versions": {"torch": "2.13.0", "executorch": "1.5.1", "torchao": "0.18.0"},
              "runner_labels": {"build": "b"}, "timing": "untraced"}


def block(runs: list[float], probe: tuple[list[float], list[float]] | None, i: int,
          name: str = "b.py::t") -> BlockResult:
    """A block as the runner's process gives it: its timed runs and its probe readings."""
    r = BlockResult(nodeid=name, model="toy_cnn", dtype="fp32", threads=1,
                    runner={"name": "native", "kind": "native", "labels": {"build": "b"}},
                    device={"kind": "host", "serial": "vm", "cpu": "VM", "abi": "x86_64"},
                    runs=len(runs), warmup=3, e2e_ms=list(runs), e2e=latency_stats(runs),
                    etdump="", pte="", context={"block": i}, under_test=UNDER_TEST)
    if probe is not None:
        r.probe = ProbeReading(*probe)
    return r


class TwoSpeeds:
    """A machine that runs at speed 1 or ``slow`` (1.8x) for 1-10 s at a time; a simulated
    clock advances by each block's wall time."""

    def __init__(self, rng: random.Random, slow: float = 1.8, block_s: float = 0.15):
        self.rng, self.slow, self.block_s, self.t = rng, slow, block_s, 0.0
        self.switches = [0.0]
        self.fast_first = rng.random() < 0.5

    def factor(self, t: float) -> float:
        while self.switches[-1] <= t:
            self.switches.append(self.switches[-1] + self.rng.uniform(1.0, 10.0))
        k = next(i for i, s in enumerate(self.switches) if s > t) - 1
        return 1.0 if (k % 2 == 0) == self.fast_first else self.slow

    def block(self, ms: float, i: int, probe: bool = True) -> BlockResult:
        """30 runs spread over the block's middle, the probe at both of its ends."""
        t0 = self.t
        self.t += self.block_s
        noisy = lambda f: f * self.rng.lognormvariate(0, 0.03)  # noqa: E731
        runs = [noisy(ms * self.factor(t0 + self.block_s * (0.1 + 0.8 * k / 29)))
                for k in range(30)]
        ends = ([14.0 * self.factor(t0) * self.rng.lognormvariate(0, 0.05) for _ in range(24)],
                [14.0 * self.factor(self.t) * self.rng.lognormvariate(0, 0.05)
                 for _ in range(24)]) if probe else None
        return block(runs, ends, i)


def judged(measure_base, measure_cand, rule) -> tuple[str, int]:
    """One judgement through the library's loop; ``rule`` "now" or "before"."""
    def judge(paired) -> Judgement:
        if rule == "now":
            return judge_ab(paired.pairs, THRESHOLD)
        p = paired.pairs
        status, r = judge_before(list(p.base), list(p.candidate), THRESHOLD)
        return Judgement(status, r, THRESHOLD, 0.0, status)

    paired = take_pairs(measure_base, measure_cand, judge, PLAN)
    j = paired.told.judgement if paired.told is not None else judge(paired)
    return j.status, len(paired.base)


def simulated(trials: int, changed: int, seed: int, block_s: float) -> dict:
    out: dict = {}
    for rule in ("before", "now"):
        for label, factor, n in (("unchanged", 1.0, trials), ("+10%", 1.10, changed)):
            got = []
            for k in range(n):
                m = TwoSpeeds(random.Random(seed * 100003 + k), block_s=block_s)
                got.append(judged(lambda i, m=m: m.block(0.107, i),
                                  lambda i, m=m, f=factor: m.block(0.107 * f, i), rule))
            out[(rule, label)] = got
    return out


def real_blocks(path: Path) -> list[BlockResult]:
    doc = json.loads(path.read_text())
    return [block(b["runs"], (b["before_us"], b["after_us"]) if b.get("before_us") else None,
                  i) for i, b in enumerate(doc["blocks"])]


def on_real(blocks: list[BlockResult], trials: int, changed: int, seed: int) -> dict:
    """Judgements whose pairs are consecutive real blocks from a random start (A, B, A, B in
    time order: what the loop would have measured), the candidate's times x 1.10 for +10%."""
    rng = random.Random(seed)
    out: dict = {}
    for rule in ("before", "now"):
        for label, factor, n in (("unchanged", 1.0, trials), ("+10%", 1.10, changed)):
            got = []
            for _ in range(n):
                at = [rng.randrange(0, len(blocks) - 2 * PLAN.budget.max_pairs)]

                def take(i: int, scale: float = 1.0, at: list[int] = at) -> BlockResult:
                    b = blocks[at[0]]
                    at[0] += 1
                    return block([v * scale for v in b.e2e_ms],
                                 (b.probe.before_us, b.probe.after_us) if b.probe else None, i)

                got.append(judged(lambda i: take(i), lambda i, f=factor: take(i, f), rule))
            out[(rule, label)] = got
    return out


def issue_pairs(path: Path) -> None:
    """The 40 pairs the issue recorded (python vs native, the same program; no probe then):
    both rules on the same block medians, the comparison's own 5% margin."""
    d = json.loads(path.read_text())
    base, cand = d["base_block_medians_ms"], d["candidate_block_medians_ms"]
    status, r = judge_before(cand, base, THRESHOLD)     # python / native, as the issue reads
    t = t_slowdown(cand, base)                          # sme2_compare's rule: no screening
    now = judge_pairs(Pairs(tuple(cand), tuple(base)), THRESHOLD, margin=0.05,
                      relevant_pct=5.0)
    print(f"\nThe issue's 40 pairs ({path.name}), python / native: sme2_compare before "
          f"{t} (its t-interval); the A/B gate before {status.replace('_', ' ')} {r} (screened "
          f"t-interval); now {now.status.replace('_', ' ')} {now.ratio}")


def stored_aa(sessions_n: int, trials: int, seed: int) -> dict:
    """The same program against its own fresh baseline on the two-speed machine: the stored
    rule alone (before) and with the identity rule (now)."""
    out = {"before": [], "now": []}
    t0 = datetime(2026, 11, 1, tzinfo=timezone.utc)
    for k in range(trials):
        m = TwoSpeeds(random.Random(seed * 7919 + k))
        with tempfile.TemporaryDirectory() as folder:
            for s in range(sessions_n):
                m.t += m.rng.uniform(5, 60)               # sessions minutes apart
                save([m.block(0.107, b) for b in range(3)], Path(folder),
                     session_id=f"s{s}", commit=False, now=t0 + timedelta(minutes=s))
            m.t += m.rng.uniform(5, 60)
            blocks = [m.block(0.107, b) for b in range(3)]
            now = evaluate(blocks, Path(folder), GatePolicy(fail_on_regression=THRESHOLD)).e2e
            other = [block(b.e2e_ms, (b.probe.before_us, b.probe.after_us), i)
                     for i, b in enumerate(blocks)]
            for b in other:                              # another program: the stored rule
                b.under_test = {**UNDER_TEST, "program": "q" * 64}
            before = evaluate(other, Path(folder), GatePolicy(fail_on_regression=THRESHOLD)).e2e
        out["before"].append(before.status)
        out["now"].append(now.status)
    return out


def row(got: list[tuple[str, int]]) -> str:
    statuses = [s for s, _ in got]
    pairs = np.mean([n for _, n in got]) if got else 0
    return " ".join(f"{SHORT[v]}{statuses.count(v)}" for v in VERDICTS) + \
        f"/{len(got)} ({pairs:.0f} pairs)"


def table(title: str, out: dict) -> None:
    print(f"\n{title}\n| rule | unchanged | +10% |\n|---|---|---|")
    for rule in ("before", "now"):
        print(f"| {rule} | {row(out[(rule, 'unchanged')])} | {row(out[(rule, '+10%')])} |")


def record(path: Path, n: int) -> None:
    """``n`` native toy_cnn blocks back to back on this host, with their probe readings."""
    from pytest_sme2.api import BenchSettings, BenchmarkRun, native_runner, open_device, \
        run_benchmark

    import os
    settings = BenchSettings(report_dir=Path(tempfile.mkdtemp()), loads=1, sample="off")
    runner, device = native_runner(), open_device("host")
    blocks = []
    for i in range(n):
        r = run_benchmark(BenchmarkRun("toy_cnn", "fp32", 1, block=i), runner, device, settings)
        blocks.append({"runs": r.e2e_ms, "before_us": r.probe.before_us,
                       "after_us": r.probe.after_us})
    path.write_text(json.dumps({"what": f"{n} native toy_cnn fp32 t1 blocks back to back, "
                                        f"load {os.getloadavg()[0]:.1f} at the end",
                                "blocks": blocks}))
    print(f"wrote {path}: {n} blocks")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--changed", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--real", type=Path, default=DATA / "toy_cnn_native_probed.json",
                    help="recorded blocks (--record) to judge")
    ap.add_argument("--record", type=Path, help="record real blocks here and stop")
    ap.add_argument("--blocks", type=int, default=600)
    ap.add_argument("--block-s", type=lambda s: [float(x) for x in s.split(",")],
                    default=[0.15, 0.5], help="a block's wall time, seconds (native toy_cnn "
                    "~0.15 s in a session; the Python runtime's ~0.5 s)")
    args = ap.parse_args()
    if args.record:
        return record(args.record, args.blocks)
    for block_s in args.block_s:
        table(f"Simulated two-speed machine (1.8x, 1-10 s each), 1 thread, a block every "
              f"{block_s:g} s: R regression, ? cannot tell, = no change, I improvement",
              simulated(args.trials, args.changed, args.seed, block_s))
    issue_pairs(DATA / "runners_agree_40_pairs.json")
    if args.real:
        blocks = real_blocks(args.real)
        table(f"Real blocks of this machine ({args.real.name}, {len(blocks)} blocks)",
              on_real(blocks, args.trials, args.changed, args.seed))
    print("\nThe same program against its own fresh baseline, simulated machine (R/?/=/I of 50)")
    print("| baseline sessions | stored rule alone | with the identity rule |\n|---|---|---|")
    for n in (1, 2, 3):
        got = stored_aa(n, 50, args.seed + n)
        cells = [" ".join(f"{SHORT[v]}{got[k].count(v)}" for v in VERDICTS)
                 for k in ("before", "now")]
        print(f"| {n} | {cells[0]} | {cells[1]} |")


if __name__ == "__main__":
    main()
