"""Comparing two settings (SME2-off vs SME2-on, python vs native, ...) measured in interleaved
blocks on the same device: speed-up with a confidence interval, per-category speed-ups, output
equivalence and a verdict. Pure functions over results; measure.block runs the blocks."""

from __future__ import annotations

from dataclasses import dataclass, field
from statistics import median

import numpy as np

from pytest_sme2.errors import Sme2Error
from pytest_sme2.gate.ab import Pairs, judge_pairs, pairs_of
from pytest_sme2.gate.policy import DEFAULT_THRESHOLD_PCT
from pytest_sme2.measure.precision import Precision
from pytest_sme2.results import (BlockResult, ComparisonRecord, Judgement, OutputCheck,
                                 block_phases)
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


AGAINST_BASE = "the base runner"


def comparison_judgement(pairs: Pairs, margin: float = DEFAULT_MARGIN,
                         threshold_pct: float = DEFAULT_THRESHOLD_PCT) -> Judgement:
    """The paired rule every comparison shares (:func:`pytest_sme2.gate.ab.judge_pairs`) on
    the candidate's blocks against the base's: slower or faster once the interval clears
    ``margin`` and most pairs agree, "no change" within ``threshold_pct`` either way."""
    return judge_pairs(pairs, threshold_pct, margin, relevant_pct=100 * margin,
                       against=AGAINST_BASE)


def speedup_of(judgement: Judgement) -> Interval:
    """base time / candidate time from a verdict's slow-down interval."""
    r = judgement.ratio
    if r is None:
        raise Sme2Error(f"no speed-up: {judgement.reason}")
    inf = float("inf")
    return Interval(1 / r.point, 1 / r.high if r.high else 0.0, 1 / r.low if r.low else inf,
                    r.confidence)


def verdict_word(judgement: Judgement) -> str:
    """faster, slower, no change or cannot tell."""
    return _WORDS.get(judgement.status, CANNOT_TELL_WORD)


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
    # The shared rule's verdicts: end to end (``speedup`` and ``verdict`` read it) and, for an
    # LLM, each phase's; None only for a comparison made by hand.
    judgement: Judgement | None = None
    phase_judgements: dict[str, Judgement] = field(default_factory=dict)
    # What "cannot tell" does to :meth:`expect_verdict` (--sme2-on-unresolved: fail, warn,
    # pass; warn passes, and the session's summary says it could not tell).
    on_unresolved: str = "warn"

    def expect_verdict(self, *verdicts: str) -> Comparison:
        """``cmp.expect_verdict("no change")``: passes when the verdict is one of
        ``verdicts`` (``faster``, ``slower``, ``no change``); fails with the comparison's
        figures otherwise. "cannot tell" follows ``--sme2-on-unresolved``: ``fail`` fails,
        ``warn`` (the default) and ``pass`` pass — this machine could not resolve the change,
        which is no evidence against the code, and ``warn`` says so in the summary. On an
        emulated CPU the times say nothing: nothing is expected of them."""
        if self.verdict in verdicts or self.emulated:
            return self
        if self.verdict == CANNOT_TELL_WORD and self.on_unresolved != "fail":
            return self
        why = self.judgement.reason if self.judgement is not None else self.verdict
        raise AssertionError(f"expected {' or '.join(verdicts)}, got {self}: {why}")

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
        judged = self.phase_judgements.get(name)
        return PhaseSpeedup(name, self.phase_speedups[name],
                            verdict_word(judged) if judged is not None else CANNOT_TELL_WORD)

    @property
    def emulated(self) -> bool:
        """Measured on an emulated CPU: its timings say nothing about speed."""
        return self.base_blocks[0].emulated

    @property
    def pairs(self) -> Pairs:
        """Its blocks' values pair by pair, with those that straddled two machine speeds."""
        return pairs_of(self.base_blocks, self.candidate_blocks)

    @property
    def base_median_ms(self) -> float:
        """The base's median block median over the pairs the verdict rests on (those at one
        machine speed): figures from the same blocks as the speed-up."""
        return float(median(self.pairs.kept.base or self.pairs.base))

    @property
    def candidate_median_ms(self) -> float:
        return float(median(self.pairs.kept.candidate or self.pairs.candidate))

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
            phase_speedups=dict(self.phase_speedups),
            straddled_pairs=list(self.pairs.straddled), machine_switch=self.pairs.switch,
            judgement=self.judgement)

    def to_json(self) -> dict:
        return self.record().to_json()


def category_speedups(base: list[BlockResult], candidate: list[BlockResult]
                      ) -> dict[str, Interval | None]:
    """Per category, the paired-block speed-up of its mean ms per run (pairs that straddled a
    change of machine speed left out, as end to end); None where a category took no time on
    either side in some block (no ratio to form)."""
    keep = [i for i in range(len(base)) if i not in pairs_of(base, candidate).straddled]
    base, candidate = [base[i] for i in keep], [candidate[i] for i in keep]
    cats = list(dict.fromkeys(c for r in base + candidate for c in r.categories_ms))
    out: dict[str, Interval | None] = {}
    for cat in cats:
        a = [r.categories_ms.get(cat, 0.0) for r in base]
        b = [r.categories_ms.get(cat, 0.0) for r in candidate]
        out[cat] = paired_ratio(a, b) if a and min(a + b) > 0 else None
    return out


def check_outputs(a: list[np.ndarray], b: list[np.ndarray], dtype: str) -> OutputCheck:
    if len(a) != len(b) or any(x.shape != y.shape for x, y in zip(a, b)):
        return OutputCheck(float("inf"), OUTPUT_TOLERANCE.get(dtype, 1e-4), False,
                           max_rel_diff=float("inf"))
    diff = max((float(np.max(np.abs(x.astype(np.float64) - y.astype(np.float64))))
                for x, y in zip(a, b) if x.size), default=0.0)
    scale = max((float(np.max(np.abs(x.astype(np.float64)))) for x in a if x.size), default=0.0)
    tol = OUTPUT_TOLERANCE.get(dtype, 1e-4) * max(scale, 1e-12)
    return OutputCheck(diff, tol, diff <= tol, max_rel_diff=diff / max(scale, 1e-12))


def make_comparison(base_blocks: list[BlockResult], candidate_blocks: list[BlockResult],
                    outputs: OutputCheck | None = None, margin: float = DEFAULT_MARGIN,
                    nodeid: str = "", threshold_pct: float = DEFAULT_THRESHOLD_PCT
                    ) -> Comparison:
    if len(base_blocks) != len(candidate_blocks) or len(base_blocks) < 2:
        raise Sme2Error(f"a comparison needs the same number (>= 2) of blocks on each side, got "
                        f"{len(base_blocks)} and {len(candidate_blocks)}")
    first = base_blocks[0]
    judged = comparison_judgement(pairs_of(base_blocks, candidate_blocks), margin, threshold_pct)
    phases = phase_judgements(base_blocks, candidate_blocks, margin, threshold_pct)
    if phases:
        phases["decode"] = judged
    return Comparison(
        model=first.model, dtype=first.dtype, threads=first.threads,
        base=first.runner_name, candidate=candidate_blocks[0].runner_name,
        base_blocks=base_blocks, candidate_blocks=candidate_blocks, speedup=speedup_of(judged),
        category_speedups=category_speedups(base_blocks, candidate_blocks),
        outputs=outputs, verdict=verdict_word(judged), margin=margin, nodeid=nodeid,
        phase_speedups={k: speedup_of(j) for k, j in phases.items()},
        threshold_pct=threshold_pct, judgement=judged, phase_judgements=phases)


def phase_judgements(base: list[BlockResult], candidate: list[BlockResult],
                     margin: float = DEFAULT_MARGIN,
                     threshold_pct: float = DEFAULT_THRESHOLD_PCT) -> dict[str, Judgement]:
    """For blocks of generations, the paired verdict on each block's prefill time and time to
    first token (decode is the blocks' own e2e); {} otherwise."""
    return {key: comparison_judgement(pairs_of(base, candidate,
                                               lambda r, k=key: r.block_phase(k)),
                                      margin, threshold_pct)
            for key in block_phases(base + candidate)}
