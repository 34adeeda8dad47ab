"""The per-block analysis does its work on numpy arrays (one grouping of (instruction, name),
compensated sums, masks computed once). These tests pin it to the plain pandas definition it
replaced — kept here as the reference — on crafted traces of many shapes, and pin the cases
that definition implies: repeated calls, warm-up, ties, traces without operators."""

import math

import numpy as np
import pandas as pd
import pandas.testing as pdt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_sme2.analysis.categories import named_categories, op_name
from pytest_sme2.analysis.latency import e2e_per_run
from pytest_sme2.analysis.operators import (OPERATOR_COLUMNS, _group_sums, annotate,
                                            category_breakdown, operator_table, overheads)
from pytest_sme2.analysis.summary import analyze
from pytest_sme2.readers.etdump import parse_etdump
from pytest_sme2.readers.etrecord import ETRecordInfo, InstructionInfo
from tests.fakes.etdumps import Ev, make_etdump, program_run

# -- the reference: the pandas code the array version replaced ------------------------------


def reference_e2e(events):
    execute = events[(events["run"] >= 0) & (events["name"] == "Method::execute")]
    per_run = execute.groupby("run")["duration_ms"].max()
    per_run.name = "e2e_ms"
    return per_run


def reference_table(annotated, timed_runs, e2e_mean_ms, etrecord=None):
    n = len(timed_runs)
    leaves = annotated[annotated["leaf"] & annotated["run"].isin(timed_runs)]
    if leaves.empty or n == 0:
        return pd.DataFrame(columns=OPERATOR_COLUMNS)
    g = leaves.groupby(["instruction_id", "name"], sort=False, observed=True)
    table = g.agg(category=("category", "first"), delegated=("delegated", "first"),
                  backend=("backend", "first"), calls=("duration_ms", "size"),
                  total_ms=("duration_ms", "sum"),
                  longest=("duration_ms", "max")).reset_index()
    table["op"] = table["name"].map(op_name)
    table["calls_per_run"] = table["calls"] / n
    table["mean_ms_per_run"] = table["total_ms"] / n
    table["pct_e2e"] = 100.0 * table["mean_ms_per_run"] / e2e_mean_ms if e2e_mean_ms > 0 else 0.0
    table["bottleneck"] = table["pct_e2e"] > 5.0
    table["should_delegate"] = table["bottleneck"] & ~table["delegated"]
    info = etrecord.instructions if etrecord else {}
    table["op_types"] = [list(info[i].op_types) if i in info and not d else []
                         for i, d in zip(table["instruction_id"], table["delegated"])]
    table["module_paths"] = [list(info[i].module_paths) if i in info and not d else []
                             for i, d in zip(table["instruction_id"], table["delegated"])]
    table["below_resolution"] = table["longest"].fillna(0.0) <= 0
    table = table.sort_values("mean_ms_per_run", ascending=False, kind="stable")
    return table[OPERATOR_COLUMNS].reset_index(drop=True)


def reference_overheads(annotated, timed_runs, e2e_mean_ms):
    n = len(timed_runs)
    ev = annotated[annotated["run"].isin(timed_runs)]

    def total(mask):
        return float(ev.loc[mask, "duration_ms"].sum()) / n

    calls, ops = total(ev["name"] == "DELEGATE_CALL"), total(ev["name"] == "OPERATOR_CALL")
    return {"delegate_ms": calls - total(ev["leaf"] & ev["delegated"]),
            "operator_call_ms": ops - total(ev["leaf"] & ~ev["delegated"]),
            "runtime_ms": e2e_mean_ms - calls - ops}


def reference_categories(operators, e2e_mean_ms):
    sums = operators.groupby("category")["mean_ms_per_run"].sum() if len(operators) else {}
    out = {c: float(sums.get(c, 0.0)) for c in named_categories()}
    out["Other"] = e2e_mean_ms - sum(out.values())
    return out


def kahan(values):
    """pandas' groupby sum of one group: compensated, NaN skipped, inf resets compensation."""
    total = compensation = 0.0
    for v in values:
        if v != v:
            continue
        y = v - compensation
        t = total + y
        compensation = t - total - y
        if not math.isfinite(compensation):
            compensation = 0.0
        total = t
    return total


# -- traces of many shapes --------------------------------------------------------------------

XNN = ["Convolution (NHWC, F32) IGEMM", "Fully Connected (NC, PF32)", "Transpose (ND, X32)",
       "Add (ND)", "Mystery Op"]
PORTABLE = ["add", "_adaptive_avg_pool2d", "permute_copy", "gelu"]
REC = ETRecordInfo({0: InstructionInfo("XnnpackBackend", ("aten.convolution.default",),
                                       ("features.0",)),
                    1: InstructionInfo(None, ("aten.add.Tensor",), ("", "blocks.1")),
                    3: InstructionInfo(None, ("aten.gelu.default",), ("mlp.act",))})


@st.composite
def traces(draw):
    calls = []
    for instr in range(draw(st.integers(0, 4))):
        if draw(st.booleans()):
            # names may repeat inside a delegate (an op run twice) and across delegates
            ops = draw(st.lists(st.tuples(st.sampled_from(XNN), st.integers(1, 3)),
                                min_size=1, max_size=4))
            calls.append(("delegate", instr, [(f"{n} #{k}", 0) for n, k in ops]))
        else:
            calls.append(("portable", instr, [(draw(st.sampled_from(PORTABLE)), 0)]))
    n_runs = draw(st.integers(1, 5))
    runs = []
    for r in range(n_runs):
        # durations vary by run, ties included, so sums and the sort are exercised
        timed = [(kind, instr, [(name, draw(st.sampled_from([0, 700, 1000, 1234, 5000])))
                                for name, _ in ops]) for kind, instr, ops in calls]
        events = program_run(r * 10_000_000, timed, framework_ns=draw(st.integers(0, 300)))
        if r and draw(st.integers(0, 5)) == 0:   # a run that lost its Method::execute
            events = [e for e in events if e.name != "Method::execute"]
        runs.append(events)
    warmup = draw(st.integers(0, n_runs - 1))
    return parse_etdump(make_etdump(runs)), warmup, draw(st.sampled_from([None, REC]))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(traces())
def test_array_analysis_equals_the_pandas_definition(trace):
    events, warmup, rec = trace
    per_run = e2e_per_run(events)
    pdt.assert_series_equal(per_run, reference_e2e(events), check_exact=True)
    timed = per_run[per_run.index >= warmup]
    if timed.empty:
        return
    runs, mean = timed.index.tolist(), float(timed.mean())
    annotated = annotate(events, rec)
    table = operator_table(annotated, runs, mean, rec)
    want = reference_table(annotated, runs, mean, rec)
    # Sums are Kahan's as pandas' own; pandas >= 3.1 sums groups whose rows are contiguous
    # with np.add.reduceat instead, hence a tolerance rather than exact equality.
    pdt.assert_frame_equal(table, want, check_exact=False, rtol=1e-12, atol=0)
    assert overheads(annotated, runs, mean) == pytest.approx(
        reference_overheads(annotated, runs, mean), rel=1e-12, abs=1e-15)
    assert category_breakdown(table, mean) == pytest.approx(
        reference_categories(want, mean), rel=1e-12, abs=1e-15)


# -- the cases the definition implies ---------------------------------------------------------

def test_an_operator_run_twice_per_run_is_one_row_with_two_calls():
    calls = [("delegate", 0, [("Add (ND) #1", 1000), ("Add (ND) #1", 3000)])]
    a = analyze(parse_etdump(make_etdump([program_run(i * 100_000, calls) for i in range(3)])))
    (row,) = a.operators.itertuples()
    assert row.calls_per_run == 2.0
    assert row.mean_ms_per_run == pytest.approx(0.004)


def test_warmup_runs_count_nowhere():
    def run(i, ns):
        return program_run(i * 1_000_000, [("delegate", 0, [("Add (ND) #1", ns)]),
                                           ("portable", 1, [("gelu", ns)])])
    slow_first = analyze(parse_etdump(make_etdump([run(0, 90_000)] +
                                                  [run(i, 1000) for i in range(1, 4)])),
                         warmup=1)
    steady = analyze(parse_etdump(make_etdump([run(i, 1000) for i in range(3)])))
    assert slow_first.categories_ms == steady.categories_ms
    assert slow_first.overheads_ms == steady.overheads_ms
    pdt.assert_frame_equal(slow_first.operators, steady.operators)


def test_ties_keep_their_order_of_first_appearance_below_larger_operators():
    calls = [("delegate", 0, [("Add (ND) #1", 500), ("Transpose (ND, X32) #1", 500)]),
             ("delegate", 1, [("Add (ND) #1", 900), ("Convert (NC, F32, QDU8) #1", 500)])]
    a = analyze(parse_etdump(make_etdump([program_run(0, calls)])))
    assert list(zip(a.operators.name, a.operators.instruction_id)) == [
        ("Add (ND) #1", 1), ("Add (ND) #1", 0), ("Transpose (ND, X32) #1", 0),
        ("Convert (NC, F32, QDU8) #1", 1)]


def test_a_trace_of_framework_events_only_has_no_operators_and_all_time_in_other():
    runs = [[Ev("DELEGATE_CALL", t + 10, t + 40, 0), Ev("Method::execute", t, t + 100, 0)]
            for t in (0, 1000)]
    a = analyze(parse_etdump(make_etdump(runs)))
    assert a.operators.empty and list(a.operators.columns) == OPERATOR_COLUMNS
    assert a.categories_ms["Other"] == pytest.approx(0.0001)
    assert sum(a.categories_ms.values()) == a.categories_ms["Other"]
    assert a.overheads_ms == pytest.approx({"delegate_ms": 0.00003, "operator_call_ms": 0.0,
                                            "runtime_ms": 0.00007})
    assert not a.events["leaf"].any() and (a.events["category"] == "").all()
    assert a.to_json()["operators"] == []


def test_names_as_plain_strings_analyse_like_the_reader_s_categorical():
    events = parse_etdump(make_etdump([program_run(i * 100_000, [
        ("delegate", 0, [("Add (ND) #1", 1000), ("Transpose (ND, X32) #1", 400)]),
        ("portable", 1, [("gelu", 300)])]) for i in range(3)]))
    plain = events.assign(name=events["name"].astype(object))
    a, b = analyze(events, etrecord=REC), analyze(plain, etrecord=REC)
    assert a.to_json() == b.to_json()
    for column in ("category", "backend", "op_types", "module_path", "leaf"):
        assert a.events[column].tolist() == b.events[column].tolist()


def test_a_run_with_two_method_executes_keeps_the_longest():
    run = [Ev("Method::execute", 100, 200, 0), Ev("Method::execute", 0, 1000, 0)]
    per_run = e2e_per_run(parse_etdump(make_etdump([run, run[:1]])))
    assert per_run.tolist() == [0.001, 0.0001]
    assert (per_run.name, per_run.index.name) == ("e2e_ms", "run")


@pytest.mark.parametrize("groups, size", [(7, 20), (60, 3000)])  # loop, vectorised path
def test_group_sums_are_pandas_compensated_sums(groups, size):
    rng = np.random.default_rng(size)
    group = rng.integers(0, groups, size)       # uneven groups, in no order
    values = rng.integers(0, 10**6, size) / 1e6 * 1e3
    values[::11] = np.nan
    got = _group_sums(values, group, groups + 1)   # the last group is empty: 0.0
    want = [kahan(values[group == g]) for g in range(groups)] + [0.0]
    assert got.tolist() == want


@pytest.mark.parametrize("groups", [1, 40])
def test_group_sums_of_infinite_values_stay_infinite(groups):
    group = np.repeat(np.arange(groups), 40)
    values = np.ones(group.size)
    values[3] = np.inf
    got = _group_sums(values, group, groups)
    assert got[0] == math.inf and (got[1:] == 40.0).all()
