"""Interval estimates for latency ratios, from independent blocks (one runner process each).

Runs inside one process share its caches, frequency and placement, so they understate the
variance between processes: every interval here treats a *block* (one process, its median) as
the unit of replication, never a single run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from pytest_sme2.errors import Sme2Error


@dataclass(frozen=True)
class Interval:
    """A point estimate with a two-sided confidence interval."""

    point: float
    low: float
    high: float
    confidence: float = 0.95

    def __str__(self) -> str:
        return f"{self.point:.3f}x [{self.low:.3f}, {self.high:.3f}]"

    def to_dict(self) -> dict:
        return {"point": self.point, "low": self.low, "high": self.high,
                "confidence": self.confidence}

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high


def _t_quantile(p: float, df: int) -> float:
    """Student's t quantile (scipy is not a dependency): exact for df 1 and 2, a Cornish-Fisher
    expansion beyond (0.975 quantile within 0.15% for df >= 3, e.g. 3.1786 vs 3.1824 at df 3),
    far below the noise of any benchmark."""
    if df < 1:
        raise ValueError("df must be >= 1")
    if df == 1:
        return math.tan(math.pi * (p - 0.5))
    if df == 2:
        a = 4 * p * (1 - p)
        return (2 * p - 1) * math.sqrt(2 / a) if a > 0 else math.inf
    z = NormalDist().inv_cdf(p)
    g1 = (z ** 3 + z) / 4
    g2 = (5 * z ** 5 + 16 * z ** 3 + 3 * z) / 96
    g3 = (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / 384
    g4 = (79 * z ** 9 + 776 * z ** 7 + 1482 * z ** 5 - 1920 * z ** 3 - 945 * z) / 92160
    return z + g1 / df + g2 / df ** 2 + g3 / df ** 3 + g4 / df ** 4


def paired_ratio(base: list[float], candidate: list[float],
                 confidence: float = 0.95) -> Interval:
    """Speed-up of ``candidate`` over ``base`` (base time / candidate time) from paired blocks:
    ``base[i]`` and ``candidate[i]`` ran back to back (interleaved ABAB...), so slow drift of
    the machine cancels within a pair. The interval is a t-interval on the mean log ratio,
    exponentiated: a geometric-mean ratio, symmetric for speed-ups and slow-downs."""
    a = np.asarray(base, dtype=float)
    b = np.asarray(candidate, dtype=float)
    if a.shape != b.shape or a.size == 0:
        raise Sme2Error(f"paired blocks needed: got {a.size} and {b.size}")
    if (a <= 0).any() or (b <= 0).any():
        raise Sme2Error("block medians must be positive to form ratios")
    logs = np.log(a / b)
    mean = float(logs.mean())
    if logs.size < 2:
        return Interval(math.exp(mean), 0.0, math.inf, confidence)
    half = _t_quantile(0.5 + confidence / 2, logs.size - 1) * float(logs.std(ddof=1)) / \
        math.sqrt(logs.size)
    return Interval(math.exp(mean), math.exp(mean - half), math.exp(mean + half), confidence)


def bootstrap_ratio_of_medians(base: list[float], candidate: list[float], confidence: float = 0.95,
                               resamples: int = 5000, seed: int = 0) -> Interval:
    """Ratio median(base) / median(candidate) with a percentile bootstrap interval, resampling
    each side's blocks independently (for unpaired data, e.g. a stored baseline against a new
    session)."""
    a = np.asarray(base, dtype=float)
    b = np.asarray(candidate, dtype=float)
    if a.size == 0 or b.size == 0:
        raise Sme2Error("both sides need at least one block")
    rng = np.random.default_rng(seed)
    ra = np.median(rng.choice(a, size=(resamples, a.size)), axis=1)
    rb = np.median(rng.choice(b, size=(resamples, b.size)), axis=1)
    ratios = ra / rb
    alpha = (1 - confidence) / 2
    return Interval(float(np.median(a) / np.median(b)), float(np.quantile(ratios, alpha)),
                    float(np.quantile(ratios, 1 - alpha)), confidence)
