"""One comparison of two programs on one runner and device, as the A/B gate takes it: blocks
(one runner process each) in interleaved ABBA pairs, judged by the paired rule
(:func:`pytest_sme2.gate.ab.judge_ab`), the pairs doubling while it cannot tell
(:func:`pytest_sme2.gate.decide.until_told`, up to ``--max-pairs`` and the time budget).

Results are keyed by what was measured (:func:`key`): both programs' bytes (sha256), the
runner, the device and the threads; the same key is never measured twice."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from statistics import median
from typing import Callable

from pytest_sme2.devices.base import Device
from pytest_sme2.devices.registry import open_device
from pytest_sme2.gate.ab import Pairs, judge_ab
from pytest_sme2.gate.decide import START_PAIRS, PairBudget, until_told
from pytest_sme2.measure.block import BenchmarkRun, run_benchmark
from pytest_sme2.measure.settings import BenchSettings
from pytest_sme2.programs.spec import AS_EXPORTED
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
    operator categories (ms, the median over its blocks)."""

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

    def to_json(self) -> dict:
        return dict(vars(self))

    @classmethod
    def from_json(cls, d: dict) -> Compared:
        return cls(**d)


@dataclass(frozen=True)
class PairPlan:
    """How each comparison measures: the first pairs, the budget, the threshold (percent) and
    the block's settings."""

    threshold_pct: float
    budget: PairBudget
    settings: BenchSettings
    first_pairs: int = START_PAIRS


def _categories(blocks: list) -> dict[str, float]:
    names = {n for b in blocks for n in (b.categories_ms or {})}
    return {n: float(median((b.categories_ms or {}).get(n, 0.0) for b in blocks))
            for n in sorted(names)}


class Bench:
    """The runners and devices comparisons run on, opened once each, and the comparing."""

    measure = "time"

    def __init__(self, plan: PairPlan, runner_specs: dict[str, str],
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
        blocks: dict[str, list] = {"base": [], "candidate": []}
        start = time.monotonic()

        def block(side: str, program: Program) -> None:
            run = BenchmarkRun(model=program.pte, dtype=AS_EXPORTED, threads=program.threads,
                               label=f"bisect/{label}/{side}", block=len(blocks[side]) + 1)
            blocks[side].append(run_benchmark(run, runner, device, plan.settings))

        def one_pair() -> None:
            if len(blocks["base"]) % 2:                  # ABBA: A B, B A, A B ...
                block("candidate", candidate)
                block("base", base)
            else:
                block("base", base)
                block("candidate", candidate)

        def pairs() -> Pairs:
            return Pairs(tuple(float(median(b.e2e_ms)) for b in blocks["base"]),
                         tuple(float(median(b.e2e_ms)) for b in blocks["candidate"]))

        while len(blocks["base"]) < max(2, plan.first_pairs):
            one_pair()
        told = until_told(len(blocks["base"]), one_pair,
                          lambda: judge_ab(pairs(), plan.threshold_pct), plan.budget)
        j = told.judgement
        r = j.ratio
        reason = j.reason + (f"; stopped by {told.spent}" if told.spent else "")
        return Compared(j.status, r.point if r else None, r.low if r else None,
                        r.high if r else None, told.pairs, time.monotonic() - start, reason,
                        {"base": _categories(blocks["base"]),
                         "candidate": _categories(blocks["candidate"])})

    def close(self) -> None:
        for device in self.devices.values():
            device.cleanup()
        for runner in self.runners.values():
            runner.close()

