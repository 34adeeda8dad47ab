"""The JSON line our runners (native, python) print last, parsed: what a process's ETDump cannot
hold (its own load timers, resident memory). A runner's output is read here, below the runners
that print it, so the analysis of a process never imports a runner."""

from __future__ import annotations

import json
from dataclasses import dataclass


@dataclass(frozen=True)
class RunnerSummary:
    """The JSON line our runners (native, python) print last: what the ETDump cannot hold. A
    user's executor_runner prints none: every field is None then."""

    threads: int | None = None
    executions: int | None = None
    program_load_ms: float | None = None    # Module::load (+ method names), runner's timer
    method_load_ms: float | None = None     # Module::load_method, runner's timer
    rss_before_load_kb: int | None = None   # resident memory before the program loads
    rss_after_load_kb: int | None = None    # ... after the method loads
    peak_rss_kb: int | None = None          # VmHWM at the end of the process
    # What rss_after_load_kb includes beyond the load ("first run": the Python runtime loads
    # the method inside the first forward()), "" when nothing.
    rss_after_load_includes: str = ""
    peak_includes: str = ""     # what the process holds beyond the runtime, if much

    @property
    def load_rss_kb(self) -> int | None:
        """Resident memory the program and method load added."""
        if self.rss_before_load_kb is None or self.rss_after_load_kb is None:
            return None
        return self.rss_after_load_kb - self.rss_before_load_kb


def _number(v: object) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _count(v: object) -> int | None:
    n = _number(v)
    return int(n) if n is not None else None


def parse_summary(stdout: str) -> RunnerSummary:
    """The summary from a runner's stdout: its last line that is a JSON object, or an empty
    summary when there is none (a user's executor_runner)."""
    for line in reversed(stdout.strip().splitlines()):
        line = line.strip()
        if not (line.startswith("{") and line.endswith("}")):
            continue
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if not isinstance(d, dict):
            continue
        return RunnerSummary(
            threads=_count(d.get("threads")), executions=_count(d.get("executions")),
            program_load_ms=_number(d.get("program_load_ms")),
            method_load_ms=_number(d.get("method_load_ms")),
            rss_before_load_kb=_count(d.get("rss_before_load_kb")),
            rss_after_load_kb=_count(d.get("rss_after_load_kb")),
            peak_rss_kb=_count(d.get("peak_rss_kb")),
            rss_after_load_includes=str(d.get("rss_after_load_includes") or ""),
            peak_includes=str(d.get("peak_includes") or ""))
    return RunnerSummary()
