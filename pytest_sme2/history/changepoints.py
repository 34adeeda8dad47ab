"""Change points in one series (one benchmark key, commits in order), found with PELT
(ruptures: Killick et al. 2012, exact and linear-time) on the log of the per-commit medians,
scaled by the series' own noise so one penalty fits quiet and noisy series alike. Each change
gets the commit range, the magnitude with a 95% interval (Welch, over the segments either side)
and what else changed there. A change smaller than the minimum change (``--min-change``; by
default the larger of ``MIN_CHANGE_PCT`` and the series' noise floor) is real but too small to
matter: it is kept apart as a *shift*, never called a regression or an improvement. Pure: a
DataFrame in, records out."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from pytest_sme2.analysis.machine_state import STRADDLE
from pytest_sme2.history import MIN_CHANGE_PCT, require
from pytest_sme2.results.codec import encode

MIN_SEGMENT = 3          # commits either side: a single slow commit is noise, not a change
PENALTY_PER_LOG_N = 4.0  # BIC-like penalty in noise units: pen = 4 * log(n)
MIN_NOISE = 0.003        # 0.3%: the floor of the noise scale (a perfectly quiet series)
NOISE_FLOOR_Z = 1.96     # the noise floor: 95% of one commit's medians lie within it
SHIFT = "shift"          # the kind of a change below the minimum change


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
    kind: str                   # "regression" (slower), "improvement", or SHIFT (too small)
    what_changed: dict[str, Any] = field(default_factory=dict)

    to_json = encode


def noise_scale(log_values: np.ndarray) -> float:
    """Robust noise of a series: the MAD of successive differences (a step moves one
    difference only), as a standard deviation of one value."""
    if len(log_values) < 3:
        return MIN_NOISE
    d = np.diff(log_values)
    mad = float(np.median(np.abs(d - np.median(d)))) * 1.4826 / math.sqrt(2)
    return max(mad, MIN_NOISE)


def noise_floor_pct(values: np.ndarray) -> float:
    """The series' own noise floor, in percent: how far one commit's median lands from its level
    with no change in the code, ``expm1(1.96 * noise_scale(log medians))``. ``noise_scale`` is
    the session-to-session spread of the medians (the MAD of successive differences of their
    logs, as the sd of one value): a step moves one difference only, so a real change does not
    raise the floor that would hide it."""
    logs = np.log(np.asarray(values, dtype=float))
    return math.expm1(NOISE_FLOOR_Z * noise_scale(logs)) * 100


def min_change_pct(values: np.ndarray, requested: float | None = None) -> float:
    """The least |change| (percent) called a regression or an improvement in this series:
    ``requested`` (``--min-change``) when given, else the larger of ``MIN_CHANGE_PCT`` and the
    series' noise floor."""
    if requested is not None:
        return float(requested)
    return max(MIN_CHANGE_PCT, noise_floor_pct(values))


def _cumulative_l2_cost():
    """ruptures' l2 cost (sum of squared deviations from the segment mean) from cumulative
    sums: O(1) per segment where ruptures' own CostL2 computes a variance each time (0.5 s per
    200-commit series, 25 s for 50 series)."""
    from ruptures.base import BaseCost  # ruptures: an optional extra ([history])

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
    import ruptures as rpt  # ruptures: an optional extra ([history])

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
    from scipy import stats  # scipy: an optional extra ([history])

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


def split_by_size(values: np.ndarray, cuts: list[int], min_pct: float
                  ) -> tuple[list[int], list[int]]:
    """(cuts whose |change| is at least ``min_pct`` percent, the smaller ones): the smallest
    change below it is set apart first and the others measured again against their widened
    neighbours, so a kept change is measured between the levels that remain."""
    kept, small = list(cuts), []
    while kept:
        edges = [0, *kept, len(values)]
        sizes = [(abs(_interval(values[edges[i]:cut], values[cut:edges[i + 2]])[0]), i)
                 for i, cut in enumerate(kept)]
        below = [s for s in sizes if s[0] < min_pct]
        if not below:
            break
        small.append(kept.pop(min(below)[1]))
    return kept, sorted(small)


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


def describe(changed: dict[str, Any]) -> str:
    """``what_changed`` in words, one line: the markdown report and the page both print this."""
    parts = []
    for k, v in changed.items():
        if k == "category":
            parts.append(f"most moved: {v['name']} {v['delta_ms']:+.3g} ms")
        elif k == "versions":
            parts += [f"{name} {a}->{b}" for name, (a, b) in v.items()]
        else:
            parts.append(f"{k} {v[0]}->{v[1]}")
    return "; ".join(parts) or "-"


@dataclass(frozen=True)
class OffSpeed:
    """A commit whose sessions ran while the machine ran at another speed than the series'
    typical (the machine-state probe's time ``ratio`` times its median): its median measures
    the machine, so it makes no change point; the page says so instead."""

    commit: str
    order: int
    ratio: float

    def __str__(self) -> str:
        word = "slower" if self.ratio > 1 else "faster"
        r = self.ratio if self.ratio > 1 else 1 / self.ratio
        return (f"commit {self.commit[:10]}: the machine ran {r:.2f}x {word} than in the rest "
                "of the series (the machine-state probe): not used for change points")

    to_json = encode


def off_speed(rows: pd.DataFrame) -> list[OffSpeed]:
    """The rows (one per commit) whose probe time lies past
    :data:`pytest_sme2.analysis.machine_state.STRADDLE` from the series' median probe time."""
    if "probe_us" not in rows:
        return []
    probe = pd.to_numeric(rows["probe_us"], errors="coerce")
    typical = probe.median()
    if not np.isfinite(typical) or typical <= 0:
        return []
    out = []
    for r, p in zip(rows.itertuples(), probe):
        if np.isfinite(p) and max(p / typical, typical / p) > STRADDLE:
            out.append(OffSpeed(str(r.commit), int(r.order), round(float(p / typical), 3)))
    return out


@dataclass(frozen=True)
class Found:
    """One series' changes: those of at least ``min_change_pct`` (regressions and improvements)
    and the smaller shifts, set apart; and the commits left out because the machine ran at
    another speed."""

    change_points: list[ChangePoint]
    shifts: list[ChangePoint]
    min_change_pct: float
    noise_floor_pct: float
    off_speed: list[OffSpeed] = field(default_factory=list)


@dataclass(frozen=True)
class _Series:
    """One key's per-commit rows in commit order (``rows``), their medians (``values``) and
    the series' name: what every change point of it is measured on."""

    rows: pd.DataFrame
    values: np.ndarray
    name: str

    def change(self, start: int, cut: int, end: int, kind: str | None = None) -> ChangePoint:
        """The change at ``cut``, measured between ``values[start:cut]`` and
        ``values[cut:end]``."""
        pct, low, high = _interval(self.values[start:cut], self.values[cut:end])
        prev, row = self.rows.iloc[cut - 1], self.rows.iloc[cut]
        return ChangePoint(
            key_digest=str(row["key_digest"]), series=self.name,
            before_commit=str(prev["commit"]), commit=str(row["commit"]),
            order=int(row["order"]), change_pct=round(pct, 2), low_pct=round(low, 2),
            high_pct=round(high, 2), kind=kind or ("regression" if pct > 0 else "improvement"),
            what_changed=what_changed(prev, row))


def find(series: pd.DataFrame, name: str, min_change: float | None = None) -> Found:
    """Change points of one key's per-commit rows (``series.per_commit``, one key);
    ``min_change`` (percent, ``--min-change``): None for the default (``min_change_pct``)."""
    s = series.sort_values("order").reset_index(drop=True)
    off = off_speed(s)
    s = s[~s["order"].isin({o.order for o in off})].reset_index(drop=True)
    if s.empty:
        return Found([], [], MIN_CHANGE_PCT, 0.0, off)
    values = s["median_ms"].to_numpy(dtype=float)
    least = min_change_pct(values, min_change)
    kept, small = split_by_size(values, significant(values, breakpoints(values)), least)
    edges = [0, *kept, len(values)]
    measured = _Series(s, values, name)
    changes = [measured.change(edges[i], cut, edges[i + 2]) for i, cut in enumerate(kept)]
    # A shift is measured between the kept changes around it.
    shifts = [measured.change(max([0, *[k for k in kept if k < cut]]), cut,
                              min([len(values), *[k for k in kept if k > cut]]), SHIFT)
              for cut in small]
    return Found(changes, shifts, round(least, 2), round(noise_floor_pct(values), 2), off)
