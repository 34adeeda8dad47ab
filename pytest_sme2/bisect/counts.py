"""``--measure instructions``: a deterministic bisect on the host. Each commit's program is
counted once (:func:`pytest_sme2.instructions.count_instructions`: instructions per
``Method::execute`` under valgrind, one pair of processes per program, kept by its sha256), and
two programs compare by the ratio of their counts against a small relative threshold — counts do
not drift with the machine, so there is no interval to wait for and never a "cannot tell". The
culprit's step is then confirmed in time by the normal probe (:class:`pytest_sme2.bisect.pairs.
Bench`): a count that moved says where the work changed, the time says it matters."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

from pytest_sme2.gate.policy import DEFAULT_INSTRUCTIONS_PCT
from pytest_sme2.instructions.count import count_instructions
from pytest_sme2.results.judgement import IMPROVEMENT, NO_CHANGE, REGRESSION
from pytest_sme2.bisect.pairs import Compared
from pytest_sme2.bisect.programs import Program


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

