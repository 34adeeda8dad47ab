"""The history report: every benchmark key a series in commit order, with its change points;
as JSON (for a later CI step: ``change_points`` non-empty since a commit) and markdown. Changes
below the minimum change (``--min-change``) are listed apart as shifts, never as regressions."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from pytest_sme2.history import changepoints
from pytest_sme2.history.series import Filters, apply_filters, label, per_commit

REPORT_SCHEMA = "pytest-sme2/history/1"
UNIT = "ms"              # every series: the median latency of Method::execute per commit
SHORT = 10               # characters of a commit hash shown (markdown and page)


def short(commit: str) -> str:
    """A commit's short hash (markdown and page); a session without one is "unknown"."""
    return commit.split("@")[0][:SHORT]


@dataclass
class Series:
    key_digest: str
    name: str
    device: str
    model: str
    dtype: str
    threads: int
    runner: str
    emulated: bool
    rows: pd.DataFrame          # per_commit rows of this key, in commit order
    change_points: list[changepoints.ChangePoint] = field(default_factory=list)
    shifts: list[changepoints.ChangePoint] = field(default_factory=list)  # below min_change_pct
    min_change_pct: float = changepoints.MIN_CHANGE_PCT
    noise_floor_pct: float = 0.0
    unit: str = UNIT
    # Commits whose sessions ran while the machine ran at another speed: no change point.
    off_speed: list[changepoints.OffSpeed] = field(default_factory=list)

    def points_json(self) -> list[dict[str, Any]]:
        return [{"commit": r.commit, "order": int(r.order), "median_ms": round(r.median_ms, 6),
                 "low_ms": round(r.low_ms, 6), "high_ms": round(r.high_ms, 6),
                 "sessions": int(r.sessions), "time": r.time, "branch": r.branch,
                 "sme2": r.sme2, "executorch": r.executorch, "export_key": r.export_key}
                for r in self.rows.itertuples()]


@dataclass
class HistoryReport:
    filters: Filters
    commits: list[str]
    series: list[Series]
    min_change: float | None = None     # --min-change; None: per series (min_change_pct)

    @property
    def change_points(self) -> list[changepoints.ChangePoint]:
        found = [c for s in self.series for c in s.change_points]
        return sorted(found, key=lambda c: (-c.order, -abs(c.change_pct)))

    @property
    def shifts(self) -> list[changepoints.ChangePoint]:
        found = [c for s in self.series for c in s.shifts]
        return sorted(found, key=lambda c: (-c.order, -abs(c.change_pct)))

    def min_change_text(self) -> str:
        """"5%", or "5-7.2%" where series differ (their noise floors)."""
        values = sorted({s.min_change_pct for s in self.series}) or [
            self.min_change if self.min_change is not None else changepoints.MIN_CHANGE_PCT]
        return f"{values[0]:g}%" if len(values) == 1 else f"{values[0]:g}-{values[-1]:g}%"

    def to_json(self) -> dict[str, Any]:
        return {"schema": REPORT_SCHEMA, "filters": vars(self.filters), "commits": self.commits,
                "min_change_pct": self.min_change,
                "change_points": [c.to_json() for c in self.change_points],
                "shifts_below_min_change": [c.to_json() for c in self.shifts],
                "series": [{"key_digest": s.key_digest, "name": s.name, "device": s.device,
                            "model": s.model, "dtype": s.dtype, "threads": s.threads,
                            "runner": s.runner, "emulated": s.emulated, "unit": s.unit,
                            "min_change_pct": s.min_change_pct,
                            "noise_floor_pct": s.noise_floor_pct,
                            "off_speed": [o.to_json() for o in s.off_speed],
                            "points": s.points_json()} for s in self.series]}

    def bisect_commands(self) -> list[str]:
        """Per change point, the ``pytest-sme2 bisect`` command that finds its commit in the
        range between the last commit of the old level and the first of the new."""
        return [bisect_command(s, c) for s in self.series for c in s.change_points]

    def to_markdown(self) -> str:
        lines = ["# Benchmark history", "",
                 f"{len(self.series)} series over {len(self.commits)} commits.", ""]
        least = self.min_change_text()
        lines += ["## Regressions and improvements", "",
                  f"Changes of at least {least} ({_rule(self.min_change)}).", ""]
        lines += _table(self.change_points) or ["No change points."]
        if self.change_points:
            lines += ["", "To find each change point's commit, from the repository's root:", ""]
            lines += [f"    {cmd}" for cmd in self.bisect_commands()]
        off = [(s, o) for s in self.series for o in s.off_speed]
        if off:
            lines += ["", "## Sessions at another machine speed", "",
                      "The machine-state probe says these commits' sessions ran while the "
                      "machine ran at another speed: their medians measure the machine, so they "
                      "make no change point.", ""]
            lines += [f"- {s.name}: {o}" for s, o in off]
        if self.shifts:
            lines += ["", f"## Shifts below {least}", "",
                      "Real (their 95% interval clears zero) but smaller than the minimum "
                      "change: not regressions.", ""]
            lines += _table(self.shifts)
        lines += ["", "## Series", "",
                  f"| series | commits | last median {UNIT} | noise floor | min change | "
                  "change points | shifts below |", "|---|---|---|---|---|---|---|"]
        for s in self.series:
            lines.append(f"| {s.name} | {len(s.rows)} | {s.rows['median_ms'].iloc[-1]:.4g} | "
                         f"{s.noise_floor_pct:.2g}% | {s.min_change_pct:g}% | "
                         f"{len(s.change_points)} | {len(s.shifts)} |")
        return "\n".join(lines) + "\n"


def _rule(min_change: float | None) -> str:
    if min_change is not None:
        return "--min-change"
    return (f"per series, the larger of {changepoints.MIN_CHANGE_PCT:g}% and its noise floor; "
            "--min-change sets it")


def bisect_command(series: Series, c: changepoints.ChangePoint) -> str:
    """``pytest-sme2 bisect BEFORE COMMIT -k MODEL --device DEVICE`` (``--improvement`` for a
    speed-up): the range ``before_commit..commit`` of a change point."""
    flag = "--improvement " if c.kind == "improvement" else ""
    before, commit = (x.split("@")[0] for x in (c.before_commit, c.commit))
    return (f"pytest-sme2 bisect {flag}{before} {commit} -k {series.model} "
            f"--device {series.device}")


def _table(found: list[changepoints.ChangePoint]) -> list[str]:
    if not found:
        return []
    lines = ["| series | commits | change | 95% interval | what else changed |",
             "|---|---|---|---|---|"]
    for c in found:
        lines.append(f"| {c.series} | {short(c.before_commit)}..{short(c.commit)} | "
                     f"{c.change_pct:+.1f}% ({c.kind}) | "
                     f"[{c.low_pct:+.1f}%, {c.high_pct:+.1f}%] | "
                     f"{changepoints.describe(c.what_changed)} |")
    return lines


def build(points: pd.DataFrame, filters: Filters | None = None,
          min_change: float | None = None) -> HistoryReport:
    """The report of ``points``; ``min_change`` (percent, ``--min-change``): the least |change|
    called a regression or an improvement; None: per series, the larger of
    ``changepoints.MIN_CHANGE_PCT`` and the series' noise floor."""
    filters = filters or Filters()
    rows = per_commit(apply_filters(points, filters))
    commits = (list(rows.sort_values("order").drop_duplicates("commit")["commit"])
               if not rows.empty else [])
    series = []
    for digest, g in rows.groupby("key_digest", sort=False):
        first = g.iloc[0]
        name = label(first)
        found = changepoints.find(g, name, min_change)
        series.append(Series(str(digest), name, str(first["device"]), str(first["model"]),
                             str(first["dtype"]), int(first["threads"]), str(first["runner"]),
                             bool(first["emulated"]), g.reset_index(drop=True),
                             found.change_points, found.shifts, found.min_change_pct,
                             found.noise_floor_pct, off_speed=found.off_speed))
    series.sort(key=lambda s: s.name)
    return HistoryReport(filters, commits, series, min_change)
