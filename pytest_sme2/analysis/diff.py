"""Two analysed ETDumps -> one :class:`EtdumpDiff`: what ``pytest-sme2 compare`` reports.

The offline counterpart of the seed kit's ``analyze_etdump_csv.py --compare``: the speed-up of
Method::execute, per-category and per-operator deltas, KleidiAI packed-name changes, the
bottlenecks of either side and the report's recommendations. Pure: two
:class:`~pytest_sme2.analysis.summary.Analysis` in, a dataclass out (no files, no pytest).

Each file is *one* runner process. Runs inside a process share its caches, frequency and
placement, so the bootstrap interval over runs cannot see process-to-process noise and
understates the uncertainty; :data:`ONE_PROCESS_NOTE` says so wherever the speed-up is shown.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from pytest_sme2.analysis.categories import OTHER, op_name
from pytest_sme2.analysis.kernels import is_kleidiai_op
from pytest_sme2.analysis.operators import BOTTLENECK_PCT
from pytest_sme2.analysis.summary import Analysis
from pytest_sme2.stats import Interval, bootstrap_ratio_of_medians, DEFAULT_MARGIN, verdict

COMPARE_SCHEMA = "pytest-sme2/etdump-compare/1"
ONE_PROCESS_NOTE = ("One process per side cannot separate process-to-process noise: this "
                    "interval (bootstrap over runs) understates the uncertainty; repeat each "
                    "side in several processes (pytest-sme2 benchmarks) to measure it.")
CHANGED, ADDED, REMOVED, REPACKED = "changed", "added", "removed", "repacked"
_SUFFIX_NUM = re.compile(r"#(\d+)\s*$")
_ARGS = re.compile(r"\s*\([^()]*\)")


@dataclass(frozen=True)
class CategoryDelta:
    category: str
    base_ms: float                  # mean ms per timed run
    candidate_ms: float
    delta_ms: float                 # candidate - base
    delta_pct: float | None         # relative to base; None when base is 0
    base_share_pct: float           # % of that side's E2E mean
    candidate_share_pct: float
    speedup: Interval | None        # median per-run ratio base/candidate, bootstrap over runs


@dataclass(frozen=True)
class OperatorDelta:
    instruction_id: int
    op: str                         # name without ``#n``
    occurrence: int                 # 0-based among same (instruction, op) on its side
    base_name: str | None           # None: added in the candidate
    candidate_name: str | None      # None: removed
    category: str
    base_ms: float
    candidate_ms: float
    delta_ms: float
    delta_pct: float | None
    base_pct_e2e: float
    candidate_pct_e2e: float
    delegated: bool
    status: str                     # changed / added / removed / repacked (KleidiAI name)
    # Every event read 0 on each side that has it: under the clock's resolution (XNNPACK counts
    # whole microseconds), so its 0 ms and its change say nothing.
    below_resolution: bool = False

    @property
    def name(self) -> str:
        return self.candidate_name or self.base_name or self.op


@dataclass
class EtdumpDiff:
    base_name: str
    candidate_name: str
    base_source: str
    candidate_source: str
    base_runs: int                  # timed runs
    candidate_runs: int
    warmup: int
    base_median_ms: float
    candidate_median_ms: float
    base_cv_pct: float
    candidate_cv_pct: float
    speedup: Interval               # base median / candidate median
    verdict: str                    # faster / slower / no significant difference
    categories: list[CategoryDelta]
    operators: list[OperatorDelta]  # matched first (largest |delta| first), then added/removed
    kleidiai_base: list[str]
    kleidiai_candidate: list[str]
    kleidiai_changes: list[tuple[str, str]]   # (base name, candidate name) of repacked ops
    evidence_base: str
    evidence_candidate: str
    bottlenecks: list[OperatorDelta] = field(default_factory=list)  # > 5% of E2E on a side
    recommendations: list[dict[str, str]] = field(default_factory=list)   # the report's
    note: str = ONE_PROCESS_NOTE
    margin: float = 0.02            # the noise margin the verdict used

    @property
    def added(self) -> list[OperatorDelta]:
        return [o for o in self.operators if o.status == ADDED]

    @property
    def removed(self) -> list[OperatorDelta]:
        return [o for o in self.operators if o.status == REMOVED]

    def to_json(self) -> dict[str, Any]:
        def op(o: OperatorDelta) -> dict[str, Any]:
            return asdict(o)

        def cat(c: CategoryDelta) -> dict[str, Any]:
            d = asdict(c)
            d["speedup"] = c.speedup.to_dict() if c.speedup else None
            return d

        return {
            "schema": COMPARE_SCHEMA,
            "base": {"name": self.base_name, "source": self.base_source,
                     "timed_runs": self.base_runs, "median_ms": self.base_median_ms,
                     "cv_pct": self.base_cv_pct, "kleidiai_ops": self.kleidiai_base,
                     "kernel_evidence": self.evidence_base},
            "candidate": {"name": self.candidate_name, "source": self.candidate_source,
                          "timed_runs": self.candidate_runs,
                          "median_ms": self.candidate_median_ms,
                          "cv_pct": self.candidate_cv_pct,
                          "kleidiai_ops": self.kleidiai_candidate,
                          "kernel_evidence": self.evidence_candidate},
            "warmup": self.warmup,
            "speedup": self.speedup.to_dict(),
            "verdict": self.verdict,
            "note": self.note,
            "categories": [cat(c) for c in self.categories],
            "operators": [op(o) for o in self.operators],
            "kleidiai_changes": [{"base": b, "candidate": c} for b, c in self.kleidiai_changes],
            "bottlenecks": [op(o) for o in self.bottlenecks],
            "recommendations": self.recommendations,
        }


# -- helpers ---------------------------------------------------------------------------------

def _pct(delta: float, base: float) -> float | None:
    return 100.0 * delta / base if base else None


def _order(name: str) -> tuple[int, str]:
    m = _SUFFIX_NUM.search(name)
    return (int(m.group(1)) if m else -1, name)


def _keyed(ops: pd.DataFrame) -> dict[tuple[int, str, int], Any]:
    """Operator rows by (instruction, name without ``#n``, occurrence): XNNPACK numbers operators
    in execution order, so the occurrence is the rank of the ``#n`` among the same op."""
    rows = sorted(ops.itertuples(index=False),
                  key=lambda r: (int(r.instruction_id), op_name(r.name), _order(r.name)))
    out: dict[tuple[int, str, int], Any] = {}
    seen: dict[tuple[int, str], int] = {}
    for r in rows:
        k = (int(r.instruction_id), op_name(r.name))
        n = seen.get(k, 0)
        seen[k] = n + 1
        out[(k[0], k[1], n)] = r
    return out


def _delta(key, b, c, status: str) -> OperatorDelta:
    bms = float(b.mean_ms_per_run) if b is not None else 0.0
    cms = float(c.mean_ms_per_run) if c is not None else 0.0
    ref = c if c is not None else b
    return OperatorDelta(
        instruction_id=key[0], op=key[1], occurrence=key[2],
        base_name=b.name if b is not None else None,
        candidate_name=c.name if c is not None else None,
        category=str(ref.category), base_ms=bms, candidate_ms=cms, delta_ms=cms - bms,
        delta_pct=_pct(cms - bms, bms),
        base_pct_e2e=float(b.pct_e2e) if b is not None else 0.0,
        candidate_pct_e2e=float(c.pct_e2e) if c is not None else 0.0,
        delegated=bool(ref.delegated), status=status,
        below_resolution=all(bool(r.below_resolution) for r in (b, c) if r is not None))


def operator_deltas(base: pd.DataFrame, candidate: pd.DataFrame) -> list[OperatorDelta]:
    """Match operators by (instruction, op, occurrence); then pair leftovers whose names differ
    only in the datatype list where one side is a KleidiAI packed path (``Convolution (NHWC,
    F32)`` -> ``(NHWC, PF32)``) as ``repacked``; the rest are added or removed."""
    kb, kc = _keyed(base), _keyed(candidate)
    out = [_delta(k, kb[k], kc[k], CHANGED) for k in kb if k in kc]
    left_b = {k: r for k, r in kb.items() if k not in kc}
    left_c = {k: r for k, r in kc.items() if k not in kb}

    def loose(rows: dict) -> dict[tuple[int, str, int], tuple]:
        got: dict[tuple[int, str, int], tuple] = {}
        seen: dict[tuple[int, str], int] = {}
        for k in sorted(rows, key=lambda k: (k[0], k[1], k[2])):
            bare = (k[0], _ARGS.sub("", k[1]).strip())
            n = seen.get(bare, 0)
            seen[bare] = n + 1
            got[(bare[0], bare[1], n)] = k
        return got

    lb, lc = loose(left_b), loose(left_c)
    for lk, bk in lb.items():
        ck = lc.get(lk)
        if ck is None:
            continue
        b, c = left_b[bk], left_c[ck]
        if is_kleidiai_op(b.name) == is_kleidiai_op(c.name):
            continue
        out.append(_delta(ck, b, c, REPACKED))
        del left_b[bk], left_c[ck]
    out.sort(key=lambda o: -abs(o.delta_ms))
    out += [_delta(k, None, r, ADDED) for k, r in
            sorted(left_c.items(), key=lambda kv: -float(kv[1].mean_ms_per_run))]
    out += [_delta(k, r, None, REMOVED) for k, r in
            sorted(left_b.items(), key=lambda kv: -float(kv[1].mean_ms_per_run))]
    return out


def per_run_categories(a: Analysis) -> pd.DataFrame:
    """ms per timed run (rows) by category (columns); Other = E2E - named, as in the summary."""
    timed = a.timed_e2e
    ev = a.events
    leaves = ev[ev["leaf"] & ev["run"].isin(timed.index)]
    table = leaves.groupby(["run", "category"])["duration_ms"].sum().unstack(fill_value=0.0)
    table = table.reindex(index=timed.index, fill_value=0.0)
    named = [c for c in a.categories_ms if c != OTHER]
    table = table.reindex(columns=named, fill_value=0.0)
    table[OTHER] = timed.to_numpy() - table[named].sum(axis=1).to_numpy()
    return table


def category_deltas(base: Analysis, candidate: Analysis) -> list[CategoryDelta]:
    rb, rc = per_run_categories(base), per_run_categories(candidate)
    cats = list(dict.fromkeys(list(base.categories_ms) + list(candidate.categories_ms)))
    out = []
    for cat in cats:
        bms = base.categories_ms.get(cat, 0.0)
        cms = candidate.categories_ms.get(cat, 0.0)
        a = rb[cat].to_numpy() if cat in rb else np.zeros(0)
        b = rc[cat].to_numpy() if cat in rc else np.zeros(0)
        iv = None
        if a.size and b.size and (a > 0).all() and (b > 0).all():
            iv = bootstrap_ratio_of_medians(list(a), list(b))
        out.append(CategoryDelta(
            cat, bms, cms, cms - bms, _pct(cms - bms, bms),
            100 * bms / base.e2e.mean_ms if base.e2e.mean_ms else 0.0,
            100 * cms / candidate.e2e.mean_ms if candidate.e2e.mean_ms else 0.0, iv))
    return out


def compare_analyses(base: Analysis, candidate: Analysis, *, base_name: str = "base",
                     candidate_name: str = "candidate",
                     margin: float | None = None) -> EtdumpDiff:
    """The diff of two analyses; its ``recommendations`` are the report's to add
    (:func:`pytest_sme2.report.etdump_diff.with_recommendations`)."""

    margin = DEFAULT_MARGIN if margin is None else margin
    speedup = bootstrap_ratio_of_medians(list(base.timed_e2e), list(candidate.timed_e2e))
    v = verdict(speedup, margin)
    cats = category_deltas(base, candidate)
    ops = operator_deltas(base.operators, candidate.operators)
    bottlenecks = [o for o in ops if max(o.base_pct_e2e, o.candidate_pct_e2e) > BOTTLENECK_PCT]
    bottlenecks.sort(key=lambda o: -max(o.base_pct_e2e, o.candidate_pct_e2e))
    return EtdumpDiff(
        base_name=base_name, candidate_name=candidate_name, base_source=base.source,
        candidate_source=candidate.source, base_runs=base.e2e.n, candidate_runs=candidate.e2e.n,
        warmup=base.warmup, base_median_ms=base.e2e.median_ms,
        candidate_median_ms=candidate.e2e.median_ms, base_cv_pct=base.e2e.cv_pct,
        candidate_cv_pct=candidate.e2e.cv_pct, speedup=speedup, verdict=v, categories=cats,
        operators=ops, kleidiai_base=list(base.evidence.kleidiai_ops),
        kleidiai_candidate=list(candidate.evidence.kleidiai_ops),
        kleidiai_changes=[(o.base_name, o.candidate_name) for o in ops if o.status == REPACKED],
        evidence_base=f"{base.evidence.sme2} — {base.evidence.reason}",
        evidence_candidate=f"{candidate.evidence.sme2} — {candidate.evidence.reason}",
        bottlenecks=bottlenecks, margin=margin)
