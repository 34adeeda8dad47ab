"""The report's recommendations for an offline comparison of two ETDumps (``pytest-sme2
compare``): the same rules as a session's report, run on a one-comparison results document
built from the two analyses. The analysis computes the diff; the report advises on it."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pytest_sme2.analysis.diff import EtdumpDiff
from pytest_sme2.analysis.summary import Analysis
from pytest_sme2.report.recommend import recommendations

POINT_MODEL = "ETDumps"
# How the rules name the one comparison of the document below (Unit.point), and how it reads
# in an offline comparison instead.
_POINT = f"{POINT_MODEL}  t0"
_HERE = "these ETDumps"


def with_recommendations(diff: EtdumpDiff, base: Analysis, candidate: Analysis) -> EtdumpDiff:
    """``diff`` with the report's recommendations. No device facts: rules that need them (the
    device reports no SME2...) say 'unknown'; no outputs: the output check is skipped."""
    doc = {"schema": "pytest-sme2/results/1", "session": {},
           "benchmarks": [_block(base, diff.base_name), _block(candidate, diff.candidate_name)],
           "comparisons": [{
               "model": POINT_MODEL, "dtype": "", "threads": 0, "base": diff.base_name,
               "candidate": diff.candidate_name, "base_median_ms": base.e2e.median_ms,
               "candidate_median_ms": candidate.e2e.median_ms,
               "speedup": diff.speedup.to_dict(),
               "category_speedups": {c.category: c.speedup.to_dict() if c.speedup else None
                                     for c in diff.categories},
               "outputs": None, "verdict": diff.verdict, "margin": diff.margin,
               "base_blocks": [f"compare::{diff.base_name}"],
               "candidate_blocks": [f"compare::{diff.candidate_name}"]}]}
    recs = [{"rule": r.rule, "text": _offline(r.text), "evidence": r.evidence.replace(
        f"{_POINT} ", "")} for r in recommendations(doc)]
    return replace(diff, recommendations=recs)


def _offline(text: str) -> str:
    """A rule's sentence about the document's one case, said of the two ETDumps."""
    return text.replace(f"on {_POINT} ", "on ").replace(f" on {_POINT}", "").replace(
        _POINT, _HERE)


def _block(a: Analysis, runner: str) -> dict[str, Any]:
    doc = a.to_json()
    timed = [float(v) for v in a.timed_e2e]
    doc.pop("schema", None)
    doc.pop("source", None)
    doc.update({"nodeid": f"compare::{runner}", "model": POINT_MODEL, "dtype": "", "threads": 0,
                "runner": runner, "runner_info": {"name": runner, "kind": "etdump",
                                                  "labels": {}},
                "device": {}, "runs": len(timed), "warmup": a.warmup, "e2e_ms": timed,
                "median_ms": a.e2e.median_ms, "p90_ms": a.e2e.p90_ms, "cv_pct": a.e2e.cv_pct,
                "etdump": a.source, "pte": "", "export_key": ""})
    return doc
