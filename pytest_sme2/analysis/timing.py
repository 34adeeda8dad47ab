"""One runner process's timed runs and traced runs, told apart.

A runner that times without its tracer (``RunRequest.untraced``) prints each timed execute by its
own clock (its summary's ``execute_ms``) and leaves only its traced runs in the ETDump. Here the
clock's values become a frame in :func:`pytest_sme2.readers.etdump.read_etdump`'s columns, one
``Method::execute`` event per execute, so that the latency and phase analyses read timed runs as
they read traced ones; the ETDump stays the operator breakdown's. A runner that traced its timed
runs gives one frame for both. Pure functions over frames.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from pytest_sme2.analysis.latency import E2E_EVENT
from pytest_sme2.analysis.runner_summary import GenerationSummary, RunnerSummary
from pytest_sme2.errors import Sme2Error
from pytest_sme2.readers.etdump import EVENT_COLUMNS, TICKS_PER_MS
from pytest_sme2.results.timing import TRACED, UNTRACED, LatencyStats, Timing, overhead_pct

NATIVE_CLOCK = "the runner's clock around each Method::execute, no event tracer in the process"
PYTHON_CLOCK = ("the runner's clock around each ExecuTorchMethod.execute() (Method::execute and "
                "one call into the Python bindings), no event tracer in the process")
TEXT_LLM_CLOCK = ("our clock around each Method::execute inside ExecuTorch's TextLLMRunner "
                  "(a preloaded library), no event tracer in the process")
# What a runner's execute_span names -> how its clock is said
SPANS = {"": NATIVE_CLOCK, "ExecuTorchMethod.execute()": PYTHON_CLOCK,
         "Method::execute() inside ExecuTorch's TextLLMRunner": TEXT_LLM_CLOCK}
THROUGH_TRACER = ("Method::execute events of the same runs the operator breakdown is from "
                  "(ETDump, every operator traced: this runner cannot time without its tracer)")


class TimingError(Sme2Error):
    pass


def clock_events(execute_ms: Sequence[float]) -> pd.DataFrame:
    """One ``Method::execute`` event per execute (run 0, 1, ... in order), in the ETDump
    reader's columns: start and end laid end to end from 0, durations as timed."""
    ms = np.asarray(execute_ms, dtype=float)
    ticks = np.rint(ms * TICKS_PER_MS).astype(np.int64)
    end = np.cumsum(ticks)
    start = end - ticks
    n = ms.size
    runs = np.arange(n, dtype=np.int32)
    return pd.DataFrame({
        "block": runs,
        "block_name": pd.Categorical(["Execute"] * n),
        "run": runs,
        "seq": np.zeros(n, dtype=np.int32),
        "name": pd.Categorical([E2E_EVENT] * n),
        "instruction_id": np.full(n, -1, dtype=np.int32),
        "delegate_debug_id": np.full(n, -1, dtype=np.int32),
        "delegated": np.zeros(n, dtype=bool),
        "start": start.astype(np.uint64),
        "end": end.astype(np.uint64),
        "duration_ms": ms,
    }, columns=EVENT_COLUMNS)


@dataclass(frozen=True)
class ProcessRuns:
    """A process's timed runs (``timed``: their Method::execute events, one per execute, the
    warm-up ones first) and traced runs (``traced``: the ETDump's events, for categories,
    operators and kernels; None where the process traced nothing), with how they were timed."""

    timed: pd.DataFrame
    traced: pd.DataFrame | None
    traced_warmup: int
    timing: Timing

    @property
    def separate(self) -> bool:
        """Timed runs apart from traced ones. Untimed by a tracer but traced nowhere (a runner
        that cannot trace: ExecuTorch's TextLLMRunner) is one set of runs, the timed."""
        return self.timing.untraced and self.traced is not None


def process_runs(etdump_events: pd.DataFrame | None, summary: RunnerSummary, warmup: int,
                 source: str) -> ProcessRuns:
    """Split one process's output: ``etdump_events`` (its ETDump read, or None where it wrote
    none), ``summary`` its runner's summary line, ``warmup`` the timed runs' warm-up."""
    if summary.timing != UNTRACED:
        if etdump_events is None:
            raise TimingError(f"{source}: the runner traced its runs but left no ETDump")
        return ProcessRuns(etdump_events, etdump_events, warmup,
                           Timing(TRACED, THROUGH_TRACER))
    if not summary.execute_ms:
        raise TimingError(f"{source}: the runner timed its runs untraced but printed no "
                          "execute_ms (a runner of another version?)")
    how = SPANS.get(summary.execute_span, f"the runner's clock around {summary.execute_span}")
    traced = summary.traced
    return ProcessRuns(clock_events(summary.execute_ms), etdump_events,
                       traced.warmup if traced else 0,
                       Timing(UNTRACED, how, traced_runs=traced.runs if traced else 0,
                              clock_overhead_ns=summary.clock_overhead_ns))


def traced_generation(summary: GenerationSummary, traced_warmup: int,
                      traced_runs: int) -> GenerationSummary:
    """The generation loop as the traced pass ran it: the same prompt, tokens and executes per
    generation, its own count of generations; the runner's timers are the timed pass's."""
    return dataclasses.replace(summary, warmup=traced_warmup,
                               generations=traced_warmup + traced_runs, prefill_ms=(),
                               first_sampling_ms=(), sampling_ms=(), decode_ms=(),
                               generation_ms=())


def with_traced_e2e(timing: Timing, traced: LatencyStats, timed_median_ms: float) -> Timing:
    """``timing`` with the traced runs' E2E (median, and the mean the breakdown adds up to)
    beside the timed median, and what tracing added."""
    if not timing.untraced:
        return timing
    return dataclasses.replace(timing, traced_median_ms=round(traced.median_ms, 6),
                               traced_mean_ms=traced.mean_ms,
                               overhead_pct=overhead_pct(traced.median_ms, timed_median_ms))
