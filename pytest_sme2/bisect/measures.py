"""The measures a bisect compares two programs by (``--measure``): a bench each, whose
``compare(base, candidate, label)`` gives one :class:`Compared`, the record the state file keeps
and the outcome reads, whichever measured it.

- ``time`` (:class:`Bench`): one comparison of two programs on one runner and device, as the
  A/B gate takes it: blocks (one runner process each) in interleaved ABBA pairs
  (:func:`pytest_sme2.measure.pairs.take_pairs`), judged by the paired rule
  (:func:`pytest_sme2.gate.ab.judge_ab`), the pairs doubling while it cannot tell (up to
  ``--max-pairs`` and the time budget). Results are keyed by what was measured (:func:`key`):
  both programs' bytes (sha256), the runner, the device and the threads; the same key is never
  measured twice.
- ``instructions`` (:class:`InstructionBench`): a deterministic bisect on the host. Each
  commit's program is counted once (:func:`pytest_sme2.instructions.count_instructions`:
  instructions per ``Method::execute`` under valgrind, one pair of processes per program, kept
  by its sha256), and two programs compare by the ratio of their counts against a small
  relative threshold — counts do not drift with the machine, so there is no interval to wait
  for and never a "cannot tell". The culprit's step is then confirmed in time by
  :class:`Bench`: a count that moved says where the work changed, the time says it matters.
- ``kernels`` (:class:`KernelBench`, on ``--device qemu``): the commit where the set of SME2
  micro-kernels that ran changed (a scheme or build change that dropped SME2, or moved to
  other SME2 kernels). Each program runs one block on the emulated device, whose kernel trace
  (:mod:`pytest_sme2.analysis.kernel_trace`) names every kernel that executed; the SME2 ones
  (:func:`pytest_sme2.analysis.isa.isa_family`) are the program's set, kept by its sha256. Two
  programs compare by their sets: a different set is the change looked for, the same set no
  change. Emulated times are never used: not for a probe, not for a culprit."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from pytest_sme2.devices.base import Device
from pytest_sme2.devices.registry import open_device
from pytest_sme2.errors import Sme2Error
from pytest_sme2.gate.ab import judge_ab
from pytest_sme2.gate.decide import START_PAIRS, PairBudget
from pytest_sme2.gate.policy import DEFAULT_INSTRUCTIONS_PCT
from pytest_sme2.instructions.count import count_instructions
from pytest_sme2.measure.block import BenchmarkRun, run_benchmark
from pytest_sme2.measure.pairs import Measure, PairPlan, take_pairs
from pytest_sme2.results import BlockResult, pool_categories
from pytest_sme2.measure.settings import BenchSettings
from pytest_sme2.programs.spec import AS_EXPORTED
from pytest_sme2.results.codec import decode, encode
from pytest_sme2.results.judgement import IMPROVEMENT, NO_CHANGE, REGRESSION
from pytest_sme2.runners.base import Runner
from pytest_sme2.runners.spec import parse_runner_spec
from pytest_sme2.bisect.programs import Program


def key(base: Program, candidate: Program) -> str:
    """What a comparison is keyed by: ``base-sha..candidate-sha@runner@device/tN``."""
    return f"{base.sha256[:16]}..{candidate.sha256[:16]}@{candidate.where}"


# -- what a comparison found, whatever measured it -------------------------------------------

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


# -- time ------------------------------------------------------------------------------------

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


# -- instructions ----------------------------------------------------------------------------

class InstructionBench:
    """Compares programs by instructions per execute (see the module docstring)."""

    measure = "instructions"

    def __init__(self, threshold_pct: float = DEFAULT_INSTRUCTIONS_PCT,
                 say: Callable[[str], None] = print):
        self.threshold_pct = threshold_pct
        self.say = say
        self.counts: dict[str, float] = {}         # program sha256 -> per execute

    def count(self, program: Program) -> float:
        if program.sha256 not in self.counts:
            got = count_instructions(Path(program.pte), threads=program.threads)
            self.counts[program.sha256] = got.per_execute
        return self.counts[program.sha256]

    def compare(self, base: Program, candidate: Program, label: str) -> Compared:
        start = time.monotonic()
        a, b = self.count(base), self.count(candidate)
        ratio = b / a
        t = self.threshold_pct / 100
        status = REGRESSION if ratio > 1 + t else IMPROVEMENT if ratio < 1 - t else NO_CHANGE
        reason = (f"{status.replace('_', ' ')}: {b:,.0f} instructions per execute against "
                  f"{a:,.0f} ({(ratio - 1) * 100:+.2f}%; threshold {self.threshold_pct:g}%)")
        return Compared(status, ratio, ratio, ratio, 0, time.monotonic() - start, reason)

    def close(self) -> None:
        pass


# -- kernels ---------------------------------------------------------------------------------

SME2 = "SME2"       # the isa_family of an SME2 kernel


def _few(names: set[str], most: int = 3) -> str:
    shown = sorted(names)[:most]
    return ", ".join(shown) + (f" and {len(names) - most} more" if len(names) > most else "")


class KernelBench:
    """Compares programs by the SME2 kernels that ran (see the module docstring), on the
    runners and devices of ``bench``; ``target`` is the verdict a different set reads as."""

    measure = "kernels"

    def __init__(self, bench: Bench, target: str, say: Callable[[str], None] = print):
        self.bench, self.target, self.say = bench, target, say
        self.sets: dict[str, frozenset[str]] = {}           # program sha256 -> SME2 kernels

    def kernels(self, program: Program) -> frozenset[str]:
        if program.sha256 not in self.sets:
            runner, device = self.bench.where(program)
            run = BenchmarkRun(model=program.pte, dtype=AS_EXPORTED, threads=program.threads,
                               label=f"bisect/kernels/{program.sha256[:12]}", block=1)
            block = run_benchmark(run, runner, device, self.bench.plan.settings)
            ev = block.kernel_evidence
            if ev is None or not ev.traced:
                raise Sme2Error(f"{program.benchmark}: no kernel trace from {program.device} "
                                "(--measure kernels needs --device qemu)")
            self.sets[program.sha256] = frozenset(k.name for k in ev.executed_kernels
                                                  if k.isa_family == SME2)
        return self.sets[program.sha256]

    def compare(self, base: Program, candidate: Program, label: str) -> Compared:
        start = time.monotonic()
        a, b = self.kernels(base), self.kernels(candidate)
        if a == b:
            reason = f"the same {len(a)} SME2 kernel(s) ran" + (f": {_few(set(a))}" if a else "")
            status = NO_CHANGE
        else:
            gone, new = a - b, b - a
            reason = "the SME2 kernels that ran changed: " + "; ".join(
                x for x in (f"dropped {_few(set(gone))}" if gone else "",
                            f"added {_few(set(new))}" if new else "") if x)
            status = self.target
        return Compared(status, None, None, None, 0, time.monotonic() - start, reason)

    def close(self) -> None:
        pass
