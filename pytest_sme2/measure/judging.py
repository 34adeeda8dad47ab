"""The gate's half of a benchmark: its blocks judged against the stored baseline, a suspected
regression confirmed, and ``--sme2-gate-mode ab``'s pairs against the base program.

The stored gate, when its verdict is "cannot tell" or a regression, takes interleaved pairs
against the base program kept beside the baseline (:mod:`pytest_sme2.measure.pairs`), or more
blocks where only the stored sessions are; the A/B gate takes the pairs from the start. The
verdicts are :mod:`pytest_sme2.gate.decide`'s: pairs double until told, up to
``--sme2-max-pairs`` and the time budget.

:class:`Judging` belongs to the benchmark loop (:mod:`pytest_sme2.measure.benchmark`), which
gives it how to measure one more block and where to say what it does."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from pytest_sme2.baselines import programs as base_programs
from pytest_sme2.baselines import store as baseline_store
from pytest_sme2.baselines.key import BaselineKey, under_test_of
from pytest_sme2.errors import Sme2Error
from pytest_sme2.gate import ab as gate_ab
from pytest_sme2.gate import rule as gate
from pytest_sme2.gate.decide import PairBudget, floor_remedy, until_told
from pytest_sme2.gate.policy import GatePolicy
from pytest_sme2.gate.rule import GateReport
from pytest_sme2.measure.block import BenchmarkRun
from pytest_sme2.measure.config import Sme2Config
from pytest_sme2.gate.ab import block_value
from pytest_sme2.measure.pairs import CANDIDATE, Paired, PairPlan, take_pairs
from pytest_sme2.measure.precision import Goal, Precision
from pytest_sme2.programs.spec import AS_EXPORTED
from pytest_sme2.results import BlockResult, Judgement

AGAINST_RUNNER = "the same program re-measured in this session on runner"

# One more block of a run on a runner: (run, runner name, export again?) -> its result.
MeasureBlock = Callable[[BenchmarkRun, str, bool], BlockResult]
# A line about a run on a runner: (run, runner or side name, text).
SayAbout = Callable[[BenchmarkRun, str, str], None]


def pair_budget(policy: GatePolicy) -> PairBudget:
    """How far a "cannot tell" may measure: --sme2-max-pairs, --sme2-precision-budget."""
    return PairBudget(policy.max_pairs, policy.precision_budget_s)


def pair_plan(policy: GatePolicy, first: int) -> PairPlan:
    """The policy's pairs: ``first`` at least, then until told (not with
    ``--sme2-confirm-blocks 0``) or, with ``--sme2-precision``, until precise."""
    return PairPlan(first=first, budget=pair_budget(policy),
                    until_told=policy.confirm_blocks > 0, precision=policy.precision_pct,
                    precision_budget_s=policy.precision_budget_s)


@dataclass(frozen=True)
class BaseProgram:
    """What the A/B gate re-measures: a program (None: the candidate's own) with a runner;
    ``missing`` says why there is nothing to re-measure."""

    pte: str | None
    runner: str
    missing: str = ""


@dataclass(frozen=True)
class LoopHands:
    """What the benchmark loop lends its judging: the session's configuration, how to
    measure one more block, where to say a line about a run, where to tell the count of
    blocks so far, and where the gate's own lines go."""

    config: Sme2Config
    measure: MeasureBlock
    say: SayAbout
    tell: Callable[[int], None]
    progress: Callable[[str], None] | None = None


@dataclass
class Judging:
    """One runner's blocks of one benchmark under the gate's ``policy``: ``blocks`` is the
    loop's list, which the blocks measured here join (``side_label``: named as a comparison's
    blocks, ``test[runner#3]``)."""

    hands: LoopHands
    run: BenchmarkRun
    runner: str
    blocks: list[BlockResult]
    policy: GatePolicy
    side_label: bool = False

    def say(self, text: str, who: str | None = None) -> None:
        self.hands.say(self.run, who or self.runner, text)

    @property
    def side(self) -> list[BlockResult]:
        """This runner's blocks (a comparison's ``blocks`` hold both sides')."""
        return [r for r in self.blocks if r.runner_name == self.runner]

    def more_block(self, block: int) -> BlockResult:
        """One more block of the benchmark under test (``block``: its index), fresh process,
        kept in ``blocks`` (confirmation, precision and A/B blocks alike)."""
        run, runner, blocks = self.run, self.runner, self.blocks
        label = f"{run.label}[{runner}#{block}]" if self.side_label else run.label
        blocks.append(self.hands.measure(replace(run, label=label, block=block,
                                                 benchmark=run.label), runner, False))
        self.hands.tell(len(blocks))
        return blocks[-1]

    def judge(self, quiet: bool = False) -> GateReport:
        """The gate on the runner's blocks; confirmation blocks, measured when a regression
        is suspected, join ``blocks``. A line says what changed under test since the
        baseline (``quiet``: the caller says more of it, once)."""
        report = gate.run_with_confirmation(self.side, self.more_block,
                                            self.hands.config.baseline_dir, self.policy,
                                            self.hands.progress)[1]
        if report.e2e.changed_since_baseline and not quiet:   # what changed, and its cost
            self.say(report.e2e.summary)
        return report

    def until_precise(self) -> None:
        """--sme2-precision without a base: blocks until the benchmark's level (its typical
        block median over processes) is within ±PCT%, or the budget is spent; the outcome on
        each block (``precision`` in results.json) and, when not reached, one line."""
        blocks, policy = self.blocks, self.policy
        goal = Goal(policy.precision_pct, policy.precision_budget_s).start()
        while goal.more(tuple(map(block_value, blocks))):
            self.more_block(len(blocks))
        self.record_precision(goal.outcome(tuple(map(block_value, blocks))))

    def record_precision(self, outcome: Precision, who: str | None = None) -> None:
        """``outcome`` on every block; a line when not reached (``who``: whom it names)."""
        for r in self.blocks:
            r.precision = outcome.record()
        if not outcome.reached:
            self.say(f"--sme2-precision {outcome.target_pct:g}% not reached: {outcome.why}",
                     who)

    def ab_base(self) -> BaseProgram:
        """The base program: the one the baseline's newest session measured, kept by hash
        beside the baseline (pytest_sme2.baselines.programs); and --sme2-ab-base-runner. Neither
        differing from what is under test leaves nothing to compare."""
        config, runner, first = self.hands.config, self.runner, self.side[0]
        base_runner = config.gate.base_runner or runner
        folder = config.baseline_dir
        if folder is None:
            return BaseProgram(None, base_runner, "" if base_runner != runner
                               else "no baseline folder configured")
        found = baseline_store.find(folder, BaselineKey.from_result(first))
        under_test = found.baseline.under_test if found.baseline is not None else None
        if found.baseline is None:
            why = f"no baseline in {folder} to take the base program from"
        elif under_test is None or not under_test.program:
            why = "the baseline's sessions do not record which program they measured"
        else:
            program = base_programs.find(folder, under_test.program)
            why = program.missing
            if program.path is not None:
                if under_test_of(first).program != under_test.program:
                    return BaseProgram(str(program.path), base_runner)
                why = "the program under test is the baseline's"
        if base_runner != runner:
            return BaseProgram(None, base_runner)  # a runtime change: one program, two runners
        return BaseProgram(None, base_runner, why)

    def judge_stored(self) -> GateReport:
        """The stored gate; on "cannot tell" or a regression, pairs against the kept base
        program (the A/B rule decides: a process state the stored sessions never showed cannot
        fail CI by itself), else, on "cannot tell", more blocks of the candidate while the
        baseline's noise floor leaves the threshold resolvable; the verdict says which."""
        blocks, policy = self.blocks, self.policy
        report = self.judge(quiet=True)
        doubt = report.e2e.unresolved or report.e2e.regressed
        if not doubt or policy.confirm_blocks <= 0 or blocks[0].emulated:
            if report.e2e.changed_since_baseline:     # one line: what changed, its verdict
                self.say(report.e2e.summary)
            return report                   # emulated times say nothing: no pairs for them
        base = self.ab_base()
        if not base.missing:
            self.say(f"{report.e2e.summary}: re-measuring the base program in interleaved "
                     "pairs until told")
            return self.judge_ab(base, fresh=True)
        if report.e2e.changed_since_baseline:
            self.say(report.e2e.summary)
        if report.e2e.regressed:
            return report
        floor = report.e2e.noise_floor_pct or 0.0
        if floor >= policy.threshold_pct:      # more blocks cannot narrow the sessions' drift
            e2e = replace(report.e2e, reason=f"{report.e2e.reason}; {base.missing}; "
                                             f"{floor_remedy(floor, policy.threshold_pct)}")
            return replace(report, judgements=(e2e, *report.judgements[1:]))
        told = until_told(len(self.side), lambda: self.more_block(len(self.side)),
                          lambda: self.judge().e2e, pair_budget(policy))
        report = self.judge()
        stopped = f"; stopped by {told.spent}" if told.spent else ""
        e2e = replace(report.e2e, reason=report.e2e.reason + stopped)
        return replace(report, judgements=(e2e, *report.judgements[1:]), confirmed=True)

    def judge_ab(self, base: BaseProgram | None = None, fresh: bool = False) -> GateReport:
        """--sme2-gate-mode ab: the base re-measured in interleaved pairs with the candidate
        (:meth:`measure_pairs`), judged by the paired rule
        (:func:`pytest_sme2.gate.ab.judge_ab`). Categories, load and memory are judged
        against the stored baseline on all the candidate's blocks. With nothing to
        re-measure (no stored program, the same program and runner), the stored rule judges,
        and its verdict says why. ``fresh``: pairs of new candidate blocks only (the stored
        gate's blocks already measured stay out of the pairs)."""
        runner, policy = self.runner, self.policy
        base = base or self.ab_base()
        if base.missing:
            return self.stored_instead(base.missing)
        took = self.measure_pairs(base, fresh)
        # An LLM's prefill and TTFT by the same pairs (its decode: the blocks' own e2e).
        phases = gate_ab.judge_phases(took.base, took.candidate, policy.threshold_pct)
        verdict = gate_ab.judge_ab(took.pairs, policy.threshold_pct)
        verdict = replace(verdict, reason=verdict.reason + took.stopped)
        if base.runner != runner:           # say what the pairs compared, in the summary too
            what = f"{base.pte} on runner {base.runner}" if base.pte else \
                f"the same program on runner {base.runner}"
            against = f"{AGAINST_RUNNER} {base.runner}" if not base.pte else \
                f"{gate_ab.AGAINST} on runner {base.runner}"
            verdict, *phases = (replace(j, reason=f"{j.reason}; base: {what}, candidate on "
                                                  f"runner {runner}", against=against)
                                for j in (verdict, *phases))
        if took.precision is not None:
            self.record_precision(took.precision)
        stored = gate.evaluate(self.side, self.hands.config.baseline_dir, policy)
        verdict = replace(verdict, changed_since_baseline=stored.e2e.changed_since_baseline)
        self.say(verdict.summary)
        paired = {j.measure for j in phases}
        return replace(stored, judgements=(verdict, *(j for j in stored.judgements[1:]
                                                      if j.measure not in paired), *phases))

    def stored_instead(self, missing: str) -> GateReport:
        """The stored rule (with --sme2-precision's blocks), its verdict saying why not
        A/B."""
        if self.policy.precision_pct is not None:
            self.until_precise()
        report = self.judge()
        note = f"A/B gate not run: {missing}; judged against the stored sessions"
        self.say(note)
        e2e = replace(report.e2e, reason=f"{report.e2e.reason}; {note}")
        return replace(report, judgements=(e2e, *report.judgements[1:]))

    def measure_pairs(self, base: BaseProgram, fresh: bool = False) -> Paired:
        """Pairs of a candidate block and a base block, the candidate first in pair 0: the
        benchmark's first block begins it (``fresh``: a new candidate block does), then ABBA,
        as :func:`pytest_sme2.measure.pairs.take_pairs` takes them (``--sme2-precision``: 2
        pairs at least, until precise). The candidate's blocks join ``blocks``; the base's
        are judged, never recorded."""
        run, blocks, policy = self.run, self.blocks, self.policy
        first = len(blocks) if fresh else 0
        # Its lines are the verdict's: the base program's own import says nothing of its own.
        base_run = replace(run, model=base.pte or run.model,
                           dtype=AS_EXPORTED if base.pte else run.dtype, progress=None)

        def measure_base(i: int) -> BlockResult:
            try:
                block = replace(base_run, label=f"{run.label}[base#{i}]", block=i + 1,
                                benchmark=run.label)
                return self.hands.measure(block, base.runner, False)
            except Sme2Error as e:      # say it was the base, not the program under test
                what = f"base program {base.pte}" if base.pte else "base (the same program)"
                raise Sme2Error(f"A/B gate: {what} on runner {base.runner}, block {i}: "
                                f"{e}") from e

        def judge(paired: Paired) -> Judgement:
            """End to end, and an LLM's prefill and TTFT: pairs go on while any cannot tell."""
            verdicts = [gate_ab.judge_ab(paired.pairs, policy.threshold_pct),
                        *gate_ab.judge_phases(paired.base, paired.candidate,
                                              policy.threshold_pct)]
            return next((j for j in verdicts if j.unresolved), verdicts[0])

        plan = replace(pair_plan(policy, 2 if policy.precision_pct is not None
                                 else max(2, self.hands.config.blocks)), lead=CANDIDATE)
        return take_pairs(measure_base, lambda i: self.more_block(len(blocks)), judge, plan,
                          Paired(candidate=blocks[first:]))
