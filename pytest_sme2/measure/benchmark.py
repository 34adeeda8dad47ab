"""A benchmark as a session runs it, as library code: measure → suspect → confirm → judge →
record. The ``sme2_bench`` and ``sme2_compare`` fixtures call :func:`benchmark` and
:func:`compare` and only turn the outcome into pytest's terms (a failure, JUnit properties);
without pytest::

    from pytest_sme2.measure.benchmark import benchmark
    from pytest_sme2.measure.config import Sme2Config
    from pytest_sme2.report.outputs import write_reports
    from pytest_sme2.measure.session import BenchSession

    session = BenchSession(Sme2Config())
    try:
        done = benchmark(session, "toy_cnn", dtype="fp32", threads=1)
        print(done.result.e2e.median_ms, done.report.e2e.summary)
        write_reports(session)                # results.json and report.md
    finally:
        session.close()

Every exit records what was measured (a failed run, a corrupt baseline, an interrupt): each
block gets the verdicts on its benchmark — all its blocks judged together — or a
``not_compared`` verdict saying why there are none, so every block of results.json has the same
keys. Where the blocks go is the caller's :class:`Recorder`: into the session by default,
onto the test report in a pytest session (results travel to the xdist controller there).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Callable, Protocol

from pytest_sme2.gate import rule as gate
from pytest_sme2.baselines.key import under_test_of
from pytest_sme2.errors import Sme2Error
from pytest_sme2.gate.rule import GateReport
from pytest_sme2.gate.ab import Pairs
from pytest_sme2.gate.decide import Doubling
from pytest_sme2.measure.block import BenchmarkRun, Interleaving, run_comparison
from pytest_sme2.measure.matrix import Case
from pytest_sme2.measure.comparison import comparison_judgement
from pytest_sme2.measure.paired_gate import (AGAINST_RUNNER, BaseProgram,  # noqa: F401
                                             PairedGate, block_value, pair_budget)
from pytest_sme2.measure.precision import Goal, Precision
from pytest_sme2.stats import DEFAULT_MARGIN, paired_ratio
from pytest_sme2.programs.spec import AS_EXPORTED, is_pte
from pytest_sme2.results.generation import Generation

if TYPE_CHECKING:
    from pytest_sme2.gate.policy import GatePolicy
    from pytest_sme2.measure.comparison import Comparison
    from pytest_sme2.measure.session import BenchSession
    from pytest_sme2.results import BlockResult

Say = Callable[[str], None]
# After each block: blocks measured so far, and the planned total when known (a comparison).
BlockDone = Callable[[int, "int | None"], None]


class Recorder(Protocol):
    """Where a benchmark's judged blocks, and a comparison, are kept."""

    def block(self, result: BlockResult) -> None: ...

    def comparison(self, comparison: Comparison) -> None: ...


@dataclass
class SessionRecorder:
    """The library's default: into the session, which writes results.json after each."""

    session: BenchSession

    def block(self, result: BlockResult) -> None:
        self.session.add(result)

    def comparison(self, comparison: Comparison) -> None:
        self.session.add_comparison(comparison.record())


@dataclass
class Benchmarked:
    """What one benchmark (or one comparison) gave: every block in the order measured
    (confirmation blocks included), the gate's report per runner, the comparison, and the
    error that stopped it (then every report says ``not judged``)."""

    policy: GatePolicy
    blocks: list[BlockResult] = field(default_factory=list)
    reports: dict[str, GateReport] = field(default_factory=dict)   # by runner name
    comparison: Comparison | None = None
    error: Sme2Error | None = None

    @property
    def result(self) -> BlockResult:
        """The benchmark's first block: what ``sme2_bench`` returns."""
        return self.blocks[0]

    @property
    def report(self) -> GateReport:
        """The gate's report on everything judged (both sides of a comparison as one)."""
        reports = list(self.reports.values())
        return reports[0] if len(reports) == 1 else GateReport.of_all(reports)

    @property
    def failure(self) -> str | None:
        """Why the gate fails this benchmark under its policy, or None."""
        return self.report.failure(self.policy)


def benchmark(session: BenchSession, model: str, dtype: str = "fp32", threads: int = 1,
              runner: str | None = None, device: str | None = None) -> Benchmarked:
    """One benchmark setting on ``device`` (None: the session's only one) with ``runner``
    (None: the session's default there), recorded into the session: a
    :class:`BenchmarkLoop` with nothing else set. A failed run is ``error``, not raised."""
    return BenchmarkLoop(session, device).benchmark(Case(model, dtype, threads), runner)


def compare(session: BenchSession, base: str, candidate: str, case: Case | str,
            blocks: int | None = None, margin: float = DEFAULT_MARGIN) -> Benchmarked:
    """Runners ``base`` and ``candidate`` in interleaved blocks on the session's only device:
    :meth:`BenchmarkLoop.compare`. ``case``: a :class:`Case`, or a model name (fp32, 1
    thread)."""
    case = Case(case, "fp32", 1) if isinstance(case, str) else case
    return BenchmarkLoop(session).compare(base, candidate, case, blocks, margin)


def record(out: Benchmarked, session: BenchSession, recorder: Recorder | None = None) -> None:
    """Put each block's verdicts on it (``not judged`` when the benchmark stopped before its
    runner was judged) and what was under test, let plugins amend it, and hand it to
    ``recorder``; then the comparison, with each side's end-to-end verdict."""
    recorder = recorder or SessionRecorder(session)
    for result in out.blocks:
        report = out.reports.get(result.runner_name) or \
            GateReport.unjudged("not judged: the test stopped first")
        if result.under_test is None:
            result.under_test = under_test_of(result)
        report.record_on(result)
        if session.hook is not None:
            session.hook.pytest_sme2_amend_result(result=result)
        recorder.block(result)
    if out.comparison is not None:
        out.comparison.baselines = {r: report.e2e for r, report in out.reports.items()}
        recorder.comparison(out.comparison)




@dataclass
class BenchmarkLoop(PairedGate):
    """The measure → suspect → confirm → judge → record loop for one test: the session, the
    device it runs on (None: the session's only one), the name it is recorded under (a pytest
    node id; None: model-dtype-threads), where progress lines and finished blocks are told,
    and where judged blocks go (None: into the session).

    :meth:`benchmark` and :meth:`compare` are the two ways a test is measured; each keeps its
    blocks on a :class:`Benchmarked`. Every block is measured by :meth:`measure_block`, the one
    place a workload of another kind (a token loop instead of a model's forward pass) would
    measure differently; judging and recording read only the blocks' results."""

    session: BenchSession
    device: str | None = None
    label: str | None = None
    progress: Say | None = None
    block_done: BlockDone | None = None
    recorder: Recorder | None = None
    # An LLM's generation to run (sme2_generate); None: a generation only when the program
    # is an LLM, at the session's token counts (pytest_sme2.measure.generation).
    generation: Generation | None = None

    def benchmark(self, case: Case, runner: str | None = None) -> Benchmarked:
        """One benchmark setting with ``runner`` (None: the session's default on the
        device): one block, instructions counted when configured, judged against its
        baseline — a suspected regression measured again in fresh processes first — and
        recorded. A failed run or an unreadable baseline is ``error``, not raised."""
        session = self.session
        runner = runner or session.default_runner(self.progress, self.device)
        run = self.run_of(case)
        out = Benchmarked(session.config.gate)
        try:
            out.blocks.append(self.measure_block(run, runner))
            self._tell(1)
            if session.config.measure == "instructions":
                session.count_instructions(out.blocks[0], self.progress, self.device)
            if out.policy.mode == "ab":
                out.reports[runner] = self._judge_ab(run, runner, out)
            else:
                if out.policy.precision_pct is not None:
                    self._until_precise(run, runner, out)
                out.reports[runner] = self._judge_stored(run, runner, out)
        except Sme2Error as e:  # a failed run, a corrupt baseline file
            out.reports[runner] = GateReport.unjudged(f"not judged: {e}")
            out.error = e
        finally:
            record(out, session, self.recorder)
        return out

    def compare(self, base: str, candidate: str, case: Case, blocks: int | None = None,
                margin: float = DEFAULT_MARGIN) -> Benchmarked:
        """Runners ``base`` and ``candidate`` in interleaved blocks on one device
        (:func:`pytest_sme2.measure.block.run_comparison`), each side then judged against its
        baseline end to end on all its blocks (categories are not gated here), and
        recorded."""
        session, progress, device = self.session, self.progress, self.device
        run = self.run_of(case)
        out = Benchmarked(replace(session.config.gate, categories=()))
        per_side = blocks or session.config.blocks

        def on_block(result: BlockResult) -> None:
            out.blocks.append(result)
            # --sme2-precision, or a "cannot tell" taking more pairs: the total is not known
            planned = len(out.blocks) <= 2 * per_side and goal is None
            self._tell(len(out.blocks), 2 * per_side if planned else None)

        goal = None
        policy = out.policy
        if policy.precision_pct is not None:
            goal = Goal(policy.precision_pct, policy.precision_budget_s).start()
        doubling = Doubling(pair_budget(policy))

        def paired(a: list[BlockResult], b: list[BlockResult]):
            return Pairs(tuple(map(block_value, a)), tuple(map(block_value, b)))

        def more(a: list[BlockResult], b: list[BlockResult]) -> bool:
            if goal is not None:
                return goal.more(paired(a, b))
            if policy.confirm_blocks <= 0 or a[0].emulated:   # emulated times: no verdict
                return False
            speedup = lambda: paired_ratio(list(map(block_value, a)),  # noqa: E731
                                           list(map(block_value, b)))
            return doubling.more(len(a), lambda: comparison_judgement(
                speedup(), margin, policy.threshold_pct))

        try:
            out.comparison = run_comparison(
                run, session.runner(base, progress, device),
                session.runner(candidate, progress, device), session.device(device),
                session.settings,
                Interleaving(per_side, margin, on_block, more, policy.threshold_pct))
            if doubling.spent:
                self._say(run, f"{base} vs {candidate}", f"cannot tell after "
                          f"{len(out.comparison.base_blocks)} pairs; stopped by {doubling.spent}")
            if goal is not None:
                c = out.comparison
                self._record_precision(goal.outcome(paired(c.base_blocks, c.candidate_blocks)),
                                       out.blocks, run, f"{base} vs {candidate}")
            for side in (out.comparison.base, out.comparison.candidate):
                out.reports[side] = self._judge(run, side, out, side_label=True)
        except Sme2Error as e:  # a failed run, a corrupt baseline file
            out.reports = dict.fromkeys({r.runner_name for r in out.blocks},
                                        GateReport.unjudged(f"not judged: {e}"))
            out.error = e
        finally:
            record(out, session, self.recorder)
        return out

    def run_of(self, case: Case) -> BenchmarkRun:
        """The run of ``case``, named by :attr:`label` (None: model-dtype-threads). A .pte is
        benchmarked as exported, whatever dtype was asked (``sme2_bench("m.pte")``)."""
        dtype = AS_EXPORTED if is_pte(case.model) else case.dtype
        return BenchmarkRun(case.model, dtype, case.threads,
                            label=self.label or Case(case.model, dtype, case.threads).id,
                            progress=self.progress, rules=self.session.config.category_rules,
                            measuring=self.session.measuring, generation=self.generation)

    def measure_block(self, run: BenchmarkRun, runner: str,
                      export_again: bool = True) -> BlockResult:
        """One block of ``run`` on ``runner``: a fresh runner process on the loop's device.
        ``export_again=False``: the program exported for the first block is reused."""
        if export_again:
            return self.session.measure(run, runner, self.progress, device=self.device)
        return self.session.measure(run, runner, self.progress, export_again=False,
                                    device=self.device)

    def _tell(self, blocks: int, total: int | None = None) -> None:
        if self.block_done is not None:
            self.block_done(blocks, total)

    def _say(self, run: BenchmarkRun, runner: str, text: str) -> None:
        if self.progress:
            self.progress(f"{run.model} {run.dtype} t{run.threads} {runner}: {text}")

    def _more_blocks(self, run: BenchmarkRun, runner: str, out: Benchmarked,
                     side_label: bool = False) -> Callable[[int], BlockResult]:
        """``measure(block)``: one more block of the benchmark under test, fresh process,
        kept in ``out.blocks`` (confirmation, precision and A/B blocks alike)."""
        def measure(block: int) -> BlockResult:
            label = f"{run.label}[{runner}#{block}]" if side_label else run.label
            out.blocks.append(self.measure_block(replace(run, label=label, block=block),
                                                 runner, export_again=False))
            self._tell(len(out.blocks))
            return out.blocks[-1]

        return measure

    def _until_precise(self, run: BenchmarkRun, runner: str, out: Benchmarked) -> None:
        """--sme2-precision without a base: blocks until the benchmark's level (its typical
        block median over processes) is within ±PCT%, or the budget is spent; the outcome on
        each block (``precision`` in results.json) and, when not reached, one progress
        line."""
        policy = out.policy
        goal = Goal(policy.precision_pct, policy.precision_budget_s).start()
        measure = self._more_blocks(run, runner, out)
        values = lambda: tuple(block_value(r) for r in out.blocks)  # noqa: E731
        while goal.more(values()):
            measure(len(out.blocks))
        self._record_precision(goal.outcome(values()), out.blocks, run, runner)

    def _record_precision(self, outcome: Precision, blocks: list[BlockResult],
                          run: BenchmarkRun, runner: str) -> None:
        for r in blocks:
            r.precision = outcome.record()
        if not outcome.reached:
            self._say(run, runner, f"--sme2-precision {outcome.target_pct:g}% not reached: "
                                   f"{outcome.why}")

    def _judge(self, run: BenchmarkRun, runner: str, out: Benchmarked,
               side_label: bool = False) -> GateReport:
        """The gate on ``runner``'s blocks in ``out``; confirmation blocks, measured when a
        regression is suspected, are added to ``out.blocks``. ``side_label``: name them as
        comparison blocks (``test[runner#3]``). A progress line says what changed under test
        since the baseline, with the verdict."""
        measure_more = self._more_blocks(run, runner, out, side_label)
        side = [r for r in out.blocks if r.runner_name == runner]
        report = gate.run_with_confirmation(side, measure_more, self.session.config.baseline_dir,
                                            out.policy, self.progress)[1]
        if report.e2e.changed_since_baseline:       # what the test changed, and its cost
            self._say(run, runner, report.e2e.summary)
        return report
