"""The statistics of a block's timed runs as results.json keeps them (:class:`LatencyStats`);
computed from the runs by :func:`pytest_sme2.analysis.latency.latency_stats`."""

from __future__ import annotations

from dataclasses import dataclass

from pytest_sme2.results.codec import encode


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
