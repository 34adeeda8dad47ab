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

from pytest_sme2.baselines.key import under_test_of
from pytest_sme2.errors import Sme2Error
from pytest_sme2.gate.rule import GateReport
from pytest_sme2.measure.block import BenchmarkRun, run_benchmark
from pytest_sme2.measure.judging import Judging, LoopHands, pair_plan
from pytest_sme2.measure.matrix import Case
from pytest_sme2.measure.pairs import Interleaving, run_comparison
from pytest_sme2.stats import DEFAULT_MARGIN
from pytest_sme2.programs.spec import AS_EXPORTED, is_pte
from pytest_sme2.results.generation import Generation

if TYPE_CHECKING:
    from pytest_sme2.gate.policy import GatePolicy
    from pytest_sme2.measure.comparison import Comparison
    from pytest_sme2.measure.session import BenchSession
    from pytest_sme2.results import BlockResult
    from pytest_sme2.runners.base import Runner

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
class BenchmarkLoop:
    """The measure → suspect → confirm → judge → record loop for one test: the session, the
    device it runs on (None: the session's only one), the name it is recorded under (a pytest
    node id; None: model-dtype-threads), where progress lines and finished blocks are told,
    and where judged blocks go (None: into the session).

    :meth:`benchmark` and :meth:`compare` are the two ways a test is measured; each keeps its
    blocks on a :class:`Benchmarked`. Every block is measured by :meth:`measure_block`, the one
    place a workload of another kind (a token loop instead of a model's forward pass) would
    measure differently; judging (:class:`pytest_sme2.measure.judging.Judging`, the loop's
    own) and recording read only the blocks' results."""

    session: BenchSession
    device: str | None = None
    label: str | None = None
    progress: Say | None = None
    block_done: BlockDone | None = None
    recorder: Recorder | None = None
    # An LLM's generation to run (sme2_generate); None: a generation only when the program
    # is an LLM, at the session's token counts (pytest_sme2.measure.generation).
    generation: Generation | None = None

    def __post_init__(self) -> None:
        self.hands = LoopHands(self.session.config, self.measure_block, self._say, self._tell,
                               self.progress)

    def judging(self, run: BenchmarkRun, runner: str, out: Benchmarked,
                side_label: bool = False) -> Judging:
        """The gate on ``runner``'s blocks of ``out`` (the blocks it measures join them)."""
        return Judging(self.hands, run, runner, out.blocks, out.policy, side_label)

    def benchmark(self, case: Case, runner: str | None = None) -> Benchmarked:
        """One benchmark setting with ``runner`` (None: the session's default on the
        device): one block, instructions counted when configured, judged against its
        baseline — a suspected regression measured again in fresh processes first — and
        recorded. A failed run or an unreadable baseline is ``error``, not raised."""
        session = self.session
        runner = runner or session.default_runner(self.progress, self.device)
        run = self.run_of(case)
        out = Benchmarked(session.config.gate)
        judging = self.judging(run, runner, out)
        try:
            out.blocks.append(self.measure_block(run, runner))
            self._tell(1)
            if session.config.measure == "instructions":
                session.count_instructions(out.blocks[0], self.progress, self.device)
            if out.policy.mode == "ab":
                out.reports[runner] = judging.judge_ab()
            else:
                if out.policy.precision_pct is not None:
                    judging.until_precise()
                out.reports[runner] = judging.judge_stored()
        except Sme2Error as e:  # a failed run, a corrupt baseline file
            out.reports[runner] = GateReport.unjudged(f"not judged: {e}")
            out.error = e
        finally:
            record(out, session, self.recorder)
        return out

    def compare(self, base: str, candidate: str, case: Case, blocks: int | None = None,
                margin: float = DEFAULT_MARGIN) -> Benchmarked:
        """Runners ``base`` and ``candidate`` in interleaved pairs of blocks on one device
        (:func:`pytest_sme2.measure.pairs.run_comparison`: until told, or until precise), each
        side then judged against its baseline end to end on all its blocks (categories are
        not gated here), and recorded."""
        session, progress, device = self.session, self.progress, self.device
        run = self.run_of(case)
        out = Benchmarked(replace(session.config.gate, categories=()))
        policy = out.policy
        per_side = blocks or session.config.blocks

        def on_block(result: BlockResult) -> None:
            out.blocks.append(result)
            # --sme2-precision, or a "cannot tell" taking more pairs: the total is not known
            planned = len(out.blocks) <= 2 * per_side and policy.precision_pct is None
            self._tell(len(out.blocks), 2 * per_side if planned else None)

        def measure(block_run: BenchmarkRun, runner: Runner, first: bool) -> BlockResult:
            return self.measure_block(block_run, runner.info.name, export_again=first)

        try:
            how = Interleaving(pair_plan(policy, per_side), margin, policy.threshold_pct,
                               on_block, measure)
            out.comparison = c = run_comparison(
                run, session.runner(base, progress, device),
                session.runner(candidate, progress, device), session.device(device),
                session.settings, how)
            c.on_unresolved = policy.on_unresolved
            both = f"{base} vs {candidate}"
            if c.stopped_by:
                self._say(run, both, f"cannot tell after {len(c.base_blocks)} pairs; stopped "
                                     f"by {c.stopped_by}")
            if c.precision is not None:
                self.judging(run, base, out).record_precision(c.precision, both)
            # Each side as any benchmark: a suspected regression or a verdict in doubt is
            # confirmed in pairs against the base program kept beside its baseline.
            for side in (c.base, c.candidate):
                out.reports[side] = self.judging(run, side, out, side_label=True).judge_stored()
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
        ``export_again=False`` for the blocks after the first: --sme2-reexport exports once
        per benchmark, not once per block."""
        session = self.session
        session.prepare()
        settings = session.settings if export_again else \
            replace(session.settings, reexport=False)
        if run.measuring is None:
            run = replace(run, measuring=session.measuring)
        return run_benchmark(run, session.runner(runner, self.progress, self.device),
                             session.device(self.device), settings)

    def _tell(self, blocks: int, total: int | None = None) -> None:
        if self.block_done is not None:
            self.block_done(blocks, total)

    def _say(self, run: BenchmarkRun, runner: str, text: str) -> None:
        if self.progress:
            self.progress(f"{run.model} {run.dtype} t{run.threads} {runner}: {text}")
