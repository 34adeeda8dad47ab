"""Progress of a long benchmarking session: "case i of n" with the elapsed time, at most one
line per interval, so a phone session of many minutes shows it is alive without a line per
block. A case is a test that benchmarks (uses ``sme2_bench`` or ``sme2_compare``); its blocks
(runner processes) report as they finish, so a long comparison or a slow block shows too.

When a line is due (:func:`interval`): ``--sme2-progress auto`` prints at most every 30 s (the
first once the session has run 30 s), every 5 minutes under ``-q``, never under ``-qq``; a
number of seconds applies as given in every mode (0: before every case and after every
block); ``off`` never. Pure: the clock is an argument."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

EVERY_S = 30.0            # auto: a session that has run this long prints, then this often
QUIET_EVERY_S = 300.0     # auto under -q: CI logs stay short, a stuck session still shows
# The clock progress lines read; an inner test session may set it (tests/plugin).
clock: Callable[[], float] = time.monotonic


def interval(setting: float | str | None, verbosity: int) -> float | None:
    """Seconds between progress lines for ``--sme2-progress`` ``setting`` ("auto", seconds,
    or None: off) at pytest's ``verbosity`` (-1 for -q, -2 for -qq); None: never."""
    if setting is None:
        return None
    if setting != "auto":
        return float(setting)
    if verbosity <= -2:
        return None
    return QUIET_EVERY_S if verbosity == -1 else EVERY_S


def elapsed_text(seconds: float) -> str:
    """``42 s``, ``4 min 05 s``, ``1 h 02 min``."""
    s = int(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


@dataclass
class SessionProgress:
    """Counts a session's ``total`` cases and says where it is when a line is due."""

    total: int
    every_s: float | None
    clock: Callable[[], float] = field(default=time.monotonic, repr=False)
    case: int = 0
    name: str = ""

    def __post_init__(self) -> None:
        self.started = self.last = self.clock()

    def _due(self) -> tuple[bool, float]:
        now = self.clock()
        due = self.every_s is not None and now - self.last >= self.every_s
        if due:
            self.last = now
        return due, now - self.started

    def case_started(self, name: str) -> str | None:
        """The line to print as case ``name`` starts, if one is due."""
        self.case, self.name = self.case + 1, name
        due, elapsed = self._due()
        return (f"case {self.case} of {self.total}: {name} ({elapsed_text(elapsed)} elapsed)"
                if due else None)

    def block_done(self, block: int, blocks: int | None = None) -> str | None:
        """The line to print as the current case's ``block``-th block (1-based) of
        ``blocks`` (None: not known in advance) finishes, if one is due."""
        due, elapsed = self._due()
        if not due or not self.case:
            return None
        of = f" of {blocks}" if blocks else ""
        return (f"case {self.case} of {self.total}, block {block}{of} done: {self.name} "
                f"({elapsed_text(elapsed)} elapsed)")
