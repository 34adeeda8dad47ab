"""``--measure kernels`` on ``--device qemu``: the commit where the set of SME2 micro-kernels
that ran changed (a scheme or build change that dropped SME2, or moved to other SME2
kernels). Each program runs one block on the emulated device, whose kernel trace
(:mod:`pytest_sme2.analysis.kernel_trace`) names every kernel that executed; the SME2 ones
(:func:`pytest_sme2.analysis.isa.isa_family`) are the program's set, kept by its sha256. Two
programs compare by their sets: a different set is the change looked for, the same set no
change. Emulated times are never used: not for a probe, not for a culprit."""

from __future__ import annotations

import time
from typing import Callable

from pytest_sme2.errors import Sme2Error
from pytest_sme2.measure.block import BenchmarkRun, run_benchmark
from pytest_sme2.programs.spec import AS_EXPORTED
from pytest_sme2.results.judgement import NO_CHANGE
from pytest_sme2.bisect.pairs import Bench, Compared
from pytest_sme2.bisect.programs import Program

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
