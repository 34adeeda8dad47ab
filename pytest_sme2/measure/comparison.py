"""Comparing two settings (SME2-off vs SME2-on, python vs native, ...) measured in interleaved
blocks on the same device: speed-up with a confidence interval, per-category speed-ups, output
equivalence and a verdict. Pure functions over results; measure.block runs the blocks."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pytest_sme2.errors import Sme2Error
from pytest_sme2.gate.decide import decide
from pytest_sme2.gate.policy import DEFAULT_THRESHOLD_PCT
from pytest_sme2.measure.precision import Precision
from pytest_sme2.results import BlockResult, ComparisonRecord, Judgement, OutputCheck, pool
from pytest_sme2.results.judgement import CANNOT_TELL, IMPROVEMENT, NO_CHANGE, REGRESSION
from pytest_sme2.stats import DEFAULT_MARGIN, FASTER, SLOWER, Interval, paired_ratio

EMULATED_NOTE = " (emulated CPU: timings say nothing about speed)"
# Largest |a - b| between two runners' outputs of one program, relative to max |a|. fp16: two
# kernel families accumulate differently (KleidiAI SME2 fp16 kernels vs XNNPACK's NEON fp16
# ones), and over MobileNetV3's ~50 layers they drifted 1.3% apart while each was 2.0-2.2% from
# the fp32 eager result (QEMU, evaluations/emulated_sme2_evaluation.py): a difference within fp16's
# own error is not a wrong result.
# "pte": a user's program, whose precision we do not know: the loosest of the others.
OUTPUT_TOLERANCE = {"fp32": 1e-4, "fp16": 3e-2, "int8": 0.05, "int8_dynamic": 0.05, "pte": 0.05}


# A comparison's verdict in its own words (the candidate against the base), from the rule every
# comparison shares (pytest_sme2.gate.decide): slower or faster once the interval clears the
# margin; "no change" once it rules out the threshold's change either way; else "cannot tell".
NO_CHANGE_WORD, CANNOT_TELL_WORD = "no change", "cannot tell"
_WORDS = {REGRESSION: SLOWER, IMPROVEMENT: FASTER, NO_CHANGE: NO_CHANGE_WORD,
          CANNOT_TELL: CANNOT_TELL_WORD}


def comparison_judgement(speedup: Interval, margin: float = DEFAULT_MARGIN,
                         threshold_pct: float = DEFAULT_THRESHOLD_PCT) -> Judgement:
    """The shared rule on a speed-up (base time / candidate time): its slow-down interval
    against the line ``1 + margin``, "no change" within ``threshold_pct`` either way."""
    inf = float("inf")
    slowdown = Interval(1 / speedup.point, 1 / speedup.high if speedup.high else 0.0,
                        1 / speedup.low if speedup.low else inf, speedup.confidence)
    status, word = decide(slowdown, threshold_pct, margin, relevant_pct=100 * margin)
    return Judgement(status, slowdown, threshold_pct, 0.0, word, against="the base runner")


def comparison_verdict(speedup: Interval, margin: float = DEFAULT_MARGIN,
                       threshold_pct: float = DEFAULT_THRESHOLD_PCT) -> str:
    """faster, slower, no change or cannot tell (:func:`comparison_judgement`)."""
    return _WORDS[comparison_judgement(speedup, margin, threshold_pct).status]


@dataclass(frozen=True)
class PhaseSpeedup:
    """One phase of an LLM comparison: base time / candidate time, and its verdict."""

    phase: str
    speedup: Interval
    verdict: str


@dataclass(repr=False)
class Comparison:
    """``speedup`` is base time / candidate time: above 1 means the candidate is faster.

    Typical use: ``cmp = compare("sme2_off", "sme2_on"); assert cmp.speedup.low >= 1.5``."""

    model: str
    dtype: str
    threads: int
    base: str                               # runner names
    candidate: str
    base_blocks: list[BlockResult]
    candidate_blocks: list[BlockResult]
    speedup: Interval
    category_speedups: dict[str, Interval | None]
    outputs: OutputCheck | None
    verdict: str
    margin: float = DEFAULT_MARGIN
    nodeid: str = ""                        # the test that compared
    baselines: dict[str, Judgement] | None = None   # the gate's verdict per runner
    # An LLM's generations: the speed-up of each phase's time (``prefill``, ``decode`` per
    # token, ``ttft``); empty for a forward pass. ``speedup`` is the decode one there.
    phase_speedups: dict[str, Interval] = field(default_factory=dict)
    threshold_pct: float = DEFAULT_THRESHOLD_PCT    # the change "no change" rules out
    # How its pairs ended: what stopped the doubling short of a verdict ("" when told or not
    # asked), and --sme2-precision's outcome (None when not asked).
    stopped_by: str = ""
    precision: Precision | None = None

    @property
    def judgement(self) -> Judgement:
        """The shared rule's verdict on :attr:`speedup` (the candidate against the base)."""
        return comparison_judgement(self.speedup, self.margin, self.threshold_pct)

    @property
    def prefill(self) -> PhaseSpeedup:
        """``cmp.prefill.speedup.low >= 1.3``: the prefill's speed-up (an LLM's)."""
        return self._phase("prefill")

    @property
    def decode(self) -> PhaseSpeedup:
        """``cmp.decode.speedup.low >= 1.3``: the decode steps' speed-up (an LLM's)."""
        return self._phase("decode")

    @property
    def ttft(self) -> PhaseSpeedup:
        return self._phase("ttft")

    def _phase(self, name: str) -> PhaseSpeedup:
        if name not in self.phase_speedups:
            raise Sme2Error(f"{self.model} {self.dtype}: no {name} speed-up: the comparison "
                            "was not of generations (an LLM program)")
        speedup = self.phase_speedups[name]
        return PhaseSpeedup(name, speedup,
                            comparison_verdict(speedup, self.margin, self.threshold_pct))

    @property
    def emulated(self) -> bool:
        """Measured on an emulated CPU: its timings say nothing about speed."""
        return self.base_blocks[0].emulated

    @property
    def base_median_ms(self) -> float:
        return pool(self.base_blocks).median_ms

    @property
    def candidate_median_ms(self) -> float:
        return pool(self.candidate_blocks).median_ms

    def __str__(self) -> str:
        return (f"{self.candidate} vs {self.base} on {self.model} {self.dtype} t{self.threads}: "
                f"speed-up {self.speedup} ({len(self.base_blocks)} interleaved blocks each; "
                f"medians {self.base_median_ms:.3f} -> {self.candidate_median_ms:.3f} ms): "
                f"{self.verdict}" + (EMULATED_NOTE if self.emulated else ""))

    def __repr__(self) -> str:  # assertion messages show this: numbers, not block objects
        return f"Comparison({self})"

    def record(self) -> ComparisonRecord:
        """What results.json keeps of it: the figures and the blocks' node ids."""
        return ComparisonRecord(
            model=self.model, dtype=self.dtype, threads=self.threads, base=self.base,
            candidate=self.candidate, base_median_ms=self.base_median_ms,
            candidate_median_ms=self.candidate_median_ms, speedup=self.speedup,
            category_speedups=dict(self.category_speedups), outputs=self.outputs,
            verdict=self.verdict, margin=self.margin, emulated=self.emulated,
            base_block_medians_ms=[r.e2e.median_ms for r in self.base_blocks],
            candidate_block_medians_ms=[r.e2e.median_ms for r in self.candidate_blocks],
            base_blocks=[r.nodeid for r in self.base_blocks],
            candidate_blocks=[r.nodeid for r in self.candidate_blocks],
            nodeid=self.nodeid, baselines=self.baselines,
            phase_speedups=dict(self.phase_speedups))

    def to_json(self) -> dict:
        return self.record().to_json()


def category_speedups(base: list[BlockResult], candidate: list[BlockResult]
                      ) -> dict[str, Interval | None]:
    """Per category, the paired-block speed-up of its mean ms per run; None where a category
    took no time on either side in some block (no ratio to form)."""
    cats = list(dict.fromkeys(c for r in base + candidate for c in r.categories_ms))
    out: dict[str, Interval | None] = {}
    for cat in cats:
        a = [r.categories_ms.get(cat, 0.0) for r in base]
        b = [r.categories_ms.get(cat, 0.0) for r in candidate]
        out[cat] = paired_ratio(a, b) if min(a + b) > 0 else None
    return out


def check_outputs(a: list[np.ndarray], b: list[np.ndarray], dtype: str) -> OutputCheck:
    if len(a) != len(b) or any(x.shape != y.shape for x, y in zip(a, b)):
        return OutputCheck(float("inf"), OUTPUT_TOLERANCE.get(dtype, 1e-4), False, float("inf"))
    diff = max((float(np.max(np.abs(x.astype(np.float64) - y.astype(np.float64))))
                for x, y in zip(a, b) if x.size), default=0.0)
    scale = max((float(np.max(np.abs(x.astype(np.float64)))) for x in a if x.size), default=0.0)
    tol = OUTPUT_TOLERANCE.get(dtype, 1e-4) * max(scale, 1e-12)
    return OutputCheck(diff, tol, diff <= tol, diff / max(scale, 1e-12))


def make_comparison(base_blocks: list[BlockResult], candidate_blocks: list[BlockResult],
                    outputs: OutputCheck | None = None, margin: float = DEFAULT_MARGIN,
                    nodeid: str = "", threshold_pct: float = DEFAULT_THRESHOLD_PCT
                    ) -> Comparison:
    if len(base_blocks) != len(candidate_blocks) or len(base_blocks) < 2:
        raise Sme2Error(f"a comparison needs the same number (>= 2) of blocks on each side, got "
                        f"{len(base_blocks)} and {len(candidate_blocks)}")
    first = base_blocks[0]
    speedup = paired_ratio([r.e2e.median_ms for r in base_blocks],
                           [r.e2e.median_ms for r in candidate_blocks])
    phases = phase_speedups(base_blocks, candidate_blocks)
    if phases:
        phases["decode"] = speedup
    return Comparison(
        model=first.model, dtype=first.dtype, threads=first.threads,
        base=first.runner_name, candidate=candidate_blocks[0].runner_name,
        base_blocks=base_blocks, candidate_blocks=candidate_blocks, speedup=speedup,
        category_speedups=category_speedups(base_blocks, candidate_blocks),
        outputs=outputs, verdict=comparison_verdict(speedup, margin, threshold_pct),
        margin=margin, nodeid=nodeid, phase_speedups=phases, threshold_pct=threshold_pct)


def phase_speedups(base: list[BlockResult], candidate: list[BlockResult]
                   ) -> dict[str, Interval]:
    """For blocks of generations, the paired speed-up of each block's prefill time and time
    to first token (decode is the blocks' own e2e); {} otherwise."""
    out: dict[str, Interval] = {}
    if not all(r.generation is not None for r in base + candidate):
        return out
    for name, value in (("prefill", lambda g: g.prefill.median_ms),
                        ("ttft", lambda g: g.ttft_ms)):
        a = [value(r.generation) for r in base]
        b = [value(r.generation) for r in candidate]
        if all(v is not None and v > 0 for v in a + b):
            out[name] = paired_ratio(a, b)
    return out
