"""The seed kit's columns in our CSVs, with the kit's meanings (its ``etdump_to_csv.py`` and
``xnntrace_to_kernels.py``), and the kit's readers' view of them: per-run ``Method::execute``
latencies read back the way ``analyze_etdump_csv.py``/``robust_latency_analysis.py`` read them
equal our analysis' timed runs. (The bytes: tests/unit/test_report_csv.py.)"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from pytest_sme2.analysis.categories import op_name
from pytest_sme2.analysis.isa import kernel_name_fields
from pytest_sme2.analysis.kernel_sources import KernelSources
from pytest_sme2.analysis.kernels import log_category, xnntrace_counts
from pytest_sme2.analysis.summary import analyze
from pytest_sme2.measure.artifacts.csv import (KIT_KERNEL_COLUMNS, OPS_STATS_COLUMNS,
                                               TIMELINE_COLUMNS, base_type, write_csvs)
from pytest_sme2.readers.etdump import parse_etdump
from pytest_sme2.results import LoggedKernel, TracedKernel
from tests.fakes.etdumps import make_etdump, program_run
from tests.unit.measure.test_report_csv import crafted_analysis

OUR_TIMELINE = ["block_index", "run", "seq", "instruction_id", "delegate_debug_id", "delegated",
                "start", "end", "leaf", "category", "backend", "op_types", "module_path",
                "warmup"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """The crafted analysis (6 runs, 2 of them warm-up) written out, read back as the kit's
    tools read them (``pd.read_csv``)."""
    analysis = crafted_analysis()
    out = tmp_path_factory.mktemp("csv")
    paths = write_csvs(analysis, out, "s", model_id="toy_fp32")
    return analysis, {p.name: pd.read_csv(p, keep_default_na=False) for p in paths}


def test_every_file_starts_with_the_kits_columns_and_goes_on_with_ours(files):
    _, f = files
    for name in ("s_all_runs_timeline.csv", "s_run0_timeline.csv", "s_warmup_timeline.csv"):
        assert list(f[name].columns) == TIMELINE_COLUMNS + OUR_TIMELINE
    assert TIMELINE_COLUMNS == ["model_id", "name", "type", "delegate_backend", "start_us",
                                "end_us", "duration_ms", "pct_total", "node_id", "run_index",
                                "block"]
    assert list(f["s_ops_stats.csv"].columns) == OPS_STATS_COLUMNS + [
        "op", "instruction_id", "category", "delegated", "backend", "calls_per_run",
        "mean_ms_per_run", "pct_e2e", "bottleneck", "should_delegate", "op_types",
        "module_paths", "below_resolution"]
    assert OPS_STATS_COLUMNS == ["model_id", "name", "type", "delegate_backend", "count",
                                 "total_ms", "avg_ms", "pct_total"]
    assert list(f["kernels.csv"].columns) == KIT_KERNEL_COLUMNS + [
        "kind", "isa", "isa_family", "sme2"]
    assert KIT_KERNEL_COLUMNS == ["model_id", "kernel_name", "category", "count", "dtype",
                                  "xnn_op", "variant", "ukernel_shape", "arch_chain", "has_sme",
                                  "has_sme2"]
    for frame in f.values():
        assert set(frame["model_id"]) <= {"toy_fp32"}


def test_run_index_counts_the_timed_runs_from_0_and_warm_up_has_its_own_file(files):
    analysis, f = files
    timed = f["s_all_runs_timeline.csv"]
    assert analysis.warmup == 2 and analysis.runs == 6
    executes = timed[timed["name"] == "Method::execute"]
    assert executes["run_index"].tolist() == [0, 1, 2, 3]
    assert executes["run"].tolist() == [2, 3, 4, 5]
    assert not timed["warmup"].any()
    # load/init events sit in run 0, where the kit's Inspector rows put them
    load = timed[timed["run"] == -1]
    assert set(load["name"]) == {"Method::init", "Program::load_method"}
    assert set(load["run_index"]) == {0} and set(load["block"]) == {"Default"}
    assert set(timed.loc[timed["run"] >= 0, "block"]) == {"Execute"}
    warm = f["s_warmup_timeline.csv"]
    assert warm["warmup"].all() and sorted(set(warm["run_index"])) == [0, 1]
    assert (warm["run_index"] == warm["run"]).all()
    run0 = f["s_run0_timeline.csv"]
    pd.testing.assert_frame_equal(run0, timed[timed["run_index"] == 0].reset_index(drop=True))
    # every event once: the three files split the events, run 0's file repeats run 0
    assert len(timed) + len(warm) == len(analysis.events)


def test_the_kits_per_run_latencies_are_our_timed_runs(files):
    """``method_exec.groupby('run_index')['duration_ms'].sum()``, as both kit tools compute
    it, gives our analysis' timed runs, in order; their mean is our mean."""
    analysis, f = files
    timed = f["s_all_runs_timeline.csv"]
    per_run = timed[timed["name"] == "Method::execute"].groupby("run_index")["duration_ms"].sum()
    assert per_run.tolist() == analysis.timed_e2e.tolist()
    assert per_run.mean() == pytest.approx(analysis.e2e.mean_ms, rel=1e-12)
    warm = f["s_warmup_timeline.csv"]
    warm_runs = warm[warm["name"] == "Method::execute"].groupby("run_index")["duration_ms"].sum()
    assert warm_runs.tolist() == analysis.e2e_all[:2].tolist()


@pytest.mark.parametrize("name", ["s_all_runs_timeline.csv", "s_run0_timeline.csv",
                                  "s_warmup_timeline.csv"])
def test_pct_total_is_each_events_share_of_its_runs_summed_event_time(files, name):
    _, f = files
    frame = f[name]
    sums = frame.groupby("run_index")["pct_total"].sum()
    assert len(sums) >= 1 and np.allclose(sums, 100.0)
    run_time = frame.groupby("run_index")["duration_ms"].transform("sum")
    assert np.allclose(frame["pct_total"], frame["duration_ms"] / run_time * 100)


def test_type_node_id_backend_and_times(files):
    analysis, f = files
    timed = f["s_all_runs_timeline.csv"]
    conv = timed[timed["name"] == "Convolution (NHWC, F32) IGEMM #1"]
    assert set(conv["type"]) == {"Convolution (NHWC, F32) IGEMM"}
    # node_id: the same event of the program has the same id in every run, unique in a run
    assert conv["node_id"].nunique() == 1
    assert not timed.duplicated(["run_index", "node_id"]).any()
    warm = f["s_warmup_timeline.csv"]
    assert set(warm.groupby(["name", "instruction_id"])["node_id"].nunique()) == {1}
    execute_ids = timed.loc[timed["run"] >= 0].groupby("seq")["node_id"].unique()
    assert execute_ids.map(len).eq(1).all()
    assert dict(zip(warm["seq"], warm["node_id"])) == execute_ids.map(lambda v: v[0]).to_dict()
    # delegate_backend: the .etrecord's backend, "delegated" without one, else "portable"
    backend = dict(zip(timed["name"], timed["delegate_backend"]))
    assert backend["Convolution (NHWC, F32) IGEMM #1"] == "XnnpackBackend"
    assert backend["Add (ND) #1"] == "delegated"
    for portable in ("native_call__adaptive_avg_pool2d.out", "Method::execute",
                     "DELEGATE_CALL", "OPERATOR_CALL", "Method::init"):
        assert backend[portable] == "portable"
    assert np.allclose(timed["start_us"], timed["start"] / 1000)
    assert np.allclose(timed["end_us"], timed["end"] / 1000)
    assert np.allclose((timed["end_us"] - timed["start_us"]) / 1000, timed["duration_ms"])


def test_ops_stats_rows_are_operators_with_the_kits_totals(files):
    analysis, f = files
    ops = f["s_ops_stats.csv"]
    assert ops["name"].tolist() == analysis.operators["name"].tolist()
    assert ops["type"].tolist() == [base_type(n) for n in ops["name"]]
    assert (ops["count"] == 1).all()
    assert np.allclose(ops["total_ms"], ops["mean_ms_per_run"])
    assert np.allclose(ops["avg_ms"], ops["total_ms"] / ops["calls_per_run"])
    assert ops["pct_total"].sum() == pytest.approx(100.0)
    assert dict(zip(ops["name"], ops["delegate_backend"])) == {
        "Convolution (NHWC, F32) IGEMM #1": "XnnpackBackend",
        "Fully Connected (NC, F32) GEMM #1": "XnnpackBackend",
        "native_call__adaptive_avg_pool2d.out": "portable", "Add (ND) #1": "delegated"}
    # a timed run's operator time per type: the kit's total_ms summed by type
    timed = f["s_all_runs_timeline.csv"]
    leaves = timed[timed["leaf"] & (timed["run_index"] == 0)]
    assert leaves.groupby("type")["duration_ms"].sum().to_dict() == pytest.approx(
        ops.groupby("type")["total_ms"].sum().to_dict())


def test_operator_called_several_times_a_run(tmp_path):
    calls = [("delegate", 0, [("Add (ND) #1", 100)]), ("delegate", 1, [("Add (ND) #1", 300)])]
    runs = [program_run(r * 1_000_000, calls) for r in range(3)]
    analysis = analyze(parse_etdump(make_etdump(runs)), warmup=1)
    ops = pd.read_csv(write_csvs(analysis, tmp_path, "x")[1])
    # name + instruction are two operators, one call each; the kit's type unites them
    assert ops["count"].tolist() == [1, 1] and set(ops["type"]) == {"Add (ND)"}
    assert ops["total_ms"].sum() == pytest.approx(0.0004)


@pytest.mark.parametrize("name, fields", [
    ("xnn_f32_igemm_minmax_ukernel_4x8__aarch64_neonfma_cortex_a75",
     ("f32", "igemm", "minmax", "4x8", "aarch64_neonfma_cortex_a75")),
    ("xnn_pf32_gemm_minmax_ukernel_32x32__neonsme2", ("pf32", "gemm", "minmax", "32x32",
                                                      "neonsme2")),
    ("xnn_f32_vadd_ukernel__neon_u8", ("f32", "vadd", "", "", "neon_u8")),
    ("xnn_x32_transposec_ukernel__4x4_aarch64_neon_tbl128",
     ("x32", "transposec", "", "", "4x4_aarch64_neon_tbl128")),
    ("xnn_qs8_qc8w_gemm_minmax_fp32_ukernel_1x8c4__neondot",
     ("qs8", "qc8w", "gemm", "1x8c4", "neondot")),
    ("xnn_f32_rminmax_ukernel", ("f32", "rminmax", "", "", "")),
    # KleidiAI's names by their own scheme (issue 49, item 13: empty on QEMU before)
    ("kai_run_matmul_clamp_f32_f32p2vlx1_f32p2vlx1biasf32_sme2_mopa",
     ("f32", "matmul", "clamp", "", "sme2_mopa")),
    ("kai_run_matmul_clamp_f32_qai8dxp1vlx4_qsi8cxp4vlx4_1vlx4vl_sme2_mopa",
     ("f32", "matmul", "clamp", "1vlx4vl", "sme2_mopa")),
    ("kai_run_lhs_imatmul_pack_x32p2vlx1_x32p_sme", ("x32p", "lhs_imatmul_pack", "", "", "sme")),
    ("", ("", "", "", "", "")),
])
def test_kernel_name_fields_read_the_name_as_the_kit_does(name, fields):
    assert kernel_name_fields(name) == fields


def test_xnntrace_counts_and_categories():
    log = ("Using gemm microkernel 'xnn_a__neonsme2'.\n"
           "[xnnpack] Using gemm microkernel 'xnn_a__neonsme2'\n"
           "Using transposec microkernel 'xnn_t__neon'\n")
    assert xnntrace_counts(log) == {("xnn_a__neonsme2", "gemm"): 2,
                                    ("xnn_t__neon", "transposec"): 1}
    assert [log_category(k) for k in ("gemm", "TransposeC", "vunary")] == [
        "gemm", "transpose", "vunary"]


def test_kernels_file_from_an_xnntrace_log(tmp_path):
    log = ("Using gemm microkernel 'xnn_pf32_gemm_minmax_ukernel_32x32__neonsme2'.\n" * 2
           + "Using igemm microkernel 'xnn_f32_igemm_minmax_ukernel_4x8__neonsme'.\n"
           + "Using transposec microkernel 'xnn_x32_transposec_ukernel__4x4_neon'.\n")
    calls = [("delegate", 0, [("Add (ND) #1", 100)])]
    analysis = analyze(parse_etdump(make_etdump([program_run(0, calls)])),
                       kernels=KernelSources(xnntrace=log))
    kernels = pd.read_csv(write_csvs(analysis, tmp_path, "x", model_id="m")[2],
                          keep_default_na=False)
    assert kernels[KIT_KERNEL_COLUMNS].to_dict("records") == [
        {"model_id": "m", "kernel_name": "xnn_pf32_gemm_minmax_ukernel_32x32__neonsme2",
         "category": "gemm", "count": 2, "dtype": "pf32", "xnn_op": "gemm",
         "variant": "minmax", "ukernel_shape": "32x32", "arch_chain": "neonsme2",
         "has_sme": 1, "has_sme2": 1},
        {"model_id": "m", "kernel_name": "xnn_f32_igemm_minmax_ukernel_4x8__neonsme",
         "category": "igemm", "count": 1, "dtype": "f32", "xnn_op": "igemm",
         "variant": "minmax", "ukernel_shape": "4x8", "arch_chain": "neonsme",
         "has_sme": 1, "has_sme2": 0},
        {"model_id": "m", "kernel_name": "xnn_x32_transposec_ukernel__4x4_neon",
         "category": "transpose", "count": 1, "dtype": "x32", "xnn_op": "transposec",
         "variant": "", "ukernel_shape": "", "arch_chain": "4x4_neon",
         "has_sme": 0, "has_sme2": 0}]
    assert kernels["kind"].tolist() == ["gemm", "igemm", "transposec"]
    assert kernels["sme2"].tolist() == [True, False, False]


def test_kernels_file_from_a_kernel_trace_fills_the_kits_columns_from_the_names(tmp_path):
    """On QEMU no log names the kernels: category from the name, count the operators the
    kernel serves, the name's fields read (issue 49, item 13: 7 columns were empty)."""
    analysis = crafted_analysis()
    executed = [TracedKernel("kai_run_matmul_clamp_f32_f32p_f32p_sme2_mopa", "SME2", "kleidiai",
                             "libkai.so", 12, 7),
                TracedKernel("xnn_f32_gemm_minmax_ukernel_4x8__neonsme", "SME", "xnnpack",
                             "libx.so", 3, 3)]
    analysis = replace(analysis, evidence=replace(
        analysis.evidence, executed_kernels=executed, streaming_sme_blocks=10,
        kernels=[LoggedKernel("xnn_f32_gemm_minmax_ukernel_4x8__neonsme", "gemm", "neonsme")]),
        kernel_log_counts={("xnn_f32_gemm_minmax_ukernel_4x8__neonsme", "gemm"): 3})
    kernels = pd.read_csv(write_csvs(analysis, tmp_path, "x")[2], keep_default_na=False)
    assert list(kernels.columns) == KIT_KERNEL_COLUMNS + [
        "kind", "isa", "isa_family", "sme2", "library", "blocks", "streaming_blocks"]
    assert kernels["kernel_name"].tolist() == [k.name for k in executed]
    # the log named the second one (3 times); the first only the trace saw: its category
    # from its name, its count the operators of its datatype (PF32) in the ETDump
    assert kernels["category"].tolist() == ["gemm", "gemm"]
    served = sum(op_name(n) in ("Fully Connected (NC, PF32)", "Convolution (NHWC, PF32) IGEMM")
                 for n in analysis.operators["name"])
    assert kernels["count"].tolist() == [served, 3]
    assert kernels[["dtype", "xnn_op", "variant", "arch_chain"]].values.tolist() == [
        ["f32", "matmul", "clamp", "sme2_mopa"], ["f32", "gemm", "minmax", "neonsme"]]
    assert kernels["has_sme"].tolist() == [1, 1] and kernels["has_sme2"].tolist() == [1, 0]
    assert kernels["kind"].tolist() == ["kleidiai", "xnnpack"]


def test_no_kernel_evidence_writes_the_header_alone(tmp_path):
    calls = [("delegate", 0, [("Add (ND) #1", 100)])]
    analysis = analyze(parse_etdump(make_etdump([program_run(0, calls)])))
    text = write_csvs(analysis, tmp_path, "x")[2].read_text()
    assert text.splitlines() == [",".join(KIT_KERNEL_COLUMNS + ["kind", "isa", "isa_family",
                                                                "sme2"])]


def test_no_warm_up_writes_the_warm_up_header_alone(tmp_path):
    calls = [("delegate", 0, [("Add (ND) #1", 100)])]
    analysis = analyze(parse_etdump(make_etdump([program_run(0, calls)])))
    warm = write_csvs(analysis, tmp_path, "x")[4]
    assert warm.name == "x_warmup_timeline.csv"
    assert pd.read_csv(warm).empty


def test_analyze_csv_dir_writes_files_the_kits_reading_agrees_with(tmp_path, capsys):
    """``pytest-sme2 analyze --warmup 1 --csv-dir``: five files, model_id the ETDump's stem, and
    the kit's per-run latencies are ``--json``'s ``e2e_ms`` without the warm-up run."""
    import json

    from pytest_sme2.cli import main

    et = tmp_path / "m.etdump"
    calls = [("delegate", 0, [("Convolution (NHWC, F32) IGEMM #1", 1000)])]
    et.write_bytes(make_etdump([program_run(r * 1_000_000, calls, framework_ns=100 + r)
                                for r in range(4)]))
    out = tmp_path / "csv"
    assert main(["analyze", str(et), "--warmup", "1", "--csv-dir", str(out), "--json",
                 str(tmp_path / "a.json")]) == 0
    names = ["m_all_runs_timeline.csv", "m_ops_stats.csv", "kernels.csv", "m_run0_timeline.csv",
             "m_warmup_timeline.csv"]
    assert [line for line in capsys.readouterr().out.splitlines()
            if line.startswith("wrote ") and line.endswith(".csv")] == [
        f"wrote {out / name}" for name in names]
    doc = json.loads((tmp_path / "a.json").read_text())
    timeline = pd.read_csv(out / "m_all_runs_timeline.csv")
    executes = timeline[timeline["name"] == "Method::execute"]
    assert executes.groupby("run_index")["duration_ms"].sum().tolist() == doc["e2e_ms"][1:]
    assert set(timeline["model_id"]) == {"m"}


def test_an_executed_kernels_count_is_the_operators_of_its_datatype(tmp_path):
    calls = [("delegate", 0, [("Fully Connected (NC, PF32) #1", 400),
                              ("Fully Connected (NC, PF32) #2", 400), ("Add (ND) #1", 100)])]
    analysis = analyze(parse_etdump(make_etdump([program_run(0, calls)])))
    executed = [TracedKernel("kai_run_matmul_clamp_f32_f32p2vlx1_f32p2vlx1biasf32_sme2_mopa",
                             "SME2", "kleidiai", "libkai.so", 12, 7),
                TracedKernel("kai_run_rhs_pack_kxn_f32p2vlx1biasf32_f32_f32_sme", "SME",
                             "kleidiai", "libkai.so", 4, 4)]
    analysis = replace(analysis, evidence=replace(analysis.evidence, executed_kernels=executed,
                                                  streaming_sme_blocks=11))
    kernels = pd.read_csv(write_csvs(analysis, tmp_path, "x")[2], keep_default_na=False)
    assert kernels[["category", "count", "xnn_op"]].values.tolist() == [
        ["gemm", 2, "matmul"], ["pack", 0, "rhs_pack"]]
