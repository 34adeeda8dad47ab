"""Property-based checks of the reader and the analysis on crafted ETDumps of odd shapes:
several delegates, portable-only programs, one run, runs with events missing."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_sme2.analysis.summary import analyze
from pytest_sme2.readers.etdump import parse_etdump
from tests.fakes.etdumps import make_etdump, program_run

OP_NAMES = ["Convolution (NHWC, F32) IGEMM", "Fully Connected (NC, PF16)", "Transpose (ND, X32)",
            "Add (ND)", "Convert (NC, F32, QDU8)", "Mystery Op", "Softmax (NC, F32)"]
PORTABLE = ["add", "_adaptive_avg_pool2d", "permute_copy", "convolution", "gelu"]

call = st.one_of(
    st.tuples(st.just("delegate"),
              st.lists(st.tuples(st.sampled_from(OP_NAMES), st.integers(0, 50_000)),
                       min_size=1, max_size=4)),
    st.tuples(st.just("portable"),
              st.tuples(st.sampled_from(PORTABLE), st.integers(0, 50_000)).map(lambda x: [x])),
)


@st.composite
def programs(draw):
    calls = draw(st.lists(call, min_size=1, max_size=5))
    # XNNPACK numbers names per delegate: #1, #2... restarting in each delegate.
    numbered = []
    for instr, (kind, ops) in enumerate(calls):
        if kind == "delegate":
            ops = [(f"{n} #{i + 1}", d) for i, (n, d) in enumerate(ops)]
        numbered.append((kind, instr, ops))
    n_runs = draw(st.integers(1, 4))
    framework = draw(st.integers(0, 500))
    drop = draw(st.sets(st.integers(0, n_runs - 1), max_size=n_runs - 1))
    return numbered, n_runs, framework, drop


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_invariants(program):
    calls, n_runs, framework, drop = program
    runs = []
    for r in range(n_runs):
        events = program_run(r * 10_000_000, calls, framework_ns=framework)
        if r in drop:  # a run whose Method::execute was lost
            events = [e for e in events if e.name != "Method::execute"]
        runs.append(events)
    a = analyze(parse_etdump(make_etdump(runs)))
    kept = n_runs - len(drop)
    assert a.e2e.n == kept and a.runs == n_runs

    # E2E is exactly Method::execute: all op time plus framework time, nothing counted twice.
    op_ns = sum(d for _, _, ops in calls for _, d in ops)
    expected_e2e = (op_ns + framework * (len(calls) + 2)) / 1e6
    assert a.e2e.median_ms == pytest.approx(expected_e2e, abs=1e-9)

    # Categories add up to E2E.
    assert sum(a.categories_ms.values()) == pytest.approx(a.e2e.mean_ms, rel=1e-9, abs=1e-12)

    # One operator row per (instruction, name): nothing merged across delegates by name.
    assert len(a.operators) == sum(len(ops) for _, _, ops in calls)
    assert a.operators["mean_ms_per_run"].sum() == pytest.approx(op_ns / 1e6, abs=1e-9)
    assert (a.operators["calls_per_run"] == 1.0).all()

    # Overheads account for the rest.
    assert sum(a.overheads_ms.values()) == pytest.approx(framework * (len(calls) + 2) / 1e6,
                                                         abs=1e-9)
