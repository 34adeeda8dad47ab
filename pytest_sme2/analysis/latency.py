"""End-to-end latency: one ``Method::execute`` duration per run, and robust statistics of them.

``Method::execute`` is the outermost event of a run; everything else nests inside it, so summing
events double counts. We never sum: one value per run, straight from that event.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # only annotations: results.json readers need no pandas
    import pandas as pd

from pytest_sme2.errors import Sme2Error
from pytest_sme2.results.timing import LatencyStats
from pytest_sme2.analysis.events import name_is

E2E_EVENT = "Method::execute"


class NoRunsError(Sme2Error):
    pass


def e2e_per_run(events: pd.DataFrame, source: str = "ETDump") -> pd.Series:
    """Method::execute milliseconds per Execute run, indexed by run, in run order.

    A run without a Method::execute event (a truncated trace) is left out rather than guessed;
    callers compare the length with the number of runs they asked for."""
    import pandas as pd  # pandas: only e2e_per_run() needs it

    run = events["run"].to_numpy()
    in_run = run >= 0
    if not in_run.any():
        raise NoRunsError(f"{source}: the ETDump holds no Execute runs (nothing was executed)")
    execute = in_run & name_is(events["name"], E2E_EVENT)
    if not execute.any():
        raise NoRunsError(f"{source}: no Method::execute events in {np.unique(run[in_run]).size} "
                          "runs (the runtime's profiler did not record the method; was it built "
                          "with the event tracer?)")
    # If a run ever held several (nested methods), the outermost is the longest. fmax skips
    # NaN as groupby's max does.
    runs, which = np.unique(run[execute], return_inverse=True)
    per_run = np.full(runs.size, np.nan)
    np.fmax.at(per_run, which, events["duration_ms"].to_numpy()[execute])
    return pd.Series(per_run, index=pd.Index(runs, name="run"), name="e2e_ms")


def latency_stats(samples_ms) -> LatencyStats:
    x = np.asarray(samples_ms, dtype=float)
    if x.size == 0:
        raise NoRunsError("no timed runs to summarise (all runs were warm-up or missing)")
    median = float(np.median(x))
    mean = float(x.mean())
    std = float(x.std(ddof=1)) if x.size > 1 else 0.0
    p10, q1, q3, p90 = np.percentile(x, [10, 25, 75, 90])  # one partition, same values
    iqr = q3 - q1
    outliers = int(((x < q1 - 1.5 * iqr) | (x > q3 + 1.5 * iqr)).sum())
    return LatencyStats(
        n=int(x.size),
        median_ms=median,
        mean_ms=mean,
        p10_ms=float(p10),
        p90_ms=float(p90),
        min_ms=float(x.min()),
        max_ms=float(x.max()),
        std_ms=std,
        cv_pct=100.0 * std / mean if mean > 0 else 0.0,
        mad_ms=float(np.median(np.abs(x - median))),
        outliers=outliers,
    )


def timed_runs(per_run: pd.Series, warmup: int) -> pd.Series:
    """Drop the first ``warmup`` runs of the file (cold caches, lazy packing)."""
    return per_run[per_run.index >= warmup]
