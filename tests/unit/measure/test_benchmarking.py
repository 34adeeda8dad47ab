"""pytest_sme2.measure.benchmark without pytest: measure → suspect → confirm → judge → record with
a stand-in session (no runner, no device), and what reaches the recorder on every exit."""

from __future__ import annotations

from contextlib import nullcontext
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_sme2.measure import benchmark as benchmarking
from pytest_sme2.analysis.latency import latency_stats
from pytest_sme2.baselines.store import save
from pytest_sme2.measure.config import Sme2Config
from pytest_sme2.measure.matrix import Case
from pytest_sme2.errors import Sme2Error
from pytest_sme2.gate.policy import GatePolicy
from pytest_sme2.results import BlockResult, ResultAnalysis, RunContext

AT_10 = GatePolicy(fail_on_regression=10)
STEADY = (1.0, 1.01, 0.99)
SLOW = (1.6, 1.61, 1.59)
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)

TOY = Case("toy_cnn", "fp32", 1)


def _block(samples, nodeid="toy_cnn-fp32-t1", runner="python", block=None) -> BlockResult:
    device = {"kind": "host", "serial": "vm", "model": "x86_64", "cpu": "AMD EPYC",
              "abi": "x86_64", "os": "Linux", "kernel": "6.1", "cores": 2, "sme": False,
              "sme2": False, "executorch": "1.5.1", "extra": {}}
    return BlockResult(
        nodeid=nodeid, model="toy_cnn", dtype="fp32", threads=1,
        runner={"name": runner, "kind": "python", "labels": {}}, device=device,
        runs=len(samples), warmup=1, e2e_ms=list(samples), e2e=latency_stats(samples),
        etdump="a.etdump", pte="m.pte", export_key="2e9e4915a511dbff",
        analysis=ResultAnalysis(categories_ms={"GEMM": 0.5}), context=RunContext(block=block))


def _steady_past(tmp_path: Path, runners=("python",), nodeid="toy_cnn-fp32-t1") -> Path:
    """Three steady baseline sessions, measured by the test ``nodeid`` (a baseline is its
    test's: another test's blocks never set its level)."""
    folder = tmp_path / "bl"
    for runner in runners:
        for i in range(3):
            level = 1.0 + 0.01 * i
            save([_block((level, level * 1.01, level * 0.99), nodeid, runner=runner)], folder,
                 session_id=f"s{i}", commit=False, now=T0 + timedelta(days=i))
    return folder


class _Session:
    """What benchmarking asks of a BenchSession; each measured block takes the next samples
    of ``times`` (an exception there is raised instead)."""

    def __init__(self, folder: Path | None, times, policy: GatePolicy = AT_10, **cfg):
        self.config = Sme2Config(baseline_dir=folder, gate=policy, **cfg)
        self.settings = self.config.settings
        self.hook = None
        self.times = list(times)
        self.asked: list[tuple] = []        # (label, block, export_again, device)
        self.benchmarks: list[str] = []     # the benchmark each block names
        self.added: list[BlockResult] = []
        self.compared: list = []

    def default_runner(self, progress=None, device=None) -> str:
        return "python"

    def measuring(self):
        return nullcontext()

    def measure(self, run, runner, progress=None, export_again=True, device=None):
        self.asked.append((run.label, run.block, export_again, device))
        samples = self.times.pop(0)
        if isinstance(samples, BaseException):
            raise samples
        return _block(samples, run.label, runner, run.block)

    def runner(self, name, progress=None, device=None):
        return SimpleNamespace(info=SimpleNamespace(name=name))

    def device(self, spec=None):
        return f"device {spec}"

    def add(self, result):
        self.added.append(result)

    def add_comparison(self, record):
        self.compared.append(record)


@pytest.fixture(autouse=True)
def _measured_by_the_stand_in(monkeypatch):
    """Every block the loop measures comes from the stand-in session's ``measure``."""
    monkeypatch.setattr(benchmarking.BenchmarkLoop, "measure_block",
                        lambda self, run, runner, export_again=True: self.session.measure(
                            run, runner, self.progress, export_again, self.device))


class _PairSession(_Session):
    """Measures steady blocks; the runner named ``on`` takes ``ratios[block]`` times as long
    (the base's blocks stay steady)."""

    def __init__(self, folder, ratios=(), **cfg):
        super().__init__(folder, [], **cfg)
        self.ratios = list(ratios)

    def measure(self, run, runner, progress=None, export_again=True, device=None):
        self.asked.append((run.label, run.block, export_again, device))
        self.benchmarks.append(run.benchmark)
        factor = self.ratios[run.block] if runner == "on" and self.ratios else 1.0
        return _block(tuple(v * factor for v in STEADY), run.label, runner, run.block)


def test_a_benchmark_without_baselines_is_measured_once_recorded_and_not_compared():
    session = _Session(None, [STEADY])
    done = benchmarking.benchmark(session, "toy_cnn")
    assert [b.e2e_ms for b in done.blocks] == [list(STEADY)] and done.error is None
    assert session.asked == [("toy_cnn-fp32-t1", None, True, None)]
    assert session.added == done.blocks                   # the library's default recorder
    assert done.result.judgement.status == "not_compared"
    assert done.report.e2e.reason == "no baseline folder configured"
    assert done.result.under_test.export_key == "2e9e4915a511dbff"
    assert done.failure is None


def test_a_suspected_regression_is_confirmed_on_fresh_blocks_and_every_block_carries_it(
        tmp_path):
    session = _Session(_steady_past(tmp_path, nodeid="t.py::test_x"), [SLOW] + [STEADY] * 11)
    said, ticks = [], []
    loop = benchmarking.BenchmarkLoop(session, label="t.py::test_x", progress=said.append,
                                      block_done=lambda n, total: ticks.append((n, total)))
    done = loop.benchmark(TOY)
    # one slow block in three cannot tell; blocks double until the verdict is told
    assert done.report.e2e.status == "no_change" and done.report.confirmed
    n = len(done.blocks)
    assert n in (6, 12) and [b.block for b in done.blocks] == [None, *range(1, n)]
    assert [a[2] for a in session.asked] == [True] + [False] * (n - 1)   # exported once
    assert ticks == [(i, None) for i in range(1, n + 1)]
    assert "a regression is suspected" in said[0]
    assert {b.judgement.status for b in session.added} == {"no_change"}
    assert all(b.nodeid == "t.py::test_x" for b in done.blocks)


def test_a_confirmed_regression_fails_under_an_enforced_policy_only(tmp_path):
    folder = _steady_past(tmp_path)
    done = benchmarking.benchmark(_Session(folder, [SLOW, SLOW, SLOW]), "toy_cnn")
    assert done.report.e2e.status == "regression"
    assert done.failure.startswith("regression against the baseline")
    judged_only = _Session(folder, [SLOW, SLOW, SLOW], policy=GatePolicy())
    assert benchmarking.benchmark(judged_only, "toy_cnn").failure is None


def test_a_failed_run_is_the_outcome_not_an_exception_and_keeps_what_was_measured(tmp_path):
    session = _Session(_steady_past(tmp_path), [SLOW, Sme2Error("runner killed")])
    done = benchmarking.benchmark(session, "toy_cnn")
    assert str(done.error) == "runner killed"
    assert len(session.added) == 1
    assert session.added[0].judgement.reason == "not judged: runner killed"


def test_an_interrupt_still_records_the_blocks_measured_before_it(tmp_path):
    session = _Session(_steady_past(tmp_path), [SLOW, KeyboardInterrupt()])
    with pytest.raises(KeyboardInterrupt):
        benchmarking.benchmark(session, "toy_cnn")
    assert [b.judgement.reason for b in session.added] == [
        "not judged: the test stopped first"]


def test_plugins_amend_each_block_before_the_recorder_gets_it():
    from pytest_sme2.hookspec import plugin_manager

    class Plugin:
        @staticmethod
        def pytest_sme2_amend_result(result):
            result.extra["build_id"] = "ci-7"

    class Recorder:
        def __init__(self):
            self.blocks = []

        def block(self, result):
            self.blocks.append(dict(result.extra))

        def comparison(self, comparison):
            raise AssertionError("not a comparison")

    session = _Session(None, [STEADY])
    session.hook = plugin_manager(Plugin).hook
    recorder = Recorder()
    benchmarking.BenchmarkLoop(session, recorder=recorder).benchmark(TOY)
    assert recorder.blocks[0]["build_id"] == "ci-7" and session.added == []


def test_a_comparison_judges_each_side_on_all_its_blocks_and_records_the_verdicts(tmp_path):
    folder = _steady_past(tmp_path, runners=("off", "on"))
    # 2 pairs and no more (--sme2-confirm-blocks 0: no pairs until told)
    session = _PairSession(folder, policy=GatePolicy(categories=("GEMM",), confirm_blocks=0),
                           blocks=2)
    ticks = []
    loop = benchmarking.BenchmarkLoop(session, device="host",
                                      block_done=lambda n, total: ticks.append((n, total)))
    done = loop.compare("off", "on", TOY)
    # ABBA: off on | on off; the first block exported (again, with --sme2-reexport) only
    assert [(a[0], a[2], a[3]) for a in session.asked] == [
        ("toy_cnn-fp32-t1[off#0]", True, "host"), ("toy_cnn-fp32-t1[on#0]", False, "host"),
        ("toy_cnn-fp32-t1[on#1]", False, "host"), ("toy_cnn-fp32-t1[off#1]", False, "host")]
    # each block names the benchmark it belongs to, so no report parses its node id
    assert session.benchmarks == ["toy_cnn-fp32-t1"] * 4
    assert ticks == [(1, 4), (2, 4), (3, 4), (4, 4)]
    assert done.policy.categories == () and set(done.reports) == {"off", "on"}
    assert [j.category for j in done.report.judgements] == [None, None]   # two sides, e2e only
    assert len(session.added) == 4 and session.compared[0].baselines["on"].status == "no_change"
    assert done.comparison.baselines == session.compared[0].baselines


def test_a_comparison_that_fails_leaves_every_measured_side_not_judged():
    session = _Session(None, [STEADY, Sme2Error("device gone")], blocks=2)
    done = benchmarking.compare(session, "off", "on", "toy_cnn")
    assert str(done.error) == "device gone" and done.comparison is None
    assert session.added[0].judgement.reason == "not judged: device gone"
    assert session.compared == []


def test_a_comparison_that_cannot_tell_doubles_its_pairs_until_told():
    # candidate / base per pair: three wide pairs, then steady ones
    ratios = [0.95, 1.12, 1.04] + [1.0, 1.01, 0.99] * 10
    session = _PairSession(None, ratios, blocks=3)
    done = benchmarking.compare(session, "off", "on", "toy_cnn")
    assert len(done.comparison.base_blocks) in (6, 12)      # doubled from 3, then told
    assert done.comparison.verdict == "no change"
    # with --sme2-max-pairs 3 it stops where it began and says it cannot tell
    session = _PairSession(None, ratios, blocks=3, policy=GatePolicy(max_pairs=3))
    done = benchmarking.compare(session, "off", "on", "toy_cnn")
    assert len(done.comparison.base_blocks) == 3 and done.comparison.verdict == "cannot tell"
    assert done.comparison.stopped_by == "the most pairs asked (3, --sme2-max-pairs)"


def test_each_side_of_a_comparison_is_judged_as_any_benchmark_pairs_included(monkeypatch):
    """Issue 49: a comparison's sides were judged against their stored baselines by more
    blocks only, so a 41% slowdown read "cannot tell" and passed; each side now goes the way
    of any benchmark, a verdict in doubt confirmed in pairs against the kept base program."""
    from pytest_sme2.gate.rule import GateReport
    from pytest_sme2.measure.judging import Judging

    judged = []

    def judge_stored(self):
        judged.append((self.runner, self.side_label, len(self.side)))
        return GateReport.unjudged("not judged: stand-in")

    monkeypatch.setattr(Judging, "judge_stored", judge_stored)
    session = _PairSession(None, blocks=6)
    benchmarking.compare(session, "off", "on", "toy_cnn")
    assert judged == [("off", True, 6), ("on", True, 6)]
