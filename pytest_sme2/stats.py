"""Interval estimates for latency ratios, from independent blocks (one runner process each),
and the regression gate's statistics: its noise floor and its two-level bootstrap.

Runs inside one process share its caches, frequency and placement, so they understate the
variance between processes: every interval here treats a *block* (one process, its median) as
the unit of replication, never a single run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist
from typing import Sequence

import numpy as np

from pytest_sme2 import units
from pytest_sme2.errors import Sme2Error


@dataclass(frozen=True)
class Interval:
    """A point estimate with a two-sided confidence interval."""

    point: float
    low: float
    high: float
    confidence: float = 0.95

    def __str__(self) -> str:
        return units.ratio_interval(self)

    def to_dict(self) -> dict:
        return {"point": self.point, "low": self.low, "high": self.high,
                "confidence": self.confidence}


def t_quantile(p: float, df: int) -> float:
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


@lru_cache(maxsize=64)
def _signed_rank_cdf(n: int) -> tuple[float, ...]:
    """P(W+ <= w), w = 0 .. n(n+1)/2, for Wilcoxon's signed-rank statistic of ``n`` pairs with
    no difference: each of the ``2**n`` sign assignments equally likely (exact, by counting)."""
    p = np.zeros(n * (n + 1) // 2 + 1)
    p[0] = 1.0
    for k in range(1, n + 1):          # rank k joins the positive ranks or not
        p[k:] = 0.5 * p[k:] + 0.5 * p[:-k].copy()
        p[:k] *= 0.5
    return tuple(np.cumsum(p))


def hodges_lehmann(values: Sequence[float], confidence: float = 0.95
                   ) -> tuple[float, float, float]:
    """(point, low, high) for the centre of ``values`` (differences, one per pair): the
    Hodges-Lehmann estimate, the median of the Walsh averages (x_i + x_j) / 2, i <= j, with
    the distribution-free interval that inverts Wilcoxon's signed-rank test. It assumes only
    a symmetric distribution, and up to 29% of the values may be wild without moving it far:
    a pair whose two blocks ran at different machine speeds is such a value. Below 6 values
    no 95% interval exists (1 / 2**5 > 2.5%): the bounds are then infinite."""
    x = np.asarray(values, dtype=float)
    n = x.size
    i, j = np.triu_indices(n)
    walsh = np.sort((x[i] + x[j]) / 2)
    point = float(np.median(walsh))
    cdf = np.asarray(_signed_rank_cdf(n))
    k = int(np.searchsorted(cdf, (1 - confidence) / 2, side="right"))  # P(W+ <= k-1) <= a/2
    if k == 0:
        return point, -math.inf, math.inf
    return point, float(walsh[k - 1]), float(walsh[walsh.size - k])


def paired_ratio(base: list[float], candidate: list[float],
                 confidence: float = 0.95) -> Interval:
    """Speed-up of ``candidate`` over ``base`` (base time / candidate time) from paired blocks:
    ``base[i]`` and ``candidate[i]`` ran back to back (interleaved ABAB...), so slow drift of
    the machine cancels within a pair. The point and interval are the Hodges-Lehmann estimate
    of the log ratios with its signed-rank interval (:func:`hodges_lehmann`), exponentiated:
    symmetric for speed-ups and slow-downs, and not swung by the few pairs whose blocks ran
    at different machine speeds (a mean of the log ratios, and its t-interval, are: a machine
    switching between two speeds 1.8x apart gave [0.97, 1.15] where this gives [1.02, 1.06],
    docs/regression-gate.md)."""
    a = np.asarray(base, dtype=float)
    b = np.asarray(candidate, dtype=float)
    if a.shape != b.shape or a.size == 0:
        raise Sme2Error(f"paired blocks needed: got {a.size} and {b.size}")
    if (a <= 0).any() or (b <= 0).any():
        raise Sme2Error("block medians must be positive to form ratios")
    point, low, high = hodges_lehmann(np.log(a / b), confidence)
    return Interval(math.exp(point), math.exp(low), math.exp(high), confidence)


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


# -- the regression gate's statistics (pytest_sme2.gate.rule)
# ---------------------------------------

# A difference smaller than this is not called a difference, whatever the interval says:
# drift between processes on a shared machine is a few percent (see NOTES).
DEFAULT_MARGIN = 0.02
MIN_SESSIONS = 3                  # below this, drift between sessions is taken as unmeasured
PREDICTION = 0.975                # one-sided level of the noise floor (a prediction bound)
UNMEASURED_DRIFT = 0.25           # the least noise floor then (this VM: ±30% between sessions)
# The same minimum for instruction counts (--sme2-measure instructions): they do not drift
# between sessions (a few parts per million: pytest_sme2.instructions.count), so 25% would
# blind their gate.
UNMEASURED_DRIFT_INSTRUCTIONS = 0.001
# Peak resident memory of a runner process moves by well under 1% between processes here
# (mobilenet_v3_small: 26,792-26,888 kB over three): 5% until sessions have shown its drift.
UNMEASURED_DRIFT_MEMORY = 0.05


def noise_floor(sessions: Sequence[Sequence[float]],
                unmeasured: float = UNMEASURED_DRIFT) -> tuple[float, str]:
    """(relative floor, where it came from) from per-session block values.

    The floor is how far one fresh session may land from the baseline level with no change in
    the code: a one-sided 97.5% prediction bound on the log scale,
    ``exp(t(0.975, n-1) * sd * sqrt(1 + 1/n)) - 1``. From ``MIN_SESSIONS`` sessions on, sd and
    n are those of the session levels: drift between sessions is what a new session brings.
    With fewer, that drift has barely been seen (one session's blocks cannot show it at all),
    so all blocks are pooled (more degrees of freedom than 2 session levels give: Student's t
    with 1 df would multiply the sd by 12.7) and the floor is at least ``unmeasured``
    (``UNMEASURED_DRIFT`` for time)."""
    kept = [np.asarray(s, dtype=float) for s in sessions if len(s)]
    if len(kept) >= MIN_SESSIONS:
        values, source = np.array([np.median(s) for s in kept]), f"{len(kept)} sessions"
    else:
        values = np.concatenate(kept) if kept else np.zeros(0)
        source = f"{values.size} block(s) of {len(kept)} session(s)"
    floor = 0.0
    if values.size >= 2:
        logs = np.log(values)
        n = logs.size
        floor = math.expm1(t_quantile(PREDICTION, n - 1) * float(logs.std(ddof=1)) *
                           math.sqrt(1 + 1 / n))
    if len(kept) < MIN_SESSIONS and floor < unmeasured:
        floor = unmeasured
        source += f", at least {unmeasured:.0%} below {MIN_SESSIONS} sessions" \
            if unmeasured == UNMEASURED_DRIFT else \
            f", at least {unmeasured:.1%} below {MIN_SESSIONS} sessions"
    return floor, source


def two_level_bootstrap(sessions: Sequence[Sequence[float]], current: Sequence[float],
                        confidence: float = 0.95, resamples: int = 4000, seed: int = 0
                        ) -> tuple[float, float]:
    """Percentile interval of median(current*) / median_s(median(session_s*)): a cluster
    bootstrap that resamples baseline sessions, then blocks within each drawn session, and the
    current blocks. ``sessions`` holds one value per block for each session."""
    blocks = [np.asarray(s, dtype=float) for s in sessions]
    cur = np.asarray(current, dtype=float)
    rng = np.random.default_rng(seed)
    s = len(blocks)
    # draws[j][r, k]: a block-resampled median of session j, for replicate r and slot k
    draws = np.stack([np.median(rng.choice(blk, size=(resamples, s, blk.size)), axis=2)
                      for blk in blocks])                         # (s, resamples, s)
    pick = rng.integers(0, s, size=(resamples, s))
    rows = np.arange(resamples)[:, None]
    base = np.median(draws[pick, rows, np.arange(s)[None, :]], axis=1)
    resampled = np.median(rng.choice(cur, size=(resamples, cur.size)), axis=1)
    ratios = resampled / base
    alpha = (1 - confidence) / 2
    return float(np.quantile(ratios, alpha)), float(np.quantile(ratios, 1 - alpha))


FASTER, SLOWER, SAME = "faster", "slower", "no significant difference"


def verdict(speedup: Interval, margin: float = DEFAULT_MARGIN) -> str:
    """Faster or slower only when the whole interval clears the noise margin (by default the
    session's, :data:`DEFAULT_MARGIN`)."""
    if speedup.low > 1 + margin:
        return FASTER
    if speedup.high < 1 / (1 + margin):
        return SLOWER
    return SAME
