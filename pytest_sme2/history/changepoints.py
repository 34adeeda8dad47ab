"""Change points in one series (one benchmark key, commits in order), found with PELT
(ruptures: Killick et al. 2012, exact and linear-time) on the log of the per-commit medians,
scaled by the series' own noise so one penalty fits quiet and noisy series alike. Each change
gets the commit range, the magnitude with a 95% interval (Welch, over the segments either side)
and what else changed there. Pure: a DataFrame in, records out."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from pytest_sme2.history import require

MIN_SEGMENT = 3          # commits either side: a single slow commit is noise, not a change
PENALTY_PER_LOG_N = 4.0  # BIC-like penalty in noise units: pen = 4 * log(n)
MIN_NOISE = 0.003        # 0.3%: the floor of the noise scale (a perfectly quiet series)


@dataclass(frozen=True)
class ChangePoint:
    key_digest: str
    series: str
    before_commit: str          # the last commit of the old level
    commit: str                 # the first commit of the new level
    order: int
    change_pct: float           # new level / old level - 1, in percent
    low_pct: float              # 95% interval of change_pct
    high_pct: float
    kind: str                   # "regression" (slower) or "improvement"
    what_changed: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def noise_scale(log_values: np.ndarray) -> float:
    """Robust noise of a series: the MAD of successive differences (a step moves one
    difference only), as a standard deviation of one value."""
    if len(log_values) < 3:
        return MIN_NOISE
    d = np.diff(log_values)
    mad = float(np.median(np.abs(d - np.median(d)))) * 1.4826 / math.sqrt(2)
    return max(mad, MIN_NOISE)


def _cumulative_l2_cost():
    """ruptures' l2 cost (sum of squared deviations from the segment mean) from cumulative
    sums: O(1) per segment where ruptures' own CostL2 computes a variance each time (0.5 s per
    200-commit series, 25 s for 50 series)."""
    from ruptures.base import BaseCost

    class CumulativeL2(BaseCost):
        model = "l2_cumulative"
        min_size = 1

        def fit(self, signal: np.ndarray) -> CumulativeL2:
            x = np.asarray(signal, dtype=float).reshape(len(signal), -1)
            self.signal = x
            self.s1 = np.vstack([np.zeros((1, x.shape[1])), np.cumsum(x, axis=0)])
            self.s2 = np.vstack([np.zeros((1, x.shape[1])), np.cumsum(x * x, axis=0)])
            return self

        def error(self, start: int, end: int) -> float:
            n = end - start
            s1 = self.s1[end] - self.s1[start]
            return float(np.sum(self.s2[end] - self.s2[start] - s1 * s1 / n))

    return CumulativeL2()


def median3(x: np.ndarray) -> np.ndarray:
    """A running median of 3 (ends kept): one slow session is gone, a step keeps its edge
    exactly (measured: single outliers of +16% and +22% in 24 quiet real sessions were each
    called a change without it)."""
    if len(x) < 3:
        return x
    out = x.copy()
    out[1:-1] = np.median(np.stack([x[:-2], x[1:-1], x[2:]]), axis=0)
    return out


def breakpoints(values: np.ndarray) -> list[int]:
    """Indices where a new level starts (PELT, l2 cost, on the noise-scaled log series)."""
    require("ruptures")
    import ruptures as rpt

    n = len(values)
    if n < 2 * MIN_SEGMENT:
        return []
    logs = np.log(values)
    # The noise of the raw series (the filtered one looks quieter than the sessions are).
    signal = (median3(logs) / noise_scale(logs)).reshape(-1, 1)
    algo = rpt.Pelt(custom_cost=_cumulative_l2_cost(), min_size=MIN_SEGMENT, jump=1).fit(signal)
    return [b for b in algo.predict(pen=PENALTY_PER_LOG_N * math.log(n)) if b < n]


def _interval(before: np.ndarray, after: np.ndarray) -> tuple[float, float, float]:
    """Ratio of geometric means - 1 (percent) and its 95% Welch interval on the logs."""
    from scipy import stats

    a, b = np.log(before), np.log(after)
    diff = b.mean() - a.mean()
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    se = math.sqrt(va + vb)
    if se == 0:
        return (math.expm1(diff) * 100,) * 3
    dof = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    t = float(stats.t.ppf(0.975, dof))
    return tuple(math.expm1(x) * 100 for x in (diff, diff - t * se, diff + t * se))


def significant(values: np.ndarray, cuts: list[int]) -> list[int]:
    """The cuts whose 95% interval of the change clears zero, the weakest dropped first and the
    others judged again against their widened neighbours."""
    cuts = list(cuts)
    while cuts:
        edges = [0, *cuts, len(values)]
        judged = []
        for i, cut in enumerate(cuts):
            pct, low, high = _interval(values[edges[i]:cut], values[cut:edges[i + 2]])
            judged.append((low <= 0 <= high, -min(abs(low), abs(high)), i))
        weak = [j for j in judged if j[0]]
        if not weak:
            return cuts
        cuts.pop(min(weak)[2])
    return cuts


def what_changed(prev: pd.Series, row: pd.Series) -> dict[str, Any]:
    """Versions, export hash and SME2 verdict that differ across the change, and the category
    that moved most (by its mean ms per run)."""
    out: dict[str, Any] = {}
    for column in ("executorch", "export_key", "sme2"):
        if prev[column] != row[column]:
            out[column] = [prev[column], row[column]]
    old_v, new_v = prev["versions"] or {}, row["versions"] or {}
    versions = {k: [old_v.get(k), new_v.get(k)] for k in sorted(set(old_v) | set(new_v))
                if old_v.get(k) != new_v.get(k)}
    if versions:
        out["versions"] = versions
    old_c, new_c = prev["categories_ms"] or {}, row["categories_ms"] or {}
    moves = {k: new_c.get(k, 0.0) - old_c.get(k, 0.0) for k in set(old_c) | set(new_c)}
    top = max(moves, key=lambda k: abs(moves[k]), default=None)
    if top is not None and round(moves[top], 4) != 0:
        out["category"] = {"name": top, "delta_ms": round(moves[top], 4)}
    return out


def find(series: pd.DataFrame, name: str) -> list[ChangePoint]:
    """Change points of one key's per-commit rows (``series.per_commit``, one key)."""
    s = series.sort_values("order").reset_index(drop=True)
    values = s["median_ms"].to_numpy(dtype=float)
    cuts = significant(values, breakpoints(values))
    edges = [0, *cuts, len(values)]
    found = []
    for i, cut in enumerate(cuts):
        before, after = values[edges[i]:cut], values[cut:edges[i + 2]]
        pct, low, high = _interval(before, after)
        prev, row = s.iloc[cut - 1], s.iloc[cut]
        found.append(ChangePoint(
            key_digest=str(row["key_digest"]), series=name, before_commit=str(prev["commit"]),
            commit=str(row["commit"]), order=int(row["order"]), change_pct=round(pct, 2),
            low_pct=round(low, 2), high_pct=round(high, 2),
            kind="regression" if pct > 0 else "improvement",
            what_changed=what_changed(prev, row)))
    return found
