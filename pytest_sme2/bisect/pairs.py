"""One comparison of two programs on one runner and device, as the A/B gate takes it: blocks
(one runner process each) in interleaved ABBA pairs (:func:`pytest_sme2.measure.pairs.take_pairs`),
judged by the paired rule (:func:`pytest_sme2.gate.ab.judge_ab`), the pairs doubling while it
cannot tell (up to ``--max-pairs`` and the time budget).

Results are keyed by what was measured (:func:`key`): both programs' bytes (sha256), the
runner, the device and the threads; the same key is never measured twice."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from pytest_sme2.devices.base import Device
from pytest_sme2.devices.registry import open_device
from pytest_sme2.gate.ab import judge_ab
from pytest_sme2.gate.decide import START_PAIRS, PairBudget
from pytest_sme2.measure.block import BenchmarkRun, run_benchmark
from pytest_sme2.measure.pairs import Measure, PairPlan, take_pairs
from pytest_sme2.results import BlockResult, pool_categories
from pytest_sme2.measure.settings import BenchSettings
from pytest_sme2.programs.spec import AS_EXPORTED
from pytest_sme2.results.codec import decode, encode
from pytest_sme2.results.judgement import NO_CHANGE
from pytest_sme2.runners.base import Runner
from pytest_sme2.runners.spec import parse_runner_spec
from pytest_sme2.bisect.programs import Program


def key(base: Program, candidate: Program) -> str:
    """What a comparison is keyed by: ``base-sha..candidate-sha@runner@device/tN``."""
    return f"{base.sha256[:16]}..{candidate.sha256[:16]}@{candidate.where}"


@dataclass
class Compared:
    """A comparison's outcome as the state file keeps it: the verdict (gate/ab's status), the
    ratio interval (candidate / base), the pairs, the seconds, its reason, and each side's
    operator categories (ms per run, the mean over its blocks, as every report pools them)."""

    status: str
    point: float | None
    low: float | None
    high: float | None
    pairs: int
    seconds: float
    reason: str
    categories: dict[str, dict[str, float]] = field(default_factory=dict)

    @property
    def interval(self) -> str:
        if self.point is None and not self.pairs:       # kernel sets: what changed
            return f"({self.reason})"
        if self.low is None or self.high is None:
            return "[?]"
        if self.low == self.high:       # a count: deterministic, no interval
            return f"{self.point:.4f}x"
        return f"{self.point:.3f}x [{self.low:.3f}, {self.high:.3f}]"

    @property
    def word(self) -> str:
        """The verdict as said: ``regression``, ``no change``; a kernel set that differs:
        ``SME2 kernels changed``."""
        if self.point is None and not self.pairs and self.status != NO_CHANGE:
            return "SME2 kernels changed"
        return self.status.replace("_", " ")

    @property
    def evidence(self) -> str:
        """``12 pairs`` (timed blocks), ``instructions counted`` or ``kernels traced``."""
        if self.pairs:
            return f"{self.pairs} pairs"
        return "instructions counted" if self.point is not None else "kernels traced"

    to_json = encode
    from_json = classmethod(decode)


@dataclass(frozen=True)
class ProbePlan:
    """How each comparison measures: the first pairs, the budget, the threshold (percent) and
    the block's settings."""

    threshold_pct: float
    budget: PairBudget
    settings: BenchSettings
    first_pairs: int = START_PAIRS


class Bench:
    """The runners and devices comparisons run on, opened once each, and the comparing."""

    measure = "time"

    def __init__(self, plan: ProbePlan, runner_specs: dict[str, str],
                 say: Callable[[str], None] = print):
        self.plan = plan
        self.runner_specs = runner_specs        # runner name -> spec (--runner NAME=SPEC)
        self.say = say
        self.devices: dict[str, Device] = {}
        self.runners: dict[tuple[str, str], Runner] = {}

    def where(self, program: Program) -> tuple[Runner, Device]:
        device = self.devices.get(program.device)
        if device is None:
            device = self.devices[program.device] = open_device(program.device)
        spec = self.runner_specs.get(program.runner, program.runner_kind)
        runner = self.runners.get((spec, program.device))
        if runner is None:
            runner = parse_runner_spec(spec).make(None, target=device.target)
            self.runners[(spec, program.device)] = runner
        return runner, device

    def compare(self, base: Program, candidate: Program, label: str) -> Compared:
        """``candidate`` against ``base`` in ABBA pairs until told."""
        runner, device = self.where(candidate)
        plan = self.plan
        start = time.monotonic()

        def side(name: str, program: Program) -> Measure:
            def block(i: int) -> BlockResult:
                run = BenchmarkRun(model=program.pte, dtype=AS_EXPORTED,
                                   threads=program.threads, label=f"bisect/{label}/{name}",
                                   block=i + 1)
                return run_benchmark(run, runner, device, plan.settings)
            return block

        paired = take_pairs(side("base", base), side("candidate", candidate),
                            lambda p: judge_ab(p.pairs, plan.threshold_pct),
                            PairPlan(first=max(2, plan.first_pairs), budget=plan.budget))
        j = paired.told.judgement if paired.told is not None else judge_ab(
            paired.pairs, plan.threshold_pct)     # emulated: the first pairs, never more
        r = j.ratio
        return Compared(j.status, r.point if r else None, r.low if r else None,
                        r.high if r else None, len(paired.base), time.monotonic() - start,
                        j.reason + paired.stopped,
                        {"base": pool_categories(paired.base),
                         "candidate": pool_categories(paired.candidate)})

    def close(self) -> None:
        for device in self.devices.values():
            device.cleanup()
        for runner in self.runners.values():
            runner.close()

