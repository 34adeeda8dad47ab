import pytest

from pytest_sme2.analysis.kernel_sources import KernelSources
from pytest_sme2.analysis.summary import analyze
from pytest_sme2.readers.etdump import parse_etdump
from tests.fakes.etdumps import Ev, make_etdump, program_run

# Two delegates whose XNNPACK names restart at #1, and a portable op between them.
CALLS = [
    ("delegate", 0, [("Convolution (NHWC, F32) IGEMM #1", 6000), ("Transpose (ND, X32) #1", 1000)]),
    ("portable", 1, [("_adaptive_avg_pool2d", 2000)]),
    ("delegate", 2, [("Transpose (ND, X32) #1", 500), ("Fully Connected (NC, PF32) #1", 400)]),
]


@pytest.fixture(scope="module")
def events():
    runs = [program_run(i * 1_000_000, CALLS) for i in range(4)]
    return parse_etdump(make_etdump(runs))


def _op(a, name, instr):
    rows = a.operators[(a.operators.name == name) & (a.operators.instruction_id == instr)]
    assert len(rows) == 1
    return rows.iloc[0]


def test_same_name_in_two_delegates_is_two_operators(events):
    a = analyze(events)
    assert len(a.operators) == 5
    assert _op(a, "Transpose (ND, X32) #1", 0).mean_ms_per_run == pytest.approx(0.001)
    assert _op(a, "Transpose (ND, X32) #1", 2).mean_ms_per_run == pytest.approx(0.0005)


def test_operator_fields(events):
    a = analyze(events)
    pool = _op(a, "native_call__adaptive_avg_pool2d.out", 1)
    assert (pool.category, pool.delegated, pool.backend) == ("Pooling", False, "portable")
    assert pool.calls_per_run == 1.0
    e2e = (6000 + 1000 + 2000 + 500 + 400 + 3 * 100 + 100 + 100) / 1e6
    assert a.e2e.mean_ms == pytest.approx(e2e)
    assert pool.pct_e2e == pytest.approx(100 * 0.002 / e2e)
    assert pool.bottleneck and pool.should_delegate
    conv = _op(a, "Convolution (NHWC, F32) IGEMM #1", 0)
    assert conv.bottleneck and not conv.should_delegate and conv.backend == "delegate"
    fc = _op(a, "Fully Connected (NC, PF32) #1", 2)
    assert fc.category == "GEMM" and not fc.bottleneck  # 400 ns of 10.1 us: under 5%


def test_categories_add_up_to_e2e_and_other_is_the_rest(events):
    a = analyze(events)
    c = a.categories_ms
    assert c["Convolution"] == pytest.approx(0.006)
    assert c["Data Movement"] == pytest.approx(0.0015)
    assert c["GEMM"] == pytest.approx(0.0004)
    assert c["Pooling"] == pytest.approx(0.002)
    assert c["Other"] == pytest.approx(0.0005)  # 3 calls x 100 ns + 2 x 100 ns around them
    assert sum(c.values()) == pytest.approx(a.e2e.mean_ms, rel=1e-12)


def test_overheads_are_container_time_not_covered_by_children(events):
    o = analyze(events).overheads_ms
    assert o["delegate_ms"] == pytest.approx(0.0002)      # 2 delegate calls x 100 ns
    assert o["operator_call_ms"] == pytest.approx(0.0001)
    assert o["runtime_ms"] == pytest.approx(0.0002)       # Method::execute's own 2 x 100 ns


def test_kleidiai_name_gives_indicated_only_when_device_has_sme2(events):
    # Packed names mean KleidiAI, which also runs SME1 and NEON kernels: without the device's
    # SME2 capability they indicate nothing about SME2.
    assert analyze(events).evidence.sme2 == "unknown"             # device unknown
    assert analyze(events, kernels=KernelSources(device_sme2=True)).evidence.sme2 == "indicated"
    absent = analyze(events, kernels=KernelSources(device_sme2=False)).evidence
    assert absent.sme2 == "absent"
    assert absent.kleidiai_ops == ["Fully Connected (NC, PF32)"]


def test_sme2_kernel_in_trace_is_proof(events):
    trace = "XNNPACK: Using gemm microkernel 'xnn_pf32_gemm_minmax_ukernel_1x32__neonsme2'.\n"
    ev = analyze(events, kernels=KernelSources(device_sme2=True, xnntrace=trace)).evidence
    assert ev.sme2 == "proven" and ev.kernels[0].isa == "neonsme2"


def test_warmup_runs_are_left_out_of_every_statistic():
    runs = [program_run(0, [("delegate", 0, [("Add (ND) #1", 50_000)])])]
    runs += [program_run((i + 1) * 1_000_000, [("delegate", 0, [("Add (ND) #1", 1000)])])
             for i in range(3)]
    a = analyze(parse_etdump(make_etdump(runs)), warmup=1)
    assert a.e2e.n == 3 and a.runs == 4
    assert a.operators.iloc[0].mean_ms_per_run == pytest.approx(0.001)
    assert len(a.e2e_all) == 4


def test_run_without_method_execute_is_excluded_everywhere():
    good = program_run(0, [("delegate", 0, [("Add (ND) #1", 1000)])])
    broken = [e for e in program_run(1_000_000, [("delegate", 0, [("Add (ND) #1", 9000)])])
              if e.name != "Method::execute"]
    a = analyze(parse_etdump(make_etdump([good, broken, good])))
    assert a.e2e.n == 2
    assert a.operators.iloc[0].mean_ms_per_run == pytest.approx(0.001)


def test_portable_only_program():
    runs = [program_run(i * 100_000, [("portable", 0, [("add", 3000)]),
                                      ("portable", 1, [("mul", 1000)])]) for i in range(2)]
    a = analyze(parse_etdump(make_etdump(runs)))
    assert set(a.operators.backend) == {"portable"}
    assert a.categories_ms["Elementwise"] == pytest.approx(0.004)
    assert a.overheads_ms["delegate_ms"] == 0.0


def test_json_document_contract(events):
    doc = analyze(events, warmup=1).to_json()
    assert doc["schema"] == "pytest-sme2/analysis/1"
    assert doc["runs"] == 4 and doc["warmup"] == 1 and len(doc["e2e_ms"]) == 4
    for key in ("n", "median_ms", "mean_ms", "p10_ms", "p90_ms", "min_ms", "max_ms", "std_ms",
                "cv_pct"):
        assert key in doc["e2e"]
    for key in ("Convolution", "GEMM", "Data Movement", "Elementwise", "Other"):
        assert key in doc["categories_ms"]
    op = doc["operators"][0]
    for key in ("name", "category", "delegated", "backend", "calls_per_run", "mean_ms_per_run",
                "pct_e2e"):
        assert key in op
    assert set(doc["kernel_evidence"]) >= {"sme2", "kleidiai_ops", "kernels"}


def test_negative_warmup_is_an_error(events):
    from pytest_sme2.errors import Sme2Error
    with pytest.raises(Sme2Error, match="warm-up must be 0 or more"):
        analyze(events, warmup=-1)


def test_unnamed_delegate_events_count_in_other():
    run = [Ev(None, 100, 600, 0, debug="Mystery Op #1"), Ev("DELEGATE_CALL", 50, 650, 0),
           Ev("Method::execute", 0, 700, 0)]
    a = analyze(parse_etdump(make_etdump([run])))
    assert a.operators.iloc[0].category == "Other"
    assert a.categories_ms["Other"] == pytest.approx(0.0007)


def test_etrecord_annotates_portable_events_and_delegate_calls(events):
    from pytest_sme2.readers.etrecord import ETRecordInfo, InstructionInfo

    rec = ETRecordInfo({0: InstructionInfo("XnnpackBackend", ("aten.convolution.default",),
                                           ("features.0",)),
                        1: InstructionInfo(None, ("aten._adaptive_avg_pool2d.default",),
                                           ("pool",))})
    a = analyze(events, etrecord=rec)
    ev = a.events[a.events.run == 0].set_index("name")
    assert ev.loc["native_call__adaptive_avg_pool2d.out", "op_types"] == \
        "aten._adaptive_avg_pool2d.default"
    assert ev.loc["native_call__adaptive_avg_pool2d.out", "module_path"] == "pool"
    calls = a.events[(a.events.run == 0) & (a.events.name == "DELEGATE_CALL")]
    assert calls["op_types"].tolist() == ["aten.convolution.default", ""]  # instr 2: unknown
    assert calls["backend"].tolist() == ["XnnpackBackend", "delegate"]
    conv = ev.loc["Convolution (NHWC, F32) IGEMM #1"]
    assert conv["op_types"] == "" and conv["backend"] == "XnnpackBackend"


def test_an_operator_whose_every_event_read_zero_is_below_the_clocks_resolution():
    """XNNPACK counts whole microseconds: Fully Connected, Mean and Reshape of a small model
    read 0 on every run, their time lands in Other, and every output says so instead of
    showing 0.0000 ms (issue 49, item 7)."""
    from pytest_sme2.analysis.diff import compare_analyses
    from pytest_sme2.report.etdump_diff import compare_lines
    from pytest_sme2.report.analysis_text import analysis_summary

    calls = [("delegate", 0, [("Convolution (NHWC, F32) IGEMM #1", 6000),
                              ("Fully Connected (NC, F32) GEMM #1", 0),
                              ("Fully Connected (NC, F32) GEMM #2", 0),
                              ("Static Reshape (NC) #1", 0)])]
    a = analyze(parse_etdump(make_etdump([program_run(i * 1_000_000, calls)
                                          for i in range(4)])))
    assert _op(a, "Fully Connected (NC, F32) GEMM #1", 0).below_resolution
    assert not _op(a, "Convolution (NHWC, F32) IGEMM #1", 0).below_resolution
    records = {o.name: o for o in a.operator_records()}
    assert records["Static Reshape (NC) #1"].below_resolution
    assert "below_resolution" not in records["Convolution (NHWC, F32) IGEMM #1"].to_json()
    text = "\n".join(analysis_summary(a))
    assert "0.0000 ms   0.0%  Fully Connected" not in text
    assert "< 1 µs        Fully Connected (NC, F32) GEMM #1" in text
    assert "GEMM              0.0000 ms    0.0%  (under the clock's resolution: in Other)" in text
    assert ("3 operator(s) ran under their clock's resolution (XNNPACK times its operators in "
            "whole microseconds; every event read 0), so their time is in Other: Fully "
            "Connected (NC, F32) GEMM x2, Static Reshape (NC)") in text
    lines = compare_lines(compare_analyses(a, a))
    largest = next(line for line in lines if line.startswith("largest operator changes"))
    assert "n/a" not in largest and "Fully Connected" not in largest
    assert any(line.startswith("in both: 3 operator(s) ran under their clock's resolution")
               for line in lines)
