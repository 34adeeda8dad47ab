"""Load time, first inference and memory of one runner process, from its ETDump and the summary
line its runner printed. Pure functions; the runs happen in :mod:`pytest_sme2.measure.block`.

Where each figure comes from, in order of preference:

- method load: the runtime's own ``Program::load_method`` event (the ETDump's ``Default``
  block; it includes delegate initialisation, where XNNPACK packs weights for KleidiAI), else
  the runner's timer around the same call;
- program load (``Module::load``): the runner's timer — the runtime traces no event for it;
- first inference: the first run's ``Method::execute`` event, before warm-up is discarded;
- memory: the runner's own reading of ``/proc/self/status`` (VmRSS before the load and after
  the method load; VmHWM at the end).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from pytest_sme2.analysis.events import name_is
from pytest_sme2.results import ProcessStartup
from pytest_sme2.analysis.runner_summary import RunnerSummary

LOAD_EVENT = "Program::load_method"


def traced_method_load_ms(events: pd.DataFrame) -> float | None:
    """``Program::load_method``'s duration (ms) outside the Execute blocks, or None when the
    runtime traced no load (a tracer attached after the load)."""
    loads = events["duration_ms"].to_numpy()[(events["run"].to_numpy() < 0)
                                              & name_is(events["name"], LOAD_EVENT)]
    # NaN counts as 0, as pandas' sum has it
    return float(np.where(np.isnan(loads), 0.0, loads).sum()) if len(loads) else None


def process_startup(events: pd.DataFrame, e2e_all: pd.Series,
                    summary: RunnerSummary) -> ProcessStartup:
    """One process's cold start: ``events`` from read_etdump, ``e2e_all`` its Method::execute
    per run (warm-up included), ``summary`` what its runner printed."""
    method = traced_method_load_ms(events)
    if method is None:
        method = summary.method_load_ms
    program = summary.program_load_ms
    load = None if method is None else method + (program or 0.0)
    return ProcessStartup(
        load_ms=_round(load), method_load_ms=_round(method), program_load_ms=_round(program),
        first_inference_ms=_round(float(e2e_all.iloc[0])) if len(e2e_all) else None,
        peak_rss_kb=summary.peak_rss_kb, load_rss_kb=summary.load_rss_kb)


def load_source(events: pd.DataFrame, summary: RunnerSummary) -> str:
    """Says which events and timers ``load_ms`` adds up, for reports."""
    if traced_method_load_ms(events) is not None:
        method = f"{LOAD_EVENT} (ETDump)"
    elif summary.method_load_ms is not None:
        method = "method load (runner's timer)"
    else:
        return "not measured: no load event in the ETDump and no timing from this runner"
    if summary.program_load_ms is None:
        return f"{method}; program load not timed by this runner"
    return f"{method} + Module::load (runner's timer)"


def memory_source(summary: RunnerSummary, emulated: bool = False) -> str:
    if summary.peak_rss_kb is None:
        return "not reported by this runner (pytest-sme2's native and python runners report it)"
    what = "VmHWM / VmRSS of the runner process"
    if emulated:  # qemu-user passes /proc/self/status through: the emulator's own process
        what = "VmHWM / VmRSS of the QEMU process (guest and emulator together)"
    if summary.peak_includes:
        what += f" (it holds {summary.peak_includes})"
    if summary.rss_after_load_includes:
        what += f"; load memory includes the {summary.rss_after_load_includes}"
    return what


def _round(v: float | None) -> float | None:
    return None if v is None else round(float(v), 6)
