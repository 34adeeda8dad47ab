"""A/A calibration: what this machine can resolve. The same program on both sides of the gate's
paired rule, N times — as Kohavi advises before an A/B test is trusted, and as a team should
calibrate a CI runner before it turns the gate on (docs/ci.md).

Each judgement takes its pairs as the gate does (:func:`pytest_sme2.measure.pairs.take_pairs`:
the first pairs, then doubling while it cannot tell, within the pair budget) and is judged by
the gate's rule (:func:`pytest_sme2.gate.ab.judge_ab`). What comes out:

- the realised false-alarm rate (a regression or an improvement called on identical code),
  with its 95% Wilson interval;
- the smallest change this machine resolves within the pair budget: each judgement's minimum
  detectable change (:func:`pytest_sme2.gate.decide.detectable_pct`), the median and the worst;
- how often the machine switched speed under the pairs (the probe's straddled pairs)."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from statistics import median
from typing import Callable

from pytest_sme2.devices.base import Device
from pytest_sme2.gate.ab import judge_pairs
from pytest_sme2.gate.decide import detectable_pct
from pytest_sme2.gate.policy import DEFAULT_THRESHOLD_PCT
from pytest_sme2.measure.block import BenchmarkRun, run_benchmark
from pytest_sme2.measure.pairs import Paired, PairPlan, take_pairs
from pytest_sme2.measure.settings import BenchSettings
from pytest_sme2.results import Judgement
from pytest_sme2.results.judgement import CANNOT_TELL, IMPROVEMENT, NO_CHANGE, REGRESSION
from pytest_sme2.runners.base import Runner

Z95 = 1.959964
AGAINST_ITSELF = "the same program (A/A)"


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The 95% Wilson score interval of a proportion ``k`` of ``n`` (good at 0 of n, where the
    normal one collapses to [0, 0])."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class AaJudgement:
    """One A/A judgement: the verdict, the pairs it took, how many straddled two machine
    speeds (and were left out), the smallest change its data could call, its seconds, and how
    many pairs the machine-state probe read (none at 2 or more threads)."""

    judgement: Judgement
    pairs: int
    straddled: int
    detectable_pct: float
    seconds: float
    probed: int = 0

    @property
    def watched(self) -> str:
        """``2 pair(s) at two machine speeds``, or that the probe read none of its pairs."""
        return (f"{self.straddled} pair(s) at two machine speeds" if self.probed
                else "pairs not probed (the probe reads 1-thread blocks)")


@dataclass
class Calibration:
    """N A/A judgements of one program on one runner and device, at one threshold."""

    what: str
    threshold_pct: float
    judgements: list[AaJudgement] = field(default_factory=list)

    def count(self, *statuses: str) -> int:
        return sum(j.judgement.status in statuses for j in self.judgements)

    @property
    def false_alarms(self) -> int:
        return self.count(REGRESSION, IMPROVEMENT)

    @property
    def resolvable_pct(self) -> tuple[float, float]:
        """(median, worst) of the judgements' minimum detectable change."""
        found = [j.detectable_pct for j in self.judgements] or [math.inf]
        return float(median(found)), max(found)

    def lines(self) -> list[str]:
        """The report: the false-alarm rate with its interval, the verdicts, what this machine
        resolves, the machine's switches, and what to set the threshold to."""
        n = len(self.judgements)
        fa = self.false_alarms
        low, high = wilson(fa, n)
        typical, worst = self.resolvable_pct
        swung = sum(j.straddled for j in self.judgements)
        probed = sum(j.probed for j in self.judgements)
        out = [f"false alarms: {fa} of {n} judgements called a change on identical code "
               f"({fa / n:.0%}, 95% CI {low:.0%}-{high:.0%})" if n else "no judgements",
               f"verdicts: no change {self.count(NO_CHANGE)}, cannot tell "
               f"{self.count(CANNOT_TELL)}, regression {self.count(REGRESSION)}, improvement "
               f"{self.count(IMPROVEMENT)}"]
        if n:
            out.append(f"smallest change this machine resolves within the pair budget: "
                       f"~{typical:.0f}% typically, ~{worst:.0f}% at worst (each judgement's "
                       "minimum detectable change)")
            out.append(f"the machine switched speed under {swung} of {probed} probed pairs (the "
                       "probe saw it; those pairs were left out)" if probed else
                       "the machine's speed was not watched: the machine-state probe reads "
                       "1-thread blocks only (at more threads it moves on its own)")
            advice = max(self.threshold_pct, math.ceil(worst)) if math.isfinite(worst) \
                else None
            out.append(f"on this runner, gate at --fail-on-regression {advice:g} or more"
                       if advice is not None else
                       "this runner could not resolve a change at all: gate elsewhere, or on "
                       "instruction counts (--sme2-measure instructions)")
        return out


@dataclass(frozen=True)
class AaPlan:
    """How many judgements, each's pairs (the gate's: ``PairPlan``), and the change to detect."""

    judgements: int = 20
    pairs: PairPlan = PairPlan()
    threshold_pct: float = DEFAULT_THRESHOLD_PCT


def calibrate(run: BenchmarkRun, runner: Runner, device: Device, settings: BenchSettings,
              how: AaPlan = AaPlan(), say: Callable[[AaJudgement], None] | None = None
              ) -> Calibration:
    """``how.judgements`` A/A judgements of ``run`` on ``runner`` and ``device``: both sides
    the same program, blocks taken and judged as the gate takes and judges them; ``say``
    hears each as it ends."""
    what = f"{run.model} {run.dtype} t{run.threads} {runner.info.name}@{device.spec}"
    threshold_pct = how.threshold_pct
    out = Calibration(what, threshold_pct)
    for k in range(how.judgements):
        start = time.monotonic()

        def side(name: str, k: int = k):
            def block(i: int):
                return run_benchmark(BenchmarkRun(
                    run.model, run.dtype, run.threads, label=f"aa{k}[{name}#{i}]", block=i,
                    benchmark=f"aa{k}"),
                    runner, device, settings)
            return block

        def judge(paired: Paired) -> Judgement:
            return judge_pairs(paired.pairs, threshold_pct, against=AGAINST_ITSELF)

        paired = take_pairs(side("a"), side("b"), judge, how.pairs)
        j = paired.told.judgement if paired.told is not None else judge(paired)
        probed = sum(a.probe is not None and b.probe is not None
                     for a, b in zip(paired.base, paired.candidate))
        done = AaJudgement(j, len(paired.base), len(paired.pairs.straddled),
                           detectable_pct(j.ratio) if j.ratio is not None else math.inf,
                           time.monotonic() - start, probed)
        out.judgements.append(done)
        if say is not None:
            say(done)
    return out
