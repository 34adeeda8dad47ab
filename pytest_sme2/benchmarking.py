"""A benchmark as a session runs it, as library code: measure → suspect → confirm → judge →
record. The ``sme2_bench`` and ``sme2_compare`` fixtures call :func:`benchmark` and
:func:`compare` and only turn the outcome into pytest's terms (a failure, JUnit properties);
without pytest::

    from pytest_sme2.benchmarking import benchmark
    from pytest_sme2.config import Sme2Config
    from pytest_sme2.report.outputs import write_reports
    from pytest_sme2.session import BenchSession

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

from pytest_sme2.errors import Sme2Error
from pytest_sme2.settings import DEFAULT_MARGIN

if TYPE_CHECKING:  # the measuring stack (pandas) is imported when a benchmark runs
    from pytest_sme2.bench import BenchmarkRun
    from pytest_sme2.compare import Comparison
    from pytest_sme2.gate import GateReport
    from pytest_sme2.gate_policy import GatePolicy
    from pytest_sme2.results import BenchmarkResult
    from pytest_sme2.session import BenchSession

Say = Callable[[str], None]
# After each block: blocks measured so far, and the planned total when known (a comparison).
BlockDone = Callable[[int, "int | None"], None]


class Recorder(Protocol):
    """Where a benchmark's judged blocks, and a comparison, are kept."""

    def block(self, result: BenchmarkResult) -> None: ...

    def comparison(self, comparison: Comparison) -> None: ...


@dataclass
class SessionRecorder:
    """The library's default: into the session, which writes results.json after each."""

    session: BenchSession

    def block(self, result: BenchmarkResult) -> None:
        self.session.add(result)

    def comparison(self, comparison: Comparison) -> None:
        self.session.add_comparison(comparison.record())


@dataclass
class Benchmarked:
    """What one benchmark (or one comparison) gave: every block in the order measured
    (confirmation blocks included), the gate's report per runner, the comparison, and the
    error that stopped it (then every report says ``not judged``)."""

    policy: GatePolicy
    blocks: list[BenchmarkResult] = field(default_factory=list)
    reports: dict[str, GateReport] = field(default_factory=dict)   # by runner name
    comparison: Comparison | None = None
    error: Sme2Error | None = None

    @property
    def result(self) -> BenchmarkResult:
        """The benchmark's first block: what ``sme2_bench`` returns."""
        return self.blocks[0]

    @property
    def report(self) -> GateReport:
        """The gate's report on everything judged (both sides of a comparison as one)."""
        from pytest_sme2.gate import GateReport

        reports = list(self.reports.values())
        return reports[0] if len(reports) == 1 else GateReport.of_all(reports)

    @property
    def failure(self) -> str | None:
        """Why the gate fails this benchmark under its policy, or None."""
        return self.report.failure(self.policy)


def benchmark(session: BenchSession, model: str, dtype: str = "fp32", threads: int = 1,
              runner: str | None = None, device: str | None = None, label: str | None = None,
              progress: Say | None = None, block_done: BlockDone | None = None,
              recorder: Recorder | None = None) -> Benchmarked:
    """One benchmark setting on ``device`` (None: the session's only one) with ``runner``
    (None: the session's default there): one block, instructions counted when configured,
    judged against its baseline — a suspected regression measured again in fresh processes
    first — and recorded. A failed run or an unreadable baseline is ``error``, not raised."""
    runner = runner or session.default_runner(progress, device)
    run = _run(session, model, dtype, threads, label, progress)
    out = Benchmarked(session.config.gate)
    try:
        out.blocks.append(session.measure(run, runner, progress, device=device))
        _tell(block_done, 1)
        if session.config.measure == "instructions":
            session.count_instructions(out.blocks[0], progress, device)
        out.reports[runner] = _judge(session, run, runner, out, progress, device, block_done)
    except Sme2Error as e:  # a failed run, a corrupt baseline file
        from pytest_sme2.gate import GateReport

        out.reports[runner] = GateReport.unjudged(f"not judged: {e}")
        out.error = e
    finally:
        record(out, session, recorder)
    return out


def compare(session: BenchSession, base: str, candidate: str, model: str, dtype: str = "fp32",
            threads: int = 1, blocks: int | None = None, margin: float = DEFAULT_MARGIN,
            device: str | None = None, label: str | None = None, progress: Say | None = None,
            block_done: BlockDone | None = None,
            recorder: Recorder | None = None) -> Benchmarked:
    """Runners ``base`` and ``candidate`` in interleaved blocks on one device
    (:func:`pytest_sme2.bench.run_comparison`), each side then judged against its baseline end
    to end on all its blocks (categories are not gated here), and recorded."""
    from pytest_sme2.bench import run_comparison

    run = _run(session, model, dtype, threads, label, progress)
    out = Benchmarked(replace(session.config.gate, categories=()))
    per_side = blocks or session.config.blocks

    def on_block(result: BenchmarkResult) -> None:
        out.blocks.append(result)
        _tell(block_done, len(out.blocks), 2 * per_side)

    try:
        out.comparison = run_comparison(
            run, session.runner(base, progress, device),
            session.runner(candidate, progress, device), session.device(device),
            session.settings, blocks=per_side, margin=margin, on_block=on_block)
        for side in (out.comparison.base, out.comparison.candidate):
            out.reports[side] = _judge(session, run, side, out, progress, device, block_done,
                                       side_label=True)
    except Sme2Error as e:  # a failed run, a corrupt baseline file
        from pytest_sme2.gate import GateReport

        out.reports = dict.fromkeys({r.runner_name for r in out.blocks},
                                    GateReport.unjudged(f"not judged: {e}"))
        out.error = e
    finally:
        record(out, session, recorder)
    return out


def record(out: Benchmarked, session: BenchSession, recorder: Recorder | None = None) -> None:
    """Put each block's verdicts on it (``not judged`` when the benchmark stopped before its
    runner was judged) and what was under test, let plugins amend it, and hand it to
    ``recorder``; then the comparison, with each side's end-to-end verdict."""
    from pytest_sme2.baseline_key import UNDER_TEST, UnderTest
    from pytest_sme2.gate import GateReport

    recorder = recorder or SessionRecorder(session)
    for result in out.blocks:
        report = out.reports.get(result.runner_name) or \
            GateReport.unjudged("not judged: the test stopped first")
        result.extra.setdefault(UNDER_TEST, UnderTest.of(result).to_dict())
        report.record_on(result)
        if session.hook is not None:
            session.hook.pytest_sme2_amend_result(result=result)
        recorder.block(result)
    if out.comparison is not None:
        out.comparison.baselines = {r: report.e2e for r, report in out.reports.items()}
        recorder.comparison(out.comparison)


def _run(session: BenchSession, model: str, dtype: str, threads: int, label: str | None,
         progress: Say | None) -> BenchmarkRun:
    """``label`` names the benchmark in results (a pytest node id); None: model-dtype-threads.
    A .pte is benchmarked as exported, whatever dtype was asked (``sme2_bench("m.pte")``)."""
    from pytest_sme2.bench import BenchmarkRun
    from pytest_sme2.matrix import Case
    from pytest_sme2.model_spec import AS_EXPORTED, is_pte

    dtype = AS_EXPORTED if is_pte(model) else dtype
    return BenchmarkRun(model, dtype, threads, label=label or Case(model, dtype, threads).id,
                        progress=progress, rules=session.config.category_rules,
                        measuring=session.measuring)


def _tell(block_done: BlockDone | None, blocks: int, total: int | None = None) -> None:
    if block_done is not None:
        block_done(blocks, total)


def _judge(session: BenchSession, run: BenchmarkRun, runner: str, out: Benchmarked,
           progress: Say | None, device: str | None, block_done: BlockDone | None,
           side_label: bool = False) -> GateReport:
    """The gate on ``runner``'s blocks in ``out``; confirmation blocks, measured when a
    regression is suspected, are added to ``out.blocks``. ``side_label``: name them as
    comparison blocks (``test[runner#3]``). A progress line says what changed under test
    since the baseline, with the verdict."""
    from pytest_sme2 import gate

    def measure_more(block: int) -> BenchmarkResult:
        label = f"{run.label}[{runner}#{block}]" if side_label else run.label
        out.blocks.append(session.measure(replace(run, label=label, block=block), runner,
                                          progress, export_again=False, device=device))
        _tell(block_done, len(out.blocks))
        return out.blocks[-1]

    side = [r for r in out.blocks if r.runner_name == runner]
    report = gate.run_with_confirmation(side, measure_more, session.config.baseline_dir,
                                        out.policy, progress)[1]
    if report.e2e.changed_since_baseline and progress:   # what the test changed, and its cost
        progress(f"{run.model} {run.dtype} t{run.threads} {runner}: {report.e2e.summary}")
    return report
