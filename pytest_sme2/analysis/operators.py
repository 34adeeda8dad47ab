"""Operators and categories from leaf events of timed runs.

Leaves are the events that do work: XNNPACK's per-operator events inside a DELEGATE_CALL and the
portable ``native_call_*`` kernels inside an OPERATOR_CALL. Containers (Method::execute,
DELEGATE_CALL, OPERATOR_CALL) are never summed with them. An operator is identified by its name
*and* the instruction that ran it: XNNPACK's ``#n`` suffix restarts in every delegate, so the
same name in two delegates is two operators.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
import pandas as pd

from pytest_sme2.analysis.categories import (OTHER, CategoryRule, classify, is_framework_event,
                                             named_categories, op_name)
from pytest_sme2.analysis.events import name_codes, name_is
from pytest_sme2.readers.etrecord import ETRecordInfo

BOTTLENECK_PCT = 5.0
DELEGATE_CALL, OPERATOR_CALL = "DELEGATE_CALL", "OPERATOR_CALL"
UNKNOWN_DELEGATE = "delegate"   # backend of a delegated event when no .etrecord says which
PORTABLE = "portable"

OPERATOR_COLUMNS = ["name", "op", "instruction_id", "category", "delegated", "backend",
                    "calls_per_run", "mean_ms_per_run", "pct_e2e", "bottleneck",
                    "should_delegate", "op_types", "module_paths", "below_resolution"]


def _per_instruction(instruction: np.ndarray, values: dict[int, str]
                     ) -> tuple[np.ndarray, np.ndarray]:
    """(index of each row's value in ``choices``, ``choices``): ``values[instruction]`` as an
    index into its distinct strings, 0 ("") where the instruction has none. One table indexed
    by instruction id when the ids span a small range (they do), else a dict pass."""
    choices = ["", *dict.fromkeys(values.values())]
    where = {v: i for i, v in enumerate(choices)}
    if instruction.size == 0:
        return np.zeros(0, dtype=np.intp), np.array(choices, dtype=object)
    lo, hi = int(instruction.min()), int(instruction.max())
    if hi - lo > 4 * instruction.size + 4096:
        index = np.array([where[values[i]] if i in values else 0 for i in instruction.tolist()],
                         dtype=np.intp)
    else:
        table = np.zeros(hi - lo + 1, dtype=np.intp)
        for i, v in values.items():
            if lo <= i <= hi:
                table[i - lo] = where[v]
        index = table[instruction.astype(np.int64) - lo]
    return index, np.array(choices, dtype=object)


def _strings(choices: np.ndarray, index: np.ndarray):
    """The column ``choices[index]``, built from the few distinct strings: the same dtype as
    assigning the object array (pandas infers it from ``choices``), without converting every
    row's string."""
    return pd.Series(choices).array.take(index)


_is_framework = lru_cache(maxsize=65536)(is_framework_event)  # a few hundred names repeat


def annotate(events: pd.DataFrame, etrecord: ETRecordInfo | None = None,
             rules: Sequence[CategoryRule] | None = None) -> pd.DataFrame:
    """Add ``category`` (for leaves; containers get ""), ``backend`` and ``leaf`` columns."""
    codes, uniques = name_codes(events["name"])
    framework = np.array([_is_framework(u) for u in uniques], dtype=bool)
    leaf = (events["run"].to_numpy() >= 0) & ~framework[codes]
    is_call = name_is(events["name"], DELEGATE_CALL)
    delegated = events["delegated"].to_numpy()
    instruction = events["instruction_id"].to_numpy()
    columns = {"leaf": leaf}
    # every distinct name's category, then "" for containers
    categories = np.array([classify(u, rules) for u in uniques] + [""], dtype=object)
    columns["category"] = _strings(categories, np.where(leaf, codes, len(uniques)))
    backends = {i: info.backend for i, info in etrecord.instructions.items()
                if info.backend} if etrecord is not None else {}
    known, choices = _per_instruction(instruction, backends)
    delegate_at, portable_at = len(choices), len(choices) + 1
    choices = np.concatenate([choices, [UNKNOWN_DELEGATE, PORTABLE]])
    backend = np.where(delegated | is_call, delegate_at, portable_at)
    use = (backend == delegate_at) & (known > 0)   # the .etrecord names the delegate
    backend[use] = known[use]
    columns["backend"] = _strings(choices, np.where(leaf | is_call, backend, 0))  # 0: ""
    if etrecord is not None:
        # What the instruction runs, for a portable kernel or a whole DELEGATE_CALL; XNNPACK's
        # own per-operator events carry no handle back to graph nodes, so they get none.
        info = etrecord.instructions
        own = ~delegated & (leaf | is_call)
        for column, values in (
                ("op_types", {i: ";".join(v.op_types) for i, v in info.items()}),
                ("module_path", {i: ";".join(p for p in v.module_paths if p)
                                 for i, v in info.items()})):
            index, choices = _per_instruction(instruction, values)
            columns[column] = _strings(choices, np.where(own, index, 0))
    out = events.copy()
    for column, values in columns.items():
        out[column] = values
    return out


def _first_seen_groups(*keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Group rows by equal integer ``keys``: (group of each row, first row of each group),
    groups numbered in order of first appearance, as ``groupby(sort=False)`` orders them."""
    combined = np.zeros(len(keys[0]), dtype=np.int64)
    for key in keys:
        key = key.astype(np.int64)
        lo = key.min() if key.size else 0
        combined = combined * (int(key.max() - lo) + 1 if key.size else 1) + (key - lo)
    group, _ = pd.factorize(combined)
    # Group g first appears where the running maximum of the groups first reaches g.
    top = np.maximum.accumulate(group)
    first = np.flatnonzero(np.concatenate(([True], top[1:] > top[:-1])))
    return group, first


def _group_sums(values: np.ndarray, group: np.ndarray, groups: int) -> np.ndarray:
    """Sum of ``values`` per group, in row order, skipping NaN, by the compensated (Kahan)
    summation pandas' ``groupby().sum()`` uses, so the sums equal its to the last bit. (pandas
    3.1 sums groups whose rows are already contiguous with ``np.add.reduceat`` instead, which
    may differ in the last bit: Kahan is the more accurate of the two.)"""
    keep = ~np.isnan(values)
    if not keep.all():
        values, group = values[keep], group[keep]
    total, compensation = np.zeros(groups), np.zeros(groups)
    counts = np.bincount(group, minlength=groups)
    longest = int(counts.max(initial=0))
    if values.size < 16 * longest:  # a few values per group: a plain loop is quicker
        total_, compensation_ = total.tolist(), compensation.tolist()
        for v, g in zip(values.tolist(), group.tolist()):
            y = v - compensation_[g]
            t = total_[g] + y
            c = t - total_[g] - y
            compensation_[g] = c if math.isfinite(c) else 0.0  # inf values: pandas' reset
            total_[g] = t
        return np.array(total_, dtype=float)
    # Many values per group: step k adds every group's k-th value at once.
    ordered = values[np.argsort(group, kind="stable")]
    starts = np.cumsum(counts) - counts
    guard = not (np.isfinite(ordered).all() and np.abs(ordered).max() < 1e300)
    with np.errstate(invalid="ignore", over="ignore"):  # inf values: reset, as pandas does
        for k in range(longest):
            if k < counts.min():
                y = ordered[starts + k] - compensation
                t = total + y
                compensation = t - total - y
                total = t
                if guard:
                    compensation[~np.isfinite(compensation)] = 0.0
                continue
            g = np.flatnonzero(counts > k)
            y = ordered[starts[g] + k] - compensation[g]
            t = total[g] + y
            c = t - total[g] - y
            if guard:
                c[~np.isfinite(c)] = 0.0
            compensation[g] = c
            total[g] = t
    return total


_op_name = lru_cache(maxsize=65536)(op_name)  # names repeat across blocks and sessions


def operator_table(annotated: pd.DataFrame, timed_runs: Sequence[int], e2e_mean_ms: float,
                   etrecord: ETRecordInfo | None = None) -> pd.DataFrame:
    """One row per (instruction, name): calls and mean milliseconds per timed run, % of E2E,
    bottleneck flags; sorted by time, largest first."""
    n = len(timed_runs)
    rows = np.flatnonzero(annotated["leaf"].to_numpy()
                          & np.isin(annotated["run"].to_numpy(), np.asarray(timed_runs)))
    if rows.size == 0 or n == 0:
        return pd.DataFrame(columns=OPERATOR_COLUMNS)
    codes, _ = name_codes(annotated["name"])
    instruction = annotated["instruction_id"].to_numpy()
    group, first = _first_seen_groups(instruction[rows], codes[rows])
    groups = first.size
    calls = np.bincount(group, minlength=groups)
    duration = annotated["duration_ms"].to_numpy()[rows]
    total_ms = _group_sums(duration, group, groups)
    mean_ms = total_ms / n
    # Every event read 0: the operator ran under its clock's resolution (XNNPACK times its
    # operators in whole microseconds), and its time is in Other, not 0.
    longest = np.zeros(groups)
    np.maximum.at(longest, group, np.nan_to_num(duration))
    # Largest first; ties keep their order of first appearance (a stable sort, as pandas').
    order = np.argsort(-mean_ms, kind="stable")
    at = rows[first[order]]          # each operator's first event, in table order
    delegated = annotated["delegated"].to_numpy()[at]
    instruction = instruction[at]
    pct = 100.0 * mean_ms[order] / e2e_mean_ms if e2e_mean_ms > 0 else np.zeros(groups)
    bottleneck = pct > BOTTLENECK_PCT
    info = etrecord.instructions if etrecord else {}
    own = [i if i in info and not d else None
           for i, d in zip(instruction.tolist(), delegated.tolist())]
    name = pd.Series(annotated["name"].array.take(at))
    return pd.DataFrame({
        "name": name,
        "op": name.map(_op_name),
        "instruction_id": instruction,
        "category": annotated["category"].array.take(at),
        "delegated": delegated,
        "backend": annotated["backend"].array.take(at),
        "calls_per_run": calls[order] / n,
        "mean_ms_per_run": mean_ms[order],
        "pct_e2e": pct,
        "bottleneck": bottleneck,
        "should_delegate": bottleneck & ~delegated,
        "op_types": [list(info[i].op_types) if i is not None else [] for i in own],
        "module_paths": [list(info[i].module_paths) if i is not None else [] for i in own],
        "below_resolution": longest[order] <= 0,
    })


def category_breakdown(operators: pd.DataFrame, e2e_mean_ms: float,
                       rules: Sequence[CategoryRule] | None = None) -> dict[str, float]:
    """Mean ms per timed run for each named category, and Other = E2E - their sum, so the
    categories add up to E2E exactly (Other holds unmatched operators and framework time)."""
    sums: dict[str, float] = {}
    if len(operators):
        group, categories = pd.factorize(operators["category"])
        keep = group >= 0
        totals = _group_sums(operators["mean_ms_per_run"].to_numpy(dtype=float)[keep],
                             group[keep], len(categories))
        sums = dict(zip(categories.tolist(), totals.tolist()))
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
    if n == 0:
        return {"delegate_ms": 0.0, "operator_call_ms": 0.0, "runtime_ms": 0.0}
    timed = np.isin(annotated["run"].to_numpy(), np.asarray(timed_runs))
    duration = annotated["duration_ms"].to_numpy()
    leaf = annotated["leaf"].to_numpy()
    delegated = annotated["delegated"].to_numpy()
    codes, uniques = name_codes(annotated["name"])
    uniques = uniques.tolist()

    def total(mask: np.ndarray) -> float:
        # numpy's pairwise sum of the selected rows in order, NaN as 0: pandas' Series.sum
        picked = duration[timed & mask]
        return float(np.where(np.isnan(picked), 0.0, picked).sum()) / n

    def named(name: str) -> np.ndarray:
        return codes == uniques.index(name) if name in uniques else np.zeros_like(timed)

    delegate_calls = total(named(DELEGATE_CALL))
    operator_calls = total(named(OPERATOR_CALL))
    delegated_leaves = total(leaf & delegated)
    portable_leaves = total(leaf & ~delegated)
    return {"delegate_ms": delegate_calls - delegated_leaves,
            "operator_call_ms": operator_calls - portable_leaves,
            "runtime_ms": e2e_mean_ms - delegate_calls - operator_calls}
