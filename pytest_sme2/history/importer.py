"""``pytest-sme2 history import`` and the end of a session: results.json documents into a
store, each through the one results loader. Returns one line per file."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path

from pytest_sme2.history.records import DECODE, phase_of, session_points
from pytest_sme2.history.store import HistoryStore, describe
from pytest_sme2.results import ResultsDoc, load_results


def record_doc(store: HistoryStore, doc: ResultsDoc, source: str | None = None,
               fallback_time: str | None = None) -> list[str]:
    sp = session_points(doc, source, fallback_time)
    added = store.record(sp)
    name = source or "session"
    if added:
        phases = sum(1 for p in sp.points if phase_of(p.key) not in (None, DECODE))
        extra = f" (+{phases} LLM phase series: prefill, TTFT)" if phases else ""
        return [*sp.warnings, f"history: {name}: recorded {len(sp.points) - phases} "
                              f"benchmark(s){extra} in {describe(store.url)}"]
    return [f"history: {name}: already in {describe(store.url)} (same session); not added again"]


def import_files(store: HistoryStore, paths: Iterable[Path]) -> list[str]:
    lines = []
    for path in paths:
        doc = load_results(path)
        mtime = datetime.fromtimestamp(Path(path).stat().st_mtime, timezone.utc).isoformat()
        lines += record_doc(store, doc, str(path), fallback_time=mtime)
    return lines
