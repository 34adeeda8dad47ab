"""The regression gate: judge a benchmark's blocks against its stored baseline.

Entry points — the pytest fixtures and ``pytest-sme2 gate`` call nothing else:

- :func:`evaluate` ``(results, baseline_dir, policy) -> GateReport``: find the baseline,
  refuse (or, with ``policy.allow_foreign``, annotate) one from another device, judge end to end
  and each gated category, and say what changed under test since the baseline;
- :func:`run_with_confirmation` ``(first, measure_more, baseline_dir, policy)``: the same, and
  when a regression is suspected on fewer than ``1 + policy.confirm_blocks`` blocks, measure
  the missing blocks (fresh runner processes) and judge all of them;
- the verdict as JUnit ``record_property`` pairs: :func:`pytest_sme2.gate.junit.junit_properties`.

The policy (:class:`GatePolicy`, built from option values) is in :mod:`pytest_sme2.gate.policy`:
light enough for every pytest run to build. The rule itself — one benchmark's block levels
against a baseline's sessions, and why it looks as it does — is :mod:`pytest_sme2.gate.levels`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from statistics import median
from typing import Callable, Sequence

import numpy as np

from pytest_sme2.baselines import store as baseline_store
from pytest_sme2 import units
from pytest_sme2.baselines.key import BaselineKey, under_test_of
from pytest_sme2.gate.policy import DEFAULT_THRESHOLD_PCT, GatePolicy
from pytest_sme2.gate.decide import floor_remedy, unresolved
from pytest_sme2.gate.robust import judge_robust
from pytest_sme2.results import BLOCK_PHASES, BlockResult, UnderTest, block_phases, pool_probe
from pytest_sme2.results.under_test import VERSIONED
# The verdict record and its words live with results.json, which stores them.
from pytest_sme2.results.judgement import (CANNOT_TELL, IMPROVEMENT,  # noqa: F401
                                           INSTRUCTIONS, LOAD, MEMORY, NO_CHANGE,
                                           NOT_COMPARED, OK, PREFILL, PREFILL_INSTRUCTIONS,
                                           REGRESSION, TIME, TTFT, Judgement)
from pytest_sme2.gate.levels import judge_levels, not_compared

__all__ = ["GatePolicy", "GateReport", "Judgement", "evaluate", "run_with_confirmation"]

DEFAULT_POLICY = GatePolicy()


def _judge_category(base: baseline_store.Baseline, results: Sequence[BlockResult],
                    category: str, threshold_pct: float) -> Judgement:
    """The same rule on one operator category's mean ms per run, one value per block. A
    category that is not a bottleneck is not gated: a 50% change of 1% of the time is noise in
    a small number, not a regression anyone would act on."""
    # Imported here: the gate reads and writes baseline files without pandas.
    from pytest_sme2.analysis.operators import (  # pandas: only _judge_category() needs it
        BOTTLENECK_PCT)

    shares = [b.get(category, 0.0) / float(np.mean(blk)) for s in base.sessions
              for b, blk in zip(s.categories_ms, s.blocks) if blk]
    if shares and 100 * float(np.median(shares)) < BOTTLENECK_PCT:
        return not_compared(f"{category} is {float(np.median(shares)):.1%} of the baseline's "
                            f"end-to-end time, below the {BOTTLENECK_PCT:g}% a category "
                            "needs to be gated", threshold_pct, category)
    sessions = [[b.get(category, 0.0) for b in s.categories_ms]
                for s in base.sessions if s.categories_ms]
    if not any(sessions):
        return not_compared(f"the baseline records no time for category {category!r}",
                            threshold_pct, category)
    return judge_levels(sessions, [r.categories_ms.get(category, 0.0) for r in results],
                        threshold_pct, category=category)


@dataclass(frozen=True)
class GateReport:
    """Everything the gate said about one benchmark: end to end first, then each gated
    category; ``blocks`` judged, and whether confirmation blocks were measured."""

    judgements: tuple[Judgement, ...]
    blocks: int = 1
    confirmed: bool = False

    @property
    def e2e(self) -> Judgement:
        return self.judgements[0]

    @property
    def categories(self) -> dict[str, Judgement]:
        return {j.category: j for j in self.judgements[1:] if j.category}

    @property
    def instructions(self) -> Judgement | None:
        """The verdict on instruction counts (--sme2-measure instructions), if any."""
        return next((j for j in self.judgements if j.measure == INSTRUCTIONS), None)

    @property
    def startup(self) -> dict[str, Judgement]:
        """The verdicts on load time and peak memory, by measure (LOAD, MEMORY)."""
        return {j.measure: j for j in self.judgements if j.measure in (LOAD, MEMORY)}

    @property
    def phases(self) -> dict[str, Judgement]:
        """An LLM's verdicts on prefill time, time to first token and instructions per
        prefill, by measure."""
        return {j.measure: j for j in self.judgements if j.measure in PHASE_KEYS}

    @property
    def regressions(self) -> list[Judgement]:
        return [j for j in self.judgements if j.regressed]

    def failure(self, policy: GatePolicy) -> str | None:
        """Why this fails under ``policy`` — every regression, a "cannot tell" under
        ``--sme2-on-unresolved fail``, or (never a silent pass) a baseline from another device
        that was not compared — or None. Only an enforced
        policy (``--fail-on-regression``) fails."""
        if not policy.enforced:
            return None
        regressions = [j.reason for j in self.regressions if j.enforced]
        if regressions:
            return "regression against the baseline: " + "; and ".join(regressions)
        unresolved = [_unresolved_line(j) for j in self.judgements
                      if j.unresolved and j.enforced]
        if unresolved and policy.on_unresolved == "fail":
            return ("--sme2-on-unresolved fail: " + "; and ".join(unresolved))
        foreign = list(dict.fromkeys(j.reason for j in self.judgements if j.foreign))
        return "; ".join(foreign) or None

    def record_on(self, block: BlockResult) -> None:
        """Put the verdicts on a block of the benchmark. Every block of a judged benchmark —
        its first block, the one its test got, its confirmation blocks, a comparison side's
        blocks — carries them, so every block has the same keys in results.json:
        ``baseline`` (end to end) and ``baseline_categories`` (by category, ``{}`` when none
        is gated). Reports read them from the first block (``block`` None) or the comparison's
        ``baselines``: one row per benchmark, not per block."""
        block.judgement = self.e2e
        block.category_judgements = dict(self.categories)
        if self.instructions is not None:
            block.instructions_judgement = self.instructions
        if self.startup:
            block.startup_judgements = {STARTUP_KEYS[m]: j for m, j in self.startup.items()}
        if self.phases:
            block.phase_judgements = {PHASE_KEYS[m]: j for m, j in self.phases.items()}

    @classmethod
    def unjudged(cls, reason: str) -> GateReport:
        """The report of a benchmark the gate could not judge (a corrupt baseline file, a
        confirmation run that failed), saying why."""
        return cls((not_compared(reason),), 0)

    @classmethod
    def of_all(cls, reports: Sequence[GateReport]) -> GateReport:
        """Several benchmarks judged in one test (the two sides of a comparison), as one."""
        return cls(tuple(j for r in reports for j in r.judgements),
                   sum(r.blocks for r in reports), any(r.confirmed for r in reports))


def _unresolved_line(j: Judgement) -> str:
    """A "cannot tell" in one short line: the verdict, and what would resolve it (results.json
    and report.md keep the whole reason)."""
    if j.ratio is not None and j.against != "baseline":
        return f"{j.summary}: {unresolved(j.ratio, j.current_blocks, j.threshold_pct)}"
    floor = j.noise_floor_pct or 0.0
    if floor >= j.threshold_pct:
        return f"{j.summary}: {floor_remedy(floor, j.threshold_pct, j.measure)}"
    return f"{j.summary}: {j.threshold_pct:g}% is not resolvable against the stored baseline"


def _category_names(policy: GatePolicy, results: Sequence[BlockResult]) -> list[str]:
    if "all" in policy.categories:
        return sorted({c for r in results for c in r.categories_ms})
    return list(policy.categories)


def evaluate(results: Sequence[BlockResult], baseline_dir: Path | None,
             policy: GatePolicy = DEFAULT_POLICY, exclude_session: str | None = None
             ) -> GateReport:
    """Judge one benchmark's blocks (``results``: one per runner process, one key) against
    the baseline in ``baseline_dir``. A corrupt baseline file raises BaselineError: the caller
    fails with its message, never passes."""
    names = _category_names(policy, results)
    pct = policy.threshold_pct
    extra = tuple(_judge_instructions(results, baseline_dir, policy, exclude_session))

    def every(reason: str, foreign: bool = False) -> GateReport:
        return GateReport(tuple(replace(not_compared(reason, pct, c), foreign=foreign)
                                for c in [None, *names]) + extra, len(results))

    if not results:
        return every("nothing measured to compare")
    if baseline_dir is None:
        return every("no baseline folder configured")
    key = BaselineKey.from_result(results[0])
    found = baseline_store.find(baseline_dir, key)
    if found.baseline is None:
        return every(f"no baseline {key.filename} in {baseline_dir}; record one with "
                     "--save-baseline")
    base = found.baseline.excluding(exclude_session)
    if found.foreign_reason and not policy.allow_foreign:
        return every(f"not compared: {found.foreign_reason} (compare anyway with "
                     "--allow-foreign-baseline, or re-record with --save-baseline)", True)
    # End to end: today's rule on the sessions left after screening out one that disagrees
    # with the rest (gate_robust: one slow session must not blind the gate).
    verdicts = [judge_robust(judge_levels, [s.block_medians for s in base.sessions],
                             [float(median(r.e2e_ms)) for r in results if r.e2e_ms], pct)]
    verdicts += [_judge_category(base, results, c, pct) for c in names]
    verdicts += _judge_startup(base, results, policy)
    verdicts += _judge_phases(base, results, pct)
    now = under_test_of(results[0])
    changed = tuple(now.changes_since(base.under_test)) if base.under_test is not None else ()
    if identical(now, base.under_test):
        speed = machine_speed(base, results)
        verdicts = [by_identity(v, now, speed) for v in verdicts]
    return GateReport(tuple(_annotated(v, changed, found.foreign_reason) for v in verdicts)
                      + extra, len(results))


def identical(now: UnderTest, old: UnderTest | None) -> bool:
    """The program, its runner and runtime are the baseline's newest session's, byte for byte:
    the program's sha256, the runner's build labels, the torch/executorch/torchao versions and
    the timing mode. The model's source may differ (a comment): its program did not."""
    return (old is not None and bool(now.program) and now.program == old.program
            and now.runner_labels == old.runner_labels and now.timing == old.timing
            and all(now.versions.get(p) == old.versions.get(p) for p in VERSIONED))


def machine_speed(base: baseline_store.Baseline, results: Sequence[BlockResult]) -> str:
    """What the probe says of the machine's speed now against the baseline's sessions:
    ``the probe ran 1.52x slower than when the baseline was recorded``, or ""."""
    then = [v for s in base.sessions for v in s.probe_us]
    now = pool_probe(results)
    if not then or now is None:
        return ""
    ratio = now / float(median(then))
    if ratio >= 1:
        return f"the machine-state probe ran {ratio:.2f}x slower than when it was recorded"
    return f"the machine-state probe ran {1 / ratio:.2f}x faster than when it was recorded"


def by_identity(j: Judgement, now: UnderTest, speed: str) -> Judgement:
    """A time verdict on a program, runner and runtime that are the baseline's: "no change"
    by identity — what the time shows is the machine, not the code — saying what it read
    and, where the probe can tell, how the machine's speed moved."""
    if j.status not in (REGRESSION, IMPROVEMENT, CANNOT_TELL) or j.measure == INSTRUCTIONS:
        return j
    read = str(j.ratio) if j.ratio is not None else j.status
    probe = f"; {speed}" if speed else ""
    return replace(j, status=NO_CHANGE, reason=(
        f"no change by identity: the program ({(now.program or '')[:12]}), its runner and "
        f"runtime are the baseline's, byte for byte, so the time it read ({read}, "
        f"{j.status.replace('_', ' ')} by the stored rule) is this machine's speed, not the "
        f"code's{probe}; the stored rule said: {j.reason}"))


STARTUP_KEYS = {LOAD: "load", MEMORY: "memory"}   # results.json's baseline_startup keys
PHASE_KEYS = {PREFILL: "prefill", TTFT: "ttft",                  # results.json's
              PREFILL_INSTRUCTIONS: "prefill_instructions"}      # baseline_phases keys


def _judge_phases(base: baseline_store.Baseline, results: Sequence[BlockResult],
                  threshold_pct: float) -> list[Judgement]:
    """An LLM's prefill time and time to first token, one value per block (its median over
    its generations), by the same rule as end to end (its decode steps); nothing for blocks
    that are not generations."""
    out = []
    for key, current in block_phases(results).items():
        measure, attr = BLOCK_PHASES[key], f"{key}_ms"     # the baseline's prefill_ms, ttft_ms
        sessions = [getattr(s, attr) for s in base.sessions if getattr(s, attr)]
        if not sessions:
            out.append(replace(not_compared(f"the baseline records no {measure}; record it "
                                            "again with --save-baseline", threshold_pct),
                               measure=measure))
        else:
            out.append(judge_levels(sessions, current, threshold_pct, measure=measure))
    return out


def _judge_startup(base: baseline_store.Baseline, results: Sequence[BlockResult],
                   policy: GatePolicy) -> list[Judgement]:
    """Cold load time and peak memory, one value per cold process, by the same rule; nothing
    when this benchmark measured neither (a runner that reports no memory, a document from
    before them). ``policy``'s threshold "off" (None) judges without ever failing."""
    out = []
    for measure, attr, threshold in ((LOAD, "load_ms", policy.load_threshold_pct),
                                     (MEMORY, "peak_rss_kb", policy.memory_threshold_pct)):
        current = [float(v) for r in results if r.startup
                   for p in r.startup.processes if (v := getattr(p, attr)) is not None]
        if not current:
            continue
        pct = DEFAULT_THRESHOLD_PCT if threshold is None else threshold
        sessions = [getattr(s, attr) for s in base.sessions if getattr(s, attr)]
        if not sessions:
            j = replace(not_compared(f"the baseline records no {measure}; record it again "
                                     "with --save-baseline", pct), measure=measure)
        else:
            j = judge_levels(sessions, current, pct, measure=measure)
        out.append(replace(j, enforced=threshold is not None))
    return out


def _judge_instructions(results: Sequence[BlockResult], baseline_dir: Path | None,
                        policy: GatePolicy, exclude_session: str | None) -> list[Judgement]:
    """The rule on instructions per execute (--sme2-measure instructions), when this benchmark
    has them: against the baseline file keyed ``measure="instructions"`` (one value per
    session), else ``not_compared`` saying why; nothing when nothing was counted. An LLM's
    count is per decode token, and its instructions per prefill are judged beside it
    (PREFILL_INSTRUCTIONS)."""
    counts = [c for r in results if (c := r.instructions_per_execute) is not None]
    if not counts:
        return []
    pct = policy.threshold_pct
    prefills = [float(r.instructions.prefill) for r in results
                if r.instructions is not None and r.instructions.prefill]
    measures = [INSTRUCTIONS] + ([PREFILL_INSTRUCTIONS] if prefills else [])

    def unjudged(reason: str, foreign: bool = False) -> list[Judgement]:
        return [replace(not_compared(reason, pct), measure=m, foreign=foreign)
                for m in measures]

    if baseline_dir is None:
        return unjudged("no baseline folder configured")
    key = BaselineKey.from_result(results[0], measure=INSTRUCTIONS)
    found = baseline_store.find(baseline_dir, key)
    if found.baseline is None:
        return unjudged(f"no instruction baseline {key.filename} in {baseline_dir}; record one "
                        "with --sme2-measure instructions --save-baseline")
    if found.baseline.key.measure != INSTRUCTIONS:
        name = found.baseline.path.name if found.baseline.path else "the baseline"
        return unjudged(f"{name} was measured in {found.baseline.key.measure} only, not in "
                        "instructions; record instruction counts with --sme2-measure "
                        "instructions --save-baseline")
    if found.foreign_reason and not policy.allow_foreign:
        return unjudged(f"not compared: {found.foreign_reason} (compare anyway with "
                        "--allow-foreign-baseline, or re-record with --save-baseline)", True)
    base = found.baseline.excluding(exclude_session)
    verdicts = [judge_levels([s.block_medians for s in base.sessions], counts, pct,
                             measure=INSTRUCTIONS)]
    if prefills:   # an LLM: the count is its decode's, per token
        verdicts[0] = replace(verdicts[0], reason=f"decode (per token) {verdicts[0].reason}")
        sessions = [s.prefill_instructions for s in base.sessions if s.prefill_instructions]
        verdicts.append(
            judge_levels(sessions, prefills, pct, measure=PREFILL_INSTRUCTIONS) if sessions else
            replace(not_compared("the instruction baseline records no prefill; record it "
                                 "again with --sme2-measure instructions --save-baseline", pct),
                    measure=PREFILL_INSTRUCTIONS))
    changed = tuple(under_test_of(results[0]).changes_since(base.under_test)) \
        if base.under_test is not None else ()
    return [_annotated(v, changed, found.foreign_reason) for v in verdicts]


def _annotated(j: Judgement, changed: tuple[str, ...], foreign: str | None) -> Judgement:
    if j.status == NOT_COMPARED:
        return j
    reason = j.reason
    if changed:
        reason += "; changed since baseline: " + ", ".join(changed)
    if foreign:
        reason += f" [foreign baseline allowed: {foreign}]"
    return replace(j, reason=reason, changed_since_baseline=changed)


def run_with_confirmation(first: Sequence[BlockResult],
                          measure_more: Callable[[int], BlockResult] | None,
                          baseline_dir: Path | None, policy: GatePolicy = DEFAULT_POLICY,
                          progress: Callable[[str], None] | None = None,
                          exclude_session: str | None = None
                          ) -> tuple[list[BlockResult], GateReport]:
    """:func:`evaluate` ``first``; when it calls a regression (end to end or a gated category)
    on fewer than ``1 + policy.confirm_blocks`` blocks, measure the missing blocks right away
    with ``measure_more(index)`` — ``index`` counts the blocks so far — and judge all blocks
    together. One process in a bad state (on a shared VM, a 2-thread run that starts without
    its parallelism) is outvoted by the median of the blocks; a real regression is in every
    block. ``measure_more`` reports each block itself as it comes (an exception leaves the
    blocks measured before with the caller); None measures nothing."""
    blocks = list(first)
    report = evaluate(blocks, baseline_dir, policy, exclude_session)
    missing = 1 + policy.confirm_blocks - len(blocks)
    # Instruction counts do not drift between processes: more time blocks cannot confirm them.
    timed = [j for j in report.regressions if j.measure == TIME]
    if not timed or measure_more is None or missing <= 0:
        return blocks, report
    if progress:
        r = blocks[0]
        what = ", ".join(f"{j.category or 'end to end'} {units.ratio(j.ratio.point)}"
                         for j in timed if j.ratio)
        progress(f"{r.model} {r.dtype} t{r.threads} {r.runner_name}: a regression is "
                 f"suspected ({what}); measuring {missing} more block(s) to confirm it")
    for _ in range(missing):
        blocks.append(measure_more(len(blocks)))
    report = evaluate(blocks, baseline_dir, policy, exclude_session)
    return blocks, replace(report, confirmed=True)
