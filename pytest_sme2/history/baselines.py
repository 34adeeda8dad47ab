"""The gate's baseline from the history store: the last N sessions of each key on a branch,
written as the baseline folder the gate already reads (one JSON file per key, schema
``pytest-sme2/baseline/2``), so the gate itself does not change and the committed folder keeps
working as it does."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from pytest_sme2.baselines.key import BaselineKey
from pytest_sme2.history.records import DECODE, phase_of
from pytest_sme2.baselines.store import Baseline, Session, dumps
from pytest_sme2.results import UnderTest, atomic_write_text
from pytest_sme2.errors import Sme2Error
from pytest_sme2.history.store import describe, open_store

DEFAULT_SESSIONS = 10      # as many as a baseline file keeps (baseline_store.DEFAULT_KEEP)


def parse_spec(spec: str) -> tuple[str, int]:
    """``BRANCH`` or ``BRANCH:N`` (``--sme2-history-baseline``)."""
    branch, _, n = spec.partition(":")
    return branch, int(n) if n else DEFAULT_SESSIONS


def baselines(points: pd.DataFrame, branch: str, sessions: int = DEFAULT_SESSIONS
              ) -> list[Baseline]:
    """One Baseline per key from its newest ``sessions`` sessions on ``branch``."""
    on_branch = points[points["branch"] == branch].sort_values("time")
    out = []
    for _, g in on_branch.groupby("key_digest", sort=False):
        rows = g.tail(sessions)
        if phase_of(rows.iloc[-1]["key"]) not in (None, DECODE):
            # An LLM's prefill and TTFT series: the gate's key of the generation is its decode
            # series; a file for these would overwrite it (the same BaselineKey).
            continue
        key = BaselineKey.from_dict(rows.iloc[-1]["key"])
        out.append(Baseline(key, [_session(r) for r in rows.itertuples()]))
    return out


def _session(r) -> Session:
    blocks = [list(map(float, b)) for b in r.runs_ms if b]
    return Session(timestamp=str(r.time), blocks=blocks, git_commit=r.commit_sha,
                   versions=dict(r.versions or {}), categories_ms=[dict(r.categories_ms or {})
                                                                   for _ in blocks],
                   session_id=str(r.uid), under_test=UnderTest.from_dict(r.under_test or {}),
                   load_ms=[float(r.load_ms)] if r.load_ms is not None and r.load_ms == r.load_ms
                   else [],
                   peak_rss_kb=[float(r.peak_rss_kb)]
                   if r.peak_rss_kb is not None and r.peak_rss_kb == r.peak_rss_kb else [])


def write_baseline_folder(points: pd.DataFrame, spec: str, folder: Path) -> list[Path]:
    branch, n = parse_spec(spec)
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.json"):
        old.unlink()      # a folder of the store's sessions only, never stale files
    written = []
    for base in baselines(points, branch, n):
        path = folder / base.key.filename
        atomic_write_text(path, dumps(base))
        written.append(path)
    return written


def baseline_dir_from_store(url: str, spec: str, report_dir: Path) -> tuple[Path | None, str]:
    """The folder the gate should read, and one line saying where its baselines came from (or
    why the configured folder stays)."""

    try:
        store = open_store(url)
        try:
            points = store.frame()
        finally:
            store.close()
        folder = Path(report_dir) / f".history-baselines-{os.getpid()}"   # one per process
        written = write_baseline_folder(points, spec, folder)
    except (Sme2Error, ValueError) as e:
        return None, f"sme2: baselines not taken from the history ({e}); the gate reads " \
                     f"--baseline-dir"
    branch, n = parse_spec(spec)
    return folder, (f"sme2: gate baselines: the last {n} session(s) on {branch} of "
                    f"{len(written)} key(s) from {describe(url)}")
