"""The points of a store as series: filters, and one row per (key, commit) in commit order.
Pure functions over pandas DataFrames."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

COLUMNS = ["id", "session_id", "key_digest", "key", "device", "model", "dtype", "threads",
           "runner", "emulated", "median_ms", "block_medians_ms", "runs_ms", "under_test",
           "instructions",
           "load_ms", "peak_rss_kb", "categories_ms", "sme2", "export_key", "executorch", "gate",
           "probe_us",
           "uid", "commit_sha", "branch", "time", "ci_run", "host", "versions"]
UNKNOWN_COMMIT = "unknown"


@dataclass(frozen=True)
class Filters:
    device: str | None = None
    model: str | None = None
    dtype: str | None = None
    threads: int | None = None
    runner: str | None = None
    branch: str | None = None
    since: str | None = None     # ISO date or time: sessions at or after it


def apply_filters(points: pd.DataFrame, f: Filters) -> pd.DataFrame:
    keep = pd.Series(True, index=points.index)
    for column in ("device", "model", "dtype", "runner", "branch"):
        wanted = getattr(f, column)
        if wanted is not None:
            keep &= points[column] == wanted
    if f.threads is not None:
        keep &= points["threads"] == f.threads
    if f.since is not None:
        keep &= points["time"] >= f.since
    return points[keep]


def label(row: pd.Series) -> str:
    """``model dtype tN runner @ device``; an LLM's phase series says its phase
    (``... runner [prefill] @ device``)."""
    key = row.get("key")
    phase = key.get("phase") if isinstance(key, dict) else None
    what = f" [{phase}]" if phase else ""
    return (f"{row['model']} {row['dtype']} t{row['threads']} {row['runner']}{what} @ "
            f"{row['device']}")


def per_commit(points: pd.DataFrame) -> pd.DataFrame:
    """One row per (key, commit), commits in the order of their first session; a commit's
    sessions pooled: the median of their medians, and the range of their block medians."""
    if points.empty:
        return points.assign(commit=[], order=[], low_ms=[], high_ms=[], sessions=[])
    p = points.assign(commit=points["commit_sha"].fillna(UNKNOWN_COMMIT))
    if "gate" not in p:              # points from before the store kept the gate's verdict
        p["gate"] = None
    if "probe_us" not in p:          # ... or the machine-state probe's time
        p["probe_us"] = None
    # Sessions without a commit stay apart (one "commit" each), placed by their time.
    p.loc[p["commit_sha"].isna(), "commit"] = UNKNOWN_COMMIT + "@" + p["time"]
    first_seen = p.groupby("commit")["time"].min().sort_values()
    order = {c: i for i, c in enumerate(first_seen.index)}
    p["order"] = p["commit"].map(order)
    p["low_ms"] = [min(b) if len(b) else m for b, m in zip(p["block_medians_ms"],
                                                             p["median_ms"])]
    p["high_ms"] = [max(b) if len(b) else m for b, m in zip(p["block_medians_ms"],
                                                              p["median_ms"])]
    groups = p.sort_values("time").groupby(["key_digest", "commit"], sort=False)
    last = groups[["device", "model", "dtype", "threads", "runner", "emulated", "sme2",
                   "export_key", "executorch", "branch", "time", "versions", "categories_ms",
                   "instructions", "order", "key", "gate"]].last()
    pooled = groups.agg(median_ms=("median_ms", "median"), low_ms=("low_ms", "min"),
                        high_ms=("high_ms", "max"), sessions=("uid", "size"),
                        probe_us=("probe_us", "median"))
    rows = last.join(pooled).reset_index()
    return rows.sort_values(["key_digest", "order"]).reset_index(drop=True)
