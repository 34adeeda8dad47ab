"""The gate's pairs, as a benchmark takes them: the A/B gate (``--sme2-gate-mode ab``) re-measures
the base program in interleaved pairs with the candidate, and the stored gate, when its verdict
is "cannot tell", does the same where a base program is kept, or takes more blocks where only
the stored sessions are (:mod:`pytest_sme2.gate.decide`: pairs double until told, up to
``--sme2-max-pairs`` and the time budget).

:class:`PairedGate` is a part of :class:`pytest_sme2.measure.benchmark.BenchmarkLoop`, kept
apart because it is the gate's half of the loop: it uses the loop's ``session``,
``measure_block``, ``_more_blocks``, ``_judge``, ``_until_precise``, ``_record_precision`` and
``_say``."""

from __future__ import annotations

from dataclasses import dataclass, replace
from statistics import median
from typing import TYPE_CHECKING

from pytest_sme2.baselines import programs as base_programs
from pytest_sme2.baselines import store as baseline_store
from pytest_sme2.baselines.key import BaselineKey, under_test_of
from pytest_sme2.errors import Sme2Error
from pytest_sme2.gate import ab as gate_ab
from pytest_sme2.gate import rule as gate
from pytest_sme2.gate.ab import Pairs
from pytest_sme2.gate.decide import PairBudget, Told, until_told
from pytest_sme2.gate.rule import GateReport
from pytest_sme2.measure.block import BenchmarkRun
from pytest_sme2.measure.precision import Goal, Precision
from pytest_sme2.programs.spec import AS_EXPORTED

if TYPE_CHECKING:
    from pytest_sme2.gate.policy import GatePolicy
    from pytest_sme2.results import BlockResult

AGAINST_RUNNER = "the same program re-measured in this session on runner"


def block_value(result: BlockResult) -> float:
    """A block's one number for precision and the A/B pairs: its end-to-end median."""
    return float(median(result.e2e_ms))


def pair_budget(policy: GatePolicy) -> PairBudget:
    """How far a "cannot tell" may measure: --sme2-max-pairs, --sme2-precision-budget."""
    return PairBudget(policy.max_pairs, policy.precision_budget_s)


@dataclass(frozen=True)
class BaseProgram:
    """What the A/B gate re-measures: a program (None: the candidate's own) with a runner;
    ``missing`` says why there is nothing to re-measure."""

    pte: str | None
    runner: str
    missing: str = ""


@dataclass
class Paired:
    """What :meth:`PairedGate._measure_pairs` took: the pairs, --sme2-precision's outcome
    (None when not asked), the base's blocks, the candidate's blocks in the pairs, and how
    the adaptive pairs ended (None: not taken)."""

    pairs: Pairs
    precision: Precision | None
    base_blocks: list[BlockResult]
    candidate_blocks: list[BlockResult]
    told: Told | None = None


def _stopped(told: Told | None) -> str:
    return f"; stopped by {told.spent}" if told is not None and told.spent else ""


class PairedGate:
    """The pairs half of the benchmark loop (see the module docstring)."""

    def _ab_base(self, first: BlockResult, runner: str) -> BaseProgram:
        """The base program: the one the baseline's newest session measured, kept by hash
        beside the baseline (pytest_sme2.baselines.programs); and --sme2-ab-base-runner. Neither
        differing from what is under test leaves nothing to compare."""
        config = self.session.config
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

    def _judge_stored(self, run: BenchmarkRun, runner: str, out) -> GateReport:
        """The stored gate; on "cannot tell" or a regression, pairs against the kept base
        program (the A/B rule decides: a process state the stored sessions never showed cannot
        fail CI by itself), else, on "cannot tell", more blocks of the candidate while the
        baseline's noise floor leaves the threshold resolvable; the verdict says which."""
        report = self._judge(run, runner, out)
        policy = out.policy
        doubt = report.e2e.unresolved or report.e2e.regressed
        if not doubt or policy.confirm_blocks <= 0 or out.blocks[0].emulated:
            return report                   # emulated times say nothing: no pairs for them
        base = self._ab_base(out.blocks[0], runner)
        if not base.missing:
            self._say(run, runner, f"{report.e2e.summary}: re-measuring the base program in "
                                   "interleaved pairs until told")
            return self._judge_ab(run, runner, out, base, fresh=True)
        if report.e2e.regressed:
            return report
        floor = report.e2e.noise_floor_pct or 0.0
        if floor >= policy.threshold_pct:      # more blocks cannot narrow the sessions' drift
            return report
        more = self._more_blocks(run, runner, out)
        told = until_told(len(out.blocks), lambda: more(len(out.blocks)),
                          lambda: self._judge(run, runner, out).e2e, pair_budget(policy))
        report = self._judge(run, runner, out)
        e2e = replace(report.e2e, reason=report.e2e.reason + _stopped(told))
        return replace(report, judgements=(e2e, *report.judgements[1:]), confirmed=True)

    def _judge_ab(self, run: BenchmarkRun, runner: str, out, base: BaseProgram | None = None,
                  fresh: bool = False) -> GateReport:
        """--sme2-gate-mode ab: the base re-measured in interleaved pairs with the candidate
        (:meth:`_measure_pairs`), judged by the paired rule
        (:func:`pytest_sme2.gate.ab.judge_ab`). Categories, load and memory are judged
        against the stored baseline on all the candidate's blocks. With nothing to
        re-measure (no stored program, the same program and runner), the stored rule judges,
        and its verdict says why. ``fresh``: pairs of new candidate blocks only (the stored
        gate's blocks already measured stay out of the pairs)."""
        policy = out.policy
        base = base or self._ab_base(out.blocks[0], runner)
        if base.missing:
            return self._stored_instead(run, runner, out, base.missing)
        took = self._measure_pairs(run, runner, base, out, fresh)
        # An LLM's prefill and TTFT by the same pairs (its decode: the blocks' own e2e).
        phases = gate_ab.judge_phases(took.base_blocks, took.candidate_blocks,
                                      policy.threshold_pct)
        verdict = gate_ab.judge_ab(took.pairs, policy.threshold_pct)
        verdict = replace(verdict, reason=verdict.reason + _stopped(took.told))
        if base.runner != runner:           # say what the pairs compared, in the summary too
            what = f"{base.pte} on runner {base.runner}" if base.pte else \
                f"the same program on runner {base.runner}"
            against = f"{AGAINST_RUNNER} {base.runner}" if not base.pte else \
                f"{gate_ab.AGAINST} on runner {base.runner}"
            verdict, *phases = (replace(j, reason=f"{j.reason}; base: {what}, candidate on "
                                                  f"runner {runner}", against=against)
                                for j in (verdict, *phases))
        if took.precision is not None:
            self._record_precision(took.precision, out.blocks, run, runner)
        stored = gate.evaluate(out.blocks, self.session.config.baseline_dir, policy)
        verdict = replace(verdict, changed_since_baseline=stored.e2e.changed_since_baseline)
        self._say(run, runner, verdict.summary)
        paired = {j.measure for j in phases}
        return replace(stored, judgements=(verdict, *(j for j in stored.judgements[1:]
                                                      if j.measure not in paired), *phases))

    def _stored_instead(self, run: BenchmarkRun, runner: str, out, missing: str) -> GateReport:
        """The stored rule (with --sme2-precision's blocks), its verdict saying why not
        A/B."""
        if out.policy.precision_pct is not None:
            self._until_precise(run, runner, out)
        report = self._judge(run, runner, out)
        note = f"A/B gate not run: {missing}; judged against the stored sessions"
        self._say(run, runner, note)
        e2e = replace(report.e2e, reason=f"{report.e2e.reason}; {note}")
        return replace(report, judgements=(e2e, *report.judgements[1:]))

    def _measure_pairs(self, run: BenchmarkRun, runner: str, base: BaseProgram, out,
                       fresh: bool = False) -> Paired:
        """Pair 0 is the benchmark's first block and a base block (``fresh``: a new
        candidate block and a base block); then ABBA order, up to ``--sme2-blocks`` pairs;
        while the verdict is "cannot tell", pairs double (:func:`until_told`);
        --sme2-precision takes them until precise (2 at least) instead. The candidate's
        blocks go to ``out.blocks``; the base's are judged, never recorded."""
        policy = out.policy
        candidate = self._more_blocks(run, runner, out)
        first = len(out.blocks) if fresh else 0
        base_run = replace(run, model=base.pte or run.model,
                           dtype=AS_EXPORTED if base.pte else run.dtype)
        base_blocks: list[BlockResult] = []

        def measure_base(i: int) -> None:
            try:
                result = self.measure_block(
                    replace(base_run, label=f"{run.label}[base#{i}]", block=i + 1),
                    base.runner, export_again=False)
            except Sme2Error as e:      # say it was the base, not the program under test
                what = f"base program {base.pte}" if base.pte else "base (the same program)"
                raise Sme2Error(f"A/B gate: {what} on runner {base.runner}, block {i}: "
                                f"{e}") from e
            base_blocks.append(result)

        def pairs() -> Pairs:
            return Pairs(tuple(map(block_value, base_blocks)),
                         tuple(block_value(r) for r in out.blocks[first:]))

        def one_pair() -> None:
            i = len(base_blocks)
            if i % 2:                                # ABBA: B A, A B, B A ...
                measure_base(i)
                candidate(len(out.blocks))
            else:
                candidate(len(out.blocks))
                measure_base(i)

        def took(precision: Precision | None = None, told: Told | None = None) -> Paired:
            return Paired(pairs(), precision, base_blocks, out.blocks[first:], told)

        if not fresh:
            measure_base(0)
        if policy.precision_pct is not None:
            goal = Goal(policy.precision_pct, policy.precision_budget_s).start()
            while len(base_blocks) < 2 or goal.more(pairs()):   # a verdict needs 2 pairs
                one_pair()
            return took(goal.outcome(pairs()))
        while len(base_blocks) < max(2, self.session.config.blocks):
            one_pair()
        if policy.confirm_blocks <= 0 or out.blocks[0].emulated:
            return took()
        def judge():
            """End to end, and an LLM's prefill and TTFT: pairs go on while any cannot tell."""
            verdicts = [gate_ab.judge_ab(pairs(), policy.threshold_pct),
                        *gate_ab.judge_phases(base_blocks, out.blocks[first:],
                                              policy.threshold_pct)]
            return next((j for j in verdicts if j.unresolved), verdicts[0])

        told = until_told(len(base_blocks), one_pair, judge, pair_budget(policy))
        return took(told=told)
