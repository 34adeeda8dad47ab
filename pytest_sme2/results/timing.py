"""A block's latency: the statistics of its timed runs (:class:`LatencyStats`, results.json's
``e2e``), how they were timed and what operator tracing costs beside them (:class:`Timing`).
The statistics are computed from the runs by :func:`pytest_sme2.analysis.latency.latency_stats`.

An ETDump that records every operator and delegate event puts the recording's own cost inside
``Method::execute`` (about 0.5 us per event here: +5% on a CNN, +40-55% on a small LLM's decode
step). So the runs whose latency is reported carry no tracer where the runner can run without
one (``untraced``: the runner's own clock around each execute), and the operator breakdown comes
from traced runs of the same program in the same process, after the timed ones. A runner that
cannot run without its tracer (a user's ``executor_runner``, ``llama_main``) is timed through it
(``operator-traced``), and its line says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_sme2.results.codec import decode, encode

UNTRACED = "untraced"
TRACED = "operator-traced"
# A baseline or result recorded before the timing mode was recorded: every earlier version timed
# through the full operator tracer.
BEFORE_RECORDED = TRACED
# Above this, the terminal says what tracing added (report.md always does).
LOUD_OVERHEAD_PCT = 10.0


@dataclass(frozen=True)
class LatencyStats:
    """Statistics of timed runs in milliseconds. Outliers (Tukey's 1.5 IQR rule) are counted
    and reported, never dropped: a bimodal device is a finding, not noise to hide."""

    n: int
    median_ms: float
    mean_ms: float
    p10_ms: float
    p90_ms: float
    min_ms: float
    max_ms: float
    std_ms: float
    cv_pct: float
    mad_ms: float
    outliers: int

    to_dict = encode


@dataclass(frozen=True)
class Timing:
    """``mode``: UNTRACED or TRACED; ``source``: which runs and which clock made the latency;
    ``traced_median_ms``: the traced runs' median ``Method::execute`` (per decode step for an
    LLM), the breakdown's own E2E; ``overhead_pct``: what tracing added to the median;
    ``traced_mean_ms``: their mean, which the categories add up to; ``traced_runs``: the traced
    runs the breakdown averages; ``clock_overhead_ns``: what one timing (two clock reads) costs on
    the device, measured in the runner's process."""

    mode: str = BEFORE_RECORDED
    source: str = ""
    traced_median_ms: float | None = None
    overhead_pct: float | None = None
    traced_mean_ms: float | None = None
    traced_runs: int = 0
    clock_overhead_ns: float | None = None

    @property
    def untraced(self) -> bool:
        return self.mode == UNTRACED

    def breakdown_line(self) -> str:
        """report.md's line above a benchmark's breakdown."""
        if not self.untraced:
            return ("latency and breakdown are from the same operator-traced runs: this runner "
                    "cannot time without its tracer, so the recording's cost is inside "
                    "Method::execute")
        if self.overhead_pct is None:
            return "the breakdown below is from traced runs (their E2E: not measured)"
        # Below zero, tracing cost less than what differs between the two sets of runs: the
        # timed runs' clock spans more than the traced Method::execute event (the Python
        # runner's spans a call into the bindings), or the runs' own spread.
        less = (" (less than nothing: tracing cost less than the timed runs' clock adds around "
                "Method::execute, or than the runs vary)" if self.overhead_pct < 0 else "")
        return (f"operator tracing added {self.overhead_pct:+.1f}% to Method::execute{less}; "
                f"the breakdown below is from traced runs (Other = their own E2E "
                f"{self.traced_median_ms:.3f} ms - the named categories)")

    def terminal_note(self, timed_p90_ms: float | None = None) -> str | None:
        """The terminal's note, only where tracing cost more than ``LOUD_OVERHEAD_PCT``; where
        the traced median is no higher than the timed runs' p90 (``timed_p90_ms``), the note says
        so: a 2-thread process that caught a slow spell (NOTES: bimodal for seconds) makes such
        a figure as well as tracing does."""
        if self.overhead_pct is None or self.overhead_pct <= LOUD_OVERHEAD_PCT:
            return None
        within = (timed_p90_ms is not None and self.traced_median_ms is not None
                  and self.traced_median_ms <= timed_p90_ms)
        spread = (f" (within the timed runs' own spread: traced median "
                  f"{self.traced_median_ms:.3f} ms <= their p90 {timed_p90_ms:.3f} ms)"
                  if within else "")
        return (f"operator tracing adds {self.overhead_pct:+.1f}% here{spread}: latency from "
                f"untraced runs, breakdown from traced ones")

    to_dict = encode
    from_dict = classmethod(decode)


def overhead_pct(traced_median_ms: float, untraced_median_ms: float) -> float | None:
    """What tracing added to the median, in percent of the untraced median."""
    if untraced_median_ms <= 0:
        return None
    return round(100.0 * (traced_median_ms / untraced_median_ms - 1.0), 2)


def timing_change(old_mode: str | None, new_mode: str | None) -> str | None:
    """The gate's "changed since baseline" entry when the timing mode changed; a baseline
    recorded before modes were recorded was operator-traced."""
    old, new = old_mode or BEFORE_RECORDED, new_mode or BEFORE_RECORDED
    if old == new:
        return None
    return f"timing: {old} -> {new} (re-record the baseline: --save-baseline)"
