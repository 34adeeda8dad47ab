"""results.json: typed records, the one loader, byte-for-byte round trips and the one pooling
of a benchmark's blocks."""

import json
import os
import stat
from pathlib import Path

import pytest

from pytest_sme2.analysis.latency import latency_stats
from pytest_sme2.measure.comparison import make_comparison
from pytest_sme2.errors import Sme2Error
from pytest_sme2.stats import Interval
from pytest_sme2.results import (RESULTS_SCHEMA, BlockResult, ComparisonRecord,
                                 KernelEvidence, OperatorStats, ResultAnalysis, ResultsDoc,
                                 ResultsWriter, RunContext, atomic_write_text, load_results, pool,
                                 pool_categories, write_results)
from pytest_sme2.results import DeviceFacts, InstructionCount, Judgement, RunnerInfo
from tests.fakes.results_docs import evidence, single_doc, sme2_doc

REAL_DOC = Path(__file__).parents[2] / "fakes" / "results_qemu_session.json"
# Written by a real host session (commit dbea006's code, toy_cnn fp32 t1, --sme2-measure
# instructions, the second of two sessions saving baselines, --fail-on-regression 50 and every
# category gated): every gate verdict, the instruction count and start-up are in it.
GATED_DOC = Path(__file__).parents[2] / "fakes" / "results_host_gated.json"


def _result(samples=(1.0, 1.2, 1.1), **kw) -> BlockResult:
    base = dict(nodeid="b.py::t[x]", model="toy_cnn", dtype="fp32", threads=1,
                runner={"name": "python", "kind": "python", "labels": {"sme2": "off"}},
                device={"kind": "host", "cpu": "x"}, runs=len(samples), warmup=1,
                e2e_ms=list(samples), e2e=latency_stats(samples), etdump="a.etdump", pte="m.pte",
                export_key="k")
    base.update(kw)
    return BlockResult(**base)


def _text(doc: dict) -> str:
    return json.dumps(doc, indent=2) + "\n"


def test_json_has_the_contract_keys():
    d = _result().to_json()
    for key in ("nodeid", "model", "dtype", "threads", "runner", "device", "runs", "warmup",
                "e2e_ms", "median_ms", "p90_ms", "cv_pct", "etdump", "pte", "categories_ms",
                "overheads_ms", "operators", "kernel_evidence", "thermal_before",
                "thermal_after", "block", "outputs", "kernel_trace"):
        assert key in d
    assert d["runner"] == "python"
    assert d["median_ms"] == 1.1
    assert "baseline" not in d and "baseline_categories" not in d     # not judged


def test_round_trip_keeps_every_typed_part_and_unknown_keys():
    r = _result(analysis=ResultAnalysis(
                    categories_ms={"GEMM": 0.5, "Other": 0.6},
                    operators=[OperatorStats("Fully Connected (NC, F32) #1", 0, "GEMM", True,
                                             "XnnpackBackend", 1.0, 0.5, 45.0, True, False)],
                    kernel_evidence=KernelEvidence("absent", "no SME2")),
                context=RunContext(block=2, thermal_before={"cpu": 40.0}),
                judgement={"status": "ok"}, extra={"build_id": "ci-7"})
    back = BlockResult.from_json(json.loads(json.dumps(r.to_json())))
    assert back == r
    assert back.block == 2 and back.operators[0].category == "GEMM"
    assert back.kernel_evidence.sme2 == "absent" and not back.kernel_evidence.traced
    assert list(r.to_json())[-1] == "build_id"          # a plugin's key, after ours


@pytest.mark.parametrize("make", [lambda: json.loads(REAL_DOC.read_text()),
                                  lambda: json.loads(GATED_DOC.read_text()), sme2_doc,
                                  single_doc], ids=["qemu-session", "gated-host", "sme2",
                                                    "single"])
def test_a_document_loads_and_writes_back_byte_for_byte(make, tmp_path):
    text = _text(make())
    path = tmp_path / "results.json"
    path.write_text(text)
    doc = load_results(path)
    assert _text(doc.to_json()) == text
    assert ResultsWriter().text(doc.benchmarks, doc.comparisons, doc.session) == text
    assert load_results(json.loads(text)).to_json() == json.loads(text)


def test_a_gated_session_reads_as_typed_records_and_keeps_its_keys():
    text = GATED_DOC.read_text()
    (b,) = load_results(GATED_DOC).benchmarks
    assert isinstance(b.runner, RunnerInfo) and b.runner.labels["compiler"] == "gcc 12.2.0"
    assert isinstance(b.device, DeviceFacts) and b.device.spec == "host"
    assert (b.device.sme2, b.device.emulated, b.device_label) == (False, False, "host")
    assert isinstance(b.judgement, Judgement) and b.judgement.status == "ok"
    assert b.judgement.ratio.point == pytest.approx(1.0089436966064953)
    assert set(b.category_judgements) >= {"Convolution", "GEMM"}
    assert all(isinstance(j, Judgement) for j in b.category_judgements.values())
    assert isinstance(b.instructions, InstructionCount)
    assert b.instructions_per_execute == b.instructions.per_execute > 2e6
    assert b.instructions_judgement.measure == "instructions"
    assert {k: j.measure for k, j in b.startup_judgements.items()} == {
        "load": "load time", "memory": "peak memory"}
    # results.json's keys are the old ones, in the old order
    keys = list(b.to_json())
    assert keys[keys.index("baseline"):keys.index("baseline_startup") + 1] == [
        "baseline", "baseline_categories", "instructions", "baseline_instructions", "startup",
        "baseline_startup"]
    assert "judgement" not in text and "category_judgements" not in text


def test_the_old_dict_fields_and_item_reads_are_gone():
    """Before 1.0 nothing is kept for compatibility: the retyped fields' old names and dict
    reads of the records are gone (results.json keeps its keys)."""
    (b,) = load_results(GATED_DOC).benchmarks
    for old in ("baseline", "baseline_categories", "baseline_instructions",
                "baseline_startup"):
        assert not hasattr(b, old)
    for record in (b.device, b.runner, b.judgement, b.instructions):
        with pytest.raises(TypeError):
            record["x"]  # noqa: B018
        assert not hasattr(record, "get")


def test_blocks_built_from_dicts_hold_records():
    raw = json.loads(GATED_DOC.read_text())["benchmarks"][0]
    r = _result(judgement=raw["baseline"], category_judgements=raw["baseline_categories"],
                instructions=raw["instructions"],
                instructions_judgement=raw["baseline_instructions"],
                startup_judgements=raw["baseline_startup"],
                device=raw["device"], runner=raw["runner_info"])
    assert r == BlockResult.from_json(json.loads(json.dumps(r.to_json())))
    assert isinstance(r.category_judgements["GEMM"], Judgement)
    assert r.device == DeviceFacts.from_dict(raw["device"]) and r.device.spec == "host"
    assert r.to_json()["device"] == raw["device"]


def test_an_emulated_device_keeps_its_extra_in_the_order_it_was_written():
    extra = {"emulated": True, "qemu_version": "11.1.3", "target": "glibc", "host_abi": "x86"}
    d = {"spec": "qemu", "kind": "qemu", "extra": extra}
    facts = DeviceFacts.from_dict(d)
    assert (facts.emulated, facts.target, facts.extra) == (
        True, "glibc", {"qemu_version": "11.1.3", "host_abi": "x86"})
    assert list(facts.to_dict()["extra"].items()) == list(extra.items())
    # facts a device reads of itself: emulated and target last, no spec
    fresh = DeviceFacts(kind="qemu", extra={"a": 1}, emulated=True)
    assert list(fresh.to_dict()) == ["kind", "serial", "model", "cpu", "abi", "os", "kernel",
                                     "cores", "sme", "sme2", "executorch", "extra"]
    assert list(fresh.to_dict()["extra"]) == ["a", "emulated"]


def test_a_real_session_reads_as_typed_records():
    doc = load_results(REAL_DOC)
    (cmp,) = doc.comparisons
    assert cmp.nodeid == "" and cmp.name == "toy_cnn fp32 t1"    # written before the key
    assert cmp.emulated
    on = doc.blocks(cmp.candidate_blocks)
    assert [b.block for b in on] == [0, 1]
    ev = on[0].kernel_evidence
    assert ev.sme2 == "proven" and ev.traced
    assert any(k.isa_family == "SME2" for k in ev.executed_kernels)
    off = doc.blocks(cmp.base_blocks)[0].kernel_evidence
    assert off.traced and off.executed_kernels == [] and off.streaming_sme_blocks == 0
    assert cmp.baselines and set(cmp.baselines) == {"sme2_off", "sme2_on"}
    assert cmp.base_median_ms == pool(doc.blocks(cmp.base_blocks)).median_ms


def test_an_untraced_run_has_evidence_but_no_trace():
    ev = KernelEvidence.from_json(evidence("absent"))
    assert not ev.traced and ev.executed_kernels == []
    assert KernelEvidence.from_json(evidence("proven", executed=[])).traced
    assert KernelEvidence.from_json({}) is None


def test_comparison_records_carry_the_test_and_round_trip():
    blocks = [[_result((m,) * 3, nodeid=f"b.py::test_c[{side}#{i}]",
                       runner={"name": side, "kind": "x", "labels": {}},
                       context=RunContext(block=i)) for i, m in enumerate(medians)]
              for side, medians in (("off", (2.0, 2.2, 2.1)), ("on", (1.0, 1.1, 1.0)))]
    cmp = make_comparison(*blocks, nodeid="b.py::test_c")
    doc = cmp.to_json()
    assert list(doc)[0] == "nodeid"
    rec = ComparisonRecord.from_json(json.loads(json.dumps(doc)))
    assert rec.name == "test_c" and rec.to_json() == doc
    assert rec.base_median_ms == 2.1 and rec.speedup == cmp.speedup
    legacy = {k: v for k, v in doc.items() if k != "nodeid"}
    assert ComparisonRecord.from_json(legacy).name == "toy_cnn fp32 t1"


def test_an_llm_comparisons_phase_speedups_are_typed_and_written_under_their_key():
    """``phase_speedups`` is a field (it was a key of ``extra``): the same bytes, read into
    Intervals; a document without it (a forward pass, or older) reads as {}."""
    phases = {"prefill": {"point": 1.5, "low": 1.4, "high": 1.6, "confidence": 0.95},
              "ttft": {"point": 1.3, "low": 1.2, "high": 1.4, "confidence": 0.95}}
    doc = {**_comparison_doc(), "phase_speedups": phases, "build_id": "ci-7"}
    rec = ComparisonRecord.from_json(json.loads(json.dumps(doc)))
    assert rec.phase_speedups["prefill"] == Interval(1.5, 1.4, 1.6)
    assert rec.extra == {"build_id": "ci-7"}
    assert json.dumps(rec.to_json()) == json.dumps(doc)        # key order kept
    assert ComparisonRecord.from_json(_comparison_doc()).phase_speedups == {}


def _comparison_doc() -> dict:
    blocks = [[_result((m,) * 3, nodeid=f"b.py::test_c[{side}#{i}]",
                       runner={"name": side, "kind": "x", "labels": {}},
                       context=RunContext(block=i)) for i, m in enumerate(medians)]
              for side, medians in (("off", (2.0, 2.2, 2.1)), ("on", (1.0, 1.1, 1.0)))]
    return make_comparison(*blocks, nodeid="b.py::test_c").to_json()


def test_the_loader_says_what_is_wrong_in_one_line(tmp_path):
    with pytest.raises(Sme2Error, match="no such results file"):
        load_results(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(Sme2Error, match="not a readable results.json"):
        load_results(bad)
    bad.write_text('{"schema": "something/else"}')
    with pytest.raises(Sme2Error, match="not a pytest-sme2 results document"):
        load_results(bad)
    bad.write_text('{"benchmarks": []}')                   # a file must say what it is
    with pytest.raises(Sme2Error, match="not a pytest-sme2 results document"):
        load_results(bad)
    bad.write_text(json.dumps({"schema": RESULTS_SCHEMA, "benchmarks": [{"model": "m"}]}))
    with pytest.raises(Sme2Error, match="cannot read .KeyError: 'nodeid'.; was it edited"):
        load_results(bad)
    doc = load_results({})                                 # in memory: an empty document
    assert doc == ResultsDoc() and load_results(doc) is doc


def test_one_block_pools_to_its_own_figures():
    r = _result((1.0, 1.2, 1.1, 5.0))
    p = pool([r])
    e = r.e2e
    assert (p.median_ms, p.p90_ms, p.std_ms, p.cv_pct, p.mean_ms, p.min_ms, p.max_ms, p.n) == \
        (e.median_ms, e.p90_ms, e.std_ms, e.cv_pct, e.mean_ms, e.min_ms, e.max_ms, e.n)
    assert pool([r.e2e]) == p


def test_blocks_pool_as_the_median_of_their_medians_not_of_their_runs():
    blocks = [_result(s) for s in ((1, 1, 1, 9, 9), (2, 2, 2, 9, 9), (3, 3, 3, 9, 9))]
    p = pool(blocks)
    assert p.median_ms == 2 and p.block_medians_ms == (1, 2, 3)
    assert sorted(v for b in blocks for v in b.e2e_ms)[7] == 3      # what pooling runs gives
    assert (p.n, p.blocks, p.min_ms, p.max_ms) == (15, 3, 1, 9)
    assert p.mean_ms == pytest.approx((4.2 + 4.8 + 5.4) / 3)
    with pytest.raises(Sme2Error, match="no blocks"):
        pool([])


def test_pooled_categories_add_up_to_the_pooled_mean():
    a = _result((2.0, 2.0), analysis=ResultAnalysis(categories_ms={"GEMM": 1.5, "Other": 0.5}))
    b = _result((4.0, 4.0), analysis=ResultAnalysis(categories_ms={"Convolution": 1.0,
                                                                    "Other": 3.0}))
    cats = pool_categories([a, b])
    assert cats == {"GEMM": 0.75, "Other": 1.75, "Convolution": 0.5}
    assert sum(cats.values()) == pytest.approx(pool([a, b]).mean_ms)


def test_results_file_is_versioned(tmp_path):
    p = tmp_path / "out" / "results.json"
    write_results(p, [_result(), _result(nodeid="b.py::t[y]")])
    doc = json.loads(p.read_text())
    assert doc["schema"] == RESULTS_SCHEMA
    assert [b["nodeid"] for b in doc["benchmarks"]] == ["b.py::t[x]", "b.py::t[y]"]


def test_atomic_write_leaves_no_temporary_files(tmp_path):
    p = tmp_path / "f.json"
    atomic_write_text(p, "one")
    atomic_write_text(p, "two")
    assert p.read_text() == "two"
    assert [q.name for q in tmp_path.iterdir()] == ["f.json"]


def test_an_atomic_write_leaves_the_mode_open_would(tmp_path):
    """results.json and report.md were left 0600 (mkstemp's private mode): a CI artifact
    server or a teammate could not read them."""
    old = os.umask(0o022)
    try:
        p = tmp_path / "results.json"
        atomic_write_text(p, "{}")
        assert stat.S_IMODE(p.stat().st_mode) == 0o644
        os.umask(0o077)
        atomic_write_text(tmp_path / "private.md", "x")
        assert stat.S_IMODE((tmp_path / "private.md").stat().st_mode) == 0o600
        p.chmod(0o640)   # a mode the user chose is kept when the file is rewritten
        atomic_write_text(p, "{ }")
        assert stat.S_IMODE(p.stat().st_mode) == 0o640 and p.read_text() == "{ }"
    finally:
        os.umask(old)


def test_the_analysis_records_are_read_by_attribute_only():
    from pytest_sme2.results import (KernelEvidence, OperatorStats, ProcessStartup, Startup,
                                     TracedKernel)

    ev = KernelEvidence("proven", "why", executed_kernels=[TracedKernel("kai_x", "SME2")])
    assert ev.sme2 == "proven" and ev.executed_kernels[0].isa_family == "SME2"
    for record in (ev, ev.executed_kernels[0], OperatorStats("Conv"), Startup(),
                   ProcessStartup()):
        with pytest.raises(TypeError):
            record["name"]  # noqa: B018
        assert not hasattr(record, "get")


def test_the_block_is_a_block_result_and_its_old_name_is_gone():
    import pytest_sme2.results as results

    assert "BlockResult" in results.__all__ and "BenchmarkResult" not in results.__all__
    assert not hasattr(results, "BenchmarkResult")
    (b,) = load_results(GATED_DOC).benchmarks
    assert type(b) is results.BlockResult


def test_a_blocks_timing_round_trips_and_says_what_the_breakdown_adds_up_to():
    from pytest_sme2.results import BlockResult
    from pytest_sme2.results.timing import UNTRACED, Timing
    from tests.fakes.results_docs import single_doc

    d = single_doc()["benchmarks"][0]
    block = BlockResult.from_json(d)
    assert block.timing is None and "timing" not in block.to_json()   # older documents
    assert block.breakdown_e2e_ms == block.e2e.mean_ms
    timing = Timing(UNTRACED, "the runner's clock", traced_median_ms=2.1, overhead_pct=5.0,
                    traced_mean_ms=2.12, traced_runs=10, clock_overhead_ns=20.0)
    d = {**d, "timing": timing.to_dict()}
    block = BlockResult.from_json(d)
    assert block.timing == timing and block.to_json() == d
    assert block.breakdown_e2e_ms == 2.12
    assert block.timing.breakdown_line().startswith(
        "operator tracing added +5.0% to Method::execute; the breakdown below is from traced "
        "runs")
    assert block.timing.terminal_note() is None                   # 5% <= 10%: not in the line
    loud = Timing(UNTRACED, "", overhead_pct=52.0)
    assert loud.terminal_note() == ("operator tracing adds +52.0% here: latency from untraced "
                                    "runs, breakdown from traced ones")


def test_a_negative_tracing_cost_gets_a_word():
    """The Python runner's clock spans a call into the bindings: its traced runs can read
    faster than its timed ones, and report.md says what that means (issue 49, item 4)."""
    from pytest_sme2.results.timing import UNTRACED, Timing

    line = Timing(UNTRACED, "", traced_median_ms=0.1, overhead_pct=-3.6).breakdown_line()
    assert line.startswith("operator tracing added -3.6% to Method::execute (less than nothing: "
                           "tracing cost less than the timed runs' clock adds around "
                           "Method::execute, or than the runs vary); the breakdown")
    positive = Timing(UNTRACED, "", traced_median_ms=0.1, overhead_pct=3.6).breakdown_line()
    assert "less than nothing" not in positive


def test_the_projects_own_keys_are_typed_fields_written_under_their_old_keys():
    from pytest_sme2.results import PrecisionOutcome, UnderTest

    r = _result(etrecord_missing="no .etrecord", under_test={"export_key": "k"},
                precision=PrecisionOutcome(2.0, 1.5, 4, True, 3.25, True, ""), cpu_mask="f0",
                extra={"build_id": "ci-7"})
    d = json.loads(json.dumps(r.to_json()))
    assert list(d)[-5:] == ["etrecord_missing", "precision", "under_test", "cpu_mask",
                            "build_id"]
    back = BlockResult.from_json(d)
    assert back == r and back.extra == {"build_id": "ci-7"}
    assert isinstance(back.precision, PrecisionOutcome) and back.precision.paired
    assert back.under_test == UnderTest(export_key="k")
    assert d["under_test"] == {"export_key": "k", "model_source": None, "recipe": None,
                               "program": None, "versions": {}, "runner_labels": {}}
    assert back.to_json() == d
    old = BlockResult.from_json({k: v for k, v in d.items() if k not in (
        "etrecord_missing", "precision", "under_test", "cpu_mask")})
    assert (old.etrecord_missing, old.precision, old.under_test, old.cpu_mask) == (None,) * 4
