"""The history report: every benchmark key a series in commit order, with its change points;
as JSON (for a later CI step: ``change_points`` non-empty since a commit) and markdown."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from pytest_sme2.history import changepoints
from pytest_sme2.history.series import Filters, apply_filters, label, per_commit

REPORT_SCHEMA = "pytest-sme2/history/1"


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

    @property
    def change_points(self) -> list[changepoints.ChangePoint]:
        found = [c for s in self.series for c in s.change_points]
        return sorted(found, key=lambda c: (-c.order, -abs(c.change_pct)))

    def to_json(self) -> dict[str, Any]:
        return {"schema": REPORT_SCHEMA, "filters": vars(self.filters), "commits": self.commits,
                "change_points": [c.to_json() for c in self.change_points],
                "series": [{"key_digest": s.key_digest, "name": s.name, "device": s.device,
                            "model": s.model, "dtype": s.dtype, "threads": s.threads,
                            "runner": s.runner, "emulated": s.emulated,
                            "points": s.points_json()} for s in self.series]}

    def to_markdown(self) -> str:
        lines = ["# Benchmark history", "",
                 f"{len(self.series)} series over {len(self.commits)} commits.", ""]
        cps = self.change_points
        lines += ["## Regressions and improvements", ""]
        if not cps:
            lines.append("No change points.")
        else:
            lines += ["| series | commits | change | 95% interval | what else changed |",
                      "|---|---|---|---|---|"]
            for c in cps:
                lines.append(f"| {c.series} | {c.before_commit[:10]}..{c.commit[:10]} | "
                             f"{c.change_pct:+.1f}% ({c.kind}) | "
                             f"[{c.low_pct:+.1f}%, {c.high_pct:+.1f}%] | "
                             f"{_changed_text(c.what_changed)} |")
        lines += ["", "## Series", "", "| series | commits | last median ms | change points |",
                  "|---|---|---|---|"]
        for s in self.series:
            lines.append(f"| {s.name} | {len(s.rows)} | {s.rows['median_ms'].iloc[-1]:.4g} | "
                         f"{len(s.change_points)} |")
        return "\n".join(lines) + "\n"


def _changed_text(changed: dict[str, Any]) -> str:
    parts = []
    for k, v in changed.items():
        if k == "category":
            parts.append(f"most moved: {v['name']} {v['delta_ms']:+.3g} ms")
        elif k == "versions":
            parts += [f"{name} {a}->{b}" for name, (a, b) in v.items()]
        else:
            parts.append(f"{k} {v[0]}->{v[1]}")
    return "; ".join(parts) or "-"


def build(points: pd.DataFrame, filters: Filters | None = None) -> HistoryReport:
    filters = filters or Filters()
    rows = per_commit(apply_filters(points, filters))
    commits = (list(rows.sort_values("order").drop_duplicates("commit")["commit"])
               if not rows.empty else [])
    series = []
    for digest, g in rows.groupby("key_digest", sort=False):
        first = g.iloc[0]
        name = label(first)
        series.append(Series(str(digest), name, str(first["device"]), str(first["model"]),
                             str(first["dtype"]), int(first["threads"]), str(first["runner"]),
                             bool(first["emulated"]), g.reset_index(drop=True),
                             changepoints.find(g, name)))
    series.sort(key=lambda s: s.name)
    return HistoryReport(filters, commits, series)
