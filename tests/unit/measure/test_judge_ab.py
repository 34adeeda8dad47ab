"""The A/B gate's loop with a fake session: a base block failing mid-pair (the candidate's
blocks kept, the error naming the base program), and a base runner (--sme2-ab-base-runner)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pytest_sme2.measure.benchmark import Benchmarked, BenchmarkLoop
from pytest_sme2.measure.judging import BaseProgram, Judging
from pytest_sme2.measure.matrix import Case
from pytest_sme2.errors import Sme2Error
from pytest_sme2.gate.rule import NOT_COMPARED
from pytest_sme2.gate.policy import GatePolicy
from tests.fakes.baselines import bench_result

TOY = Case("toy_cnn", "fp32", 1)


@pytest.fixture(autouse=True)
def _measured_by_the_stand_in(monkeypatch):
    """Every block the loop measures comes from the stand-in session's ``measure``."""
    monkeypatch.setattr(BenchmarkLoop, "measure_block",
                        lambda self, run, runner, export_again=True: self.session.measure(
                            run, runner, self.progress, export_again, self.device))


def _of(runner: str, samples=(1.0, 1.1, 0.9)):
    """A block measured by ``runner``."""
    return bench_result(samples=samples, runner={"name": runner, "kind": runner, "labels": {}})


class _Session:
    """Measures the candidate; the base fails on its third block (pair 2, after that pair's
    candidate block)."""

    def __init__(self):
        self.config = SimpleNamespace(blocks=6, baseline_dir=None, category_rules=None,
                                      gate=None)
        self.measuring = None
        self.calls: list[str] = []

    def measure(self, run, runner, progress, export_again=False, device=None):
        self.calls.append(run.label)
        if "[base#" in run.label and run.block == 3:
            raise Sme2Error("runner exited with status 1")
        return _of(runner, (1.0, 1.1, 0.9))


def test_a_failing_base_block_names_the_base_program_and_keeps_the_candidates_blocks(
        monkeypatch):
    monkeypatch.setattr(Judging, "ab_base",
                        lambda self: BaseProgram("/b/programs/abc.pte", "native"))
    session = _Session()
    out = Benchmarked(GatePolicy(mode="ab"))
    loop = BenchmarkLoop(session, label="t")
    run = loop.run_of(TOY)
    out.blocks.append(session.measure(run, "native", None))
    with pytest.raises(Sme2Error) as err:
        loop.judging(run, "native", out).judge_ab()
    assert "base program /b/programs/abc.pte" in str(err.value)
    assert "runner exited with status 1" in str(err.value)
    # ABBA: A B | B A | A B(fails): the candidate's three blocks are kept
    assert session.calls == ["t", "t[base#0]", "t[base#1]", "t", "t", "t[base#2]"]
    assert len(out.blocks) == 3


class _SteadySession(_Session):
    def __init__(self, base_runner="", baseline_dir=None):
        super().__init__()
        self.config.gate = SimpleNamespace(base_runner=base_runner)
        self.config.baseline_dir = baseline_dir

    def measure(self, run, runner, progress, export_again=False, device=None):
        self.calls.append(f"{run.label}@{runner}")
        return _of(runner, (1.0, 1.1, 0.9))


def _judging(loop: BenchmarkLoop) -> Judging:
    """The gate on a native benchmark whose first block is measured."""
    out = Benchmarked(GatePolicy(mode="ab"), blocks=[_of("native")])
    return loop.judging(loop.run_of(TOY), "native", out)


def test_a_base_runner_needs_no_baseline_folder():
    session = _SteadySession(base_runner="python")
    assert _judging(BenchmarkLoop(session)).ab_base() == \
        BaseProgram(None, "python")
    assert _judging(BenchmarkLoop(_SteadySession())).ab_base().missing == \
        "no baseline folder configured"


def test_the_ab_verdict_says_it_compared_two_runners():
    session = _SteadySession(base_runner="python")
    out = Benchmarked(GatePolicy(mode="ab"))
    loop = BenchmarkLoop(session, label="t")
    run = loop.run_of(TOY)
    out.blocks.append(session.measure(run, "native", None))
    report = loop.judging(run, "native", out).judge_ab()
    assert report.e2e.reason.endswith(
        "; base: the same program on runner python, candidate on runner native")
    assert report.e2e.against == "the same program re-measured in this session on runner python"
    assert session.calls[:3] == ["t@native", "t[base#0]@python", "t[base#1]@python"]
    assert len(out.blocks) == len([c for c in session.calls if c.endswith("@native")]) == 6


def test_precision_with_a_spent_budget_still_judges_two_pairs():
    session = _SteadySession(base_runner="python")
    out = Benchmarked(GatePolicy(mode="ab", precision_pct=0.0001, precision_budget_s=1e-9))
    loop = BenchmarkLoop(session, label="t")
    run = loop.run_of(TOY)
    out.blocks.append(session.measure(run, "native", None))
    report = loop.judging(run, "native", out).judge_ab()
    assert report.e2e.status != NOT_COMPARED, report.e2e.reason   # 2 pairs: a verdict
    assert len(out.blocks) == 2
    assert out.blocks[0].precision.why.startswith("time budget")


class _WobblySession(_SteadySession):
    """The candidate's first blocks wobble around the base (3 pairs cannot tell), then hold
    still: the gate doubles its pairs until it can say no change."""

    def measure(self, run, runner, progress, export_again=False, device=None):
        self.calls.append(f"{run.label}@{runner}")
        n = sum(c.endswith("@native") for c in self.calls)
        factor = (0.9, 1.12, 1.03, 1.1, 0.95)[n - 1] if runner == "native" and n <= 5 else 1.0
        return _of(runner, (factor, factor * 1.001, factor * 0.999))


def test_cannot_tell_doubles_the_pairs_until_told_and_says_how_many():
    session = _WobblySession(base_runner="python")
    session.config.blocks = 3
    out = Benchmarked(GatePolicy(mode="ab"))
    loop = BenchmarkLoop(session, label="t")
    run = loop.run_of(TOY)
    out.blocks.append(session.measure(run, "native", None))
    report = loop.judging(run, "native", out).judge_ab()
    assert len(out.blocks) in (6, 12, 24)              # 3, then doubled until told
    assert report.e2e.status == "no_change", report.e2e.reason
    assert report.e2e.current_blocks == len(out.blocks)
    assert report.e2e.summary.endswith(f"({len(out.blocks)} pairs)")


def test_cannot_tell_at_the_most_pairs_says_what_stopped_it():
    session = _WobblySession(base_runner="python")
    session.config.blocks = 3
    out = Benchmarked(GatePolicy(mode="ab", max_pairs=3))
    loop = BenchmarkLoop(session, label="t")
    run = loop.run_of(TOY)
    out.blocks.append(session.measure(run, "native", None))
    report = loop.judging(run, "native", out).judge_ab()
    assert len(out.blocks) == 3 and report.e2e.status == "cannot_tell"
    assert "stopped by the most pairs asked (3, --sme2-max-pairs)" in report.e2e.reason
    assert "10% is not resolvable here (interval [" in report.e2e.reason
