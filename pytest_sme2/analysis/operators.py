"""Operators and categories from leaf events of timed runs.

Leaves are the events that do work: XNNPACK's per-operator events inside a DELEGATE_CALL and the
portable ``native_call_*`` kernels inside an OPERATOR_CALL. Containers (Method::execute,
DELEGATE_CALL, OPERATOR_CALL) are never summed with them. An operator is identified by its name
*and* the instruction that ran it: XNNPACK's ``#n`` suffix restarts in every delegate, so the
same name in two delegates is two operators.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from pytest_sme2.analysis.categories import (OTHER, CategoryRule, classify, is_framework_event,
                                             named_categories, op_name)
from pytest_sme2.etrecord import ETRecordInfo

BOTTLENECK_PCT = 5.0
DELEGATE_CALL, OPERATOR_CALL = "DELEGATE_CALL", "OPERATOR_CALL"
UNKNOWN_DELEGATE = "delegate"   # backend of a delegated event when no .etrecord says which
PORTABLE = "portable"

OPERATOR_COLUMNS = ["name", "op", "instruction_id", "category", "delegated", "backend",
                    "calls_per_run", "mean_ms_per_run", "pct_e2e", "bottleneck",
                    "should_delegate", "op_types", "module_paths"]


def _per_name(names: pd.Series, *fns) -> list[np.ndarray]:
    """Apply each ``fn`` once per distinct name (names repeat in every run), spread back."""
    codes, uniques = pd.factorize(names, use_na_sentinel=False)
    return [np.asarray([fn(u) for u in uniques], dtype=object)[codes] for fn in fns]


def annotate(events: pd.DataFrame, etrecord: ETRecordInfo | None = None,
             rules: Sequence[CategoryRule] | None = None) -> pd.DataFrame:
    """Add ``category`` (for leaves; containers get ""), ``backend`` and ``leaf`` columns."""
    out = events.copy()
    framework, cats = _per_name(events["name"], is_framework_event,
                                lambda n: classify(n, rules))
    leaf = (events["run"].to_numpy() >= 0) & ~framework.astype(bool)
    out["leaf"] = leaf
    out["category"] = np.where(leaf, cats, "")
    delegated = events["delegated"].to_numpy()
    is_call = (events["name"] == DELEGATE_CALL).to_numpy()
    backend = np.where(delegated | is_call, UNKNOWN_DELEGATE, PORTABLE).astype(object)
    if etrecord is not None:
        known = {i: info.backend for i, info in etrecord.instructions.items() if info.backend}
        if known:
            by_instr = events["instruction_id"].map(known).to_numpy(dtype=object)
            use = (backend == UNKNOWN_DELEGATE) & pd.notna(by_instr)
            backend[use] = by_instr[use]
    out["backend"] = np.where(leaf | is_call, backend, "")
    if etrecord is not None:
        # What the instruction runs, for a portable kernel or a whole DELEGATE_CALL; XNNPACK's
        # own per-operator events carry no handle back to graph nodes, so they get none.
        info = etrecord.instructions
        own = ~delegated & (leaf | is_call)
        instr = events["instruction_id"]
        ops = instr.map({i: ";".join(v.op_types) for i, v in info.items()}).fillna("")
        paths = instr.map({i: ";".join(p for p in v.module_paths if p)
                           for i, v in info.items()}).fillna("")
        out["op_types"] = np.where(own, ops, "")
        out["module_path"] = np.where(own, paths, "")
    return out


def operator_table(annotated: pd.DataFrame, timed_runs: Sequence[int], e2e_mean_ms: float,
                   etrecord: ETRecordInfo | None = None) -> pd.DataFrame:
    """One row per (instruction, name): calls and mean milliseconds per timed run, % of E2E,
    bottleneck flags; sorted by time, largest first."""
    n = len(timed_runs)
    leaves = annotated[annotated["leaf"] & annotated["run"].isin(timed_runs)]
    if leaves.empty or n == 0:
        return pd.DataFrame(columns=OPERATOR_COLUMNS)
    g = leaves.groupby(["instruction_id", "name"], sort=False)
    table = g.agg(category=("category", "first"), delegated=("delegated", "first"),
                  backend=("backend", "first"), calls=("duration_ms", "size"),
                  total_ms=("duration_ms", "sum")).reset_index()
    table["op"] = table["name"].map(op_name)
    table["calls_per_run"] = table["calls"] / n
    table["mean_ms_per_run"] = table["total_ms"] / n
    table["pct_e2e"] = 100.0 * table["mean_ms_per_run"] / e2e_mean_ms if e2e_mean_ms > 0 else 0.0
    table["bottleneck"] = table["pct_e2e"] > BOTTLENECK_PCT
    table["should_delegate"] = table["bottleneck"] & ~table["delegated"]
    info = etrecord.instructions if etrecord else {}
    table["op_types"] = [list(info[i].op_types) if i in info and not d else []
                         for i, d in zip(table["instruction_id"], table["delegated"])]
    table["module_paths"] = [list(info[i].module_paths) if i in info and not d else []
                             for i, d in zip(table["instruction_id"], table["delegated"])]
    table = table.sort_values("mean_ms_per_run", ascending=False, kind="stable")
    return table[OPERATOR_COLUMNS].reset_index(drop=True)


def category_breakdown(operators: pd.DataFrame, e2e_mean_ms: float,
                       rules: Sequence[CategoryRule] | None = None) -> dict[str, float]:
    """Mean ms per timed run for each named category, and Other = E2E - their sum, so the
    categories add up to E2E exactly (Other holds unmatched operators and framework time)."""
    sums = operators.groupby("category")["mean_ms_per_run"].sum() if len(operators) else {}
    out = {c: float(sums.get(c, 0.0)) for c in named_categories(rules)}
    out[OTHER] = e2e_mean_ms - sum(out.values())
    return out


def overheads(annotated: pd.DataFrame, timed_runs: Sequence[int],
              e2e_mean_ms: float) -> dict[str, float]:
    """Time not covered by the operators inside it, mean ms per timed run:

    - ``delegate_ms``: DELEGATE_CALL minus the delegate's own per-operator events;
    - ``operator_call_ms``: OPERATOR_CALL minus the portable kernel it wraps;
    - ``runtime_ms``: Method::execute minus all DELEGATE_CALL and OPERATOR_CALL spans.
    """
    n = len(timed_runs)
    ev = annotated[annotated["run"].isin(timed_runs)]
    if n == 0:
        return {"delegate_ms": 0.0, "operator_call_ms": 0.0, "runtime_ms": 0.0}

    def total(mask) -> float:
        return float(ev.loc[mask, "duration_ms"].sum()) / n

    delegate_calls = total(ev["name"] == DELEGATE_CALL)
    operator_calls = total(ev["name"] == OPERATOR_CALL)
    delegated_leaves = total(ev["leaf"] & ev["delegated"])
    portable_leaves = total(ev["leaf"] & ~ev["delegated"])
    return {"delegate_ms": delegate_calls - delegated_leaves,
            "operator_call_ms": operator_calls - portable_leaves,
            "runtime_ms": e2e_mean_ms - delegate_calls - operator_calls}
