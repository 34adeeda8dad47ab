"""Recommendations: one test per rule, on crafted documents, and the figures they cite."""

from __future__ import annotations

import copy
import re

import pytest

from pytest_sme2.report.recommend import Recommendation, recommendations
from tests.fakes.results_docs import (HOST_NO_SME2, evidence, interval, noisy, op, single_doc,
                                      sme2_doc)


def by_rule(doc) -> dict[str, list[Recommendation]]:
    out: dict[str, list[Recommendation]] = {}
    for r in recommendations(doc):
        out.setdefault(r.rule, []).append(r)
    return out


def only(doc, rule: str) -> Recommendation:
    recs = by_rule(doc).get(rule, [])
    assert len(recs) == 1, f"{rule}: {recs}"
    return recs[0]


def test_a_clean_benchmark_gets_no_recommendations():
    assert recommendations(single_doc()) == []


@pytest.mark.parametrize("doc", [{}, {"benchmarks": [], "comparisons": []}])
def test_an_empty_document_gets_none(doc):
    assert recommendations(doc) == []


def test_the_sme2_story_in_priority_order():
    rules = [r.rule for r in recommendations(sme2_doc())]
    assert rules == ["portable-op", "data-movement", "evidence"]


def test_every_recommendation_cites_a_figure_it_states():
    docs = [sme2_doc(), sme2_doc(on_samples=noisy), single_doc(samples=noisy(2.0)),
            sme2_doc(verdict="no significant difference", speedup=interval(1.0, 0.97, 1.03))]
    for doc in docs:
        for r in recommendations(doc):
            assert r.evidence, r
            figures = re.findall(r"\d+\.\d+(?:%|x| ms)|'\w+'", r.evidence)
            assert figures, r.evidence
            assert any(f in r.text for f in figures), (r.text, r.evidence)


def test_data_movement_after_acceleration():
    r = only(sme2_doc(), "data-movement")
    assert r.text.startswith("Data Movement takes 25.0% of E2E on mobilenet_v3_small fp16 t1 "
                             "sme2_on, up from 10.0% on sme2_off: with Convolution and GEMM "
                             "faster, moving data is what is left — the next bottleneck.")
    assert ("Transpose operators take 15.0% of E2E — look for layout changes (NCHW<->NHWC) "
            "around `Transpose (ND, X16) #1` (15.0%)") in r.text
    assert "Copy operators take 7.5% of E2E" in r.text
    assert "Convert" not in r.text                              # 2.5%: not worth a clause
    assert r.text.index("Transpose operators") < r.text.index("Copy operators")
    assert r.evidence == ("Data Movement 25.0% of E2E (1.000 of 4.000 ms), 10.0% on sme2_off")


def test_data_movement_in_a_plain_benchmark():
    e2e = 2.0
    ops = [op("Convolution (NHWC, F32) IGEMM #1", 1.2, e2e, "Convolution"),
           op("native_call_permute_copy.out", 0.6, e2e, "Data Movement", delegated=False)]
    doc = single_doc(operators=ops, categories={"Convolution": 1.2, "Data Movement": 0.6})
    r = only(doc, "data-movement")
    assert r.text.startswith("Data Movement takes 30.0% of E2E on toy_cnn fp32 t1 python. "
                             "Transpose operators take 30.0% of E2E")
    assert "up from" not in r.text


def test_portable_operator_above_5_percent_hardsigmoid_casts():
    r = only(sme2_doc(), "portable-op")
    assert r.text.startswith("`native_call__to_dim_order_copy.out` runs 18 times per inference "
                             "outside the delegate (`features.1.block.1.scale_activation`, ")
    assert "(+6 more)" in r.text
    assert "takes 7.5% of E2E on mobilenet_v3_small fp16 t1 sme2_on" in r.text
    assert "Hardsigmoid decomposes into int64 casts" in r.text
    assert "`clamp(x + 3, 0, 6) / 6`" in r.text
    assert r.evidence == ("native_call__to_dim_order_copy.out: 7.5% of E2E, 0.300 ms and 18 "
                          "calls per run, portable (mobilenet_v3_small fp16 t1 sme2_on)")


def test_portable_global_pool_and_generic_advice():
    e2e = 2.0
    ops = [op("Convolution (NHWC, F32) IGEMM #1", 1.4, e2e, "Convolution"),
           op("native_call__adaptive_avg_pool2d.out", 0.2, e2e, "Pooling", delegated=False,
              op_types=["aten._adaptive_avg_pool2d.default"]),
           op("native_call_cumsum.out", 0.2, e2e, "Other", delegated=False, calls=2,
              op_types=["aten.cumsum.default"]),
           op("native_call_mul.out", 0.05, e2e, "Elementwise", delegated=False)]   # 2.5%: no
    doc = single_doc(operators=ops, categories={"Convolution": 1.4, "Pooling": 0.2,
                                                "Elementwise": 0.05})
    pool, cumsum = by_rule(doc)["portable-op"]
    assert "runs once per inference" in pool.text
    assert "`nn.AvgPool2d(kernel_size=k, stride=k)`" in pool.text and "1x1 output" in pool.text
    assert "runs 2 times per inference outside the delegate (`aten.cumsum.default`)" in \
        cumsum.text
    assert "check whether the XNNPACK partitioner supports aten.cumsum.default" in cumsum.text


def test_to_copy_without_hardsigmoid_context_gets_layout_advice():
    doc = sme2_doc()
    for b in doc["benchmarks"]:
        for o in b["operators"]:
            o.pop("module_paths", None)
    r = only(doc, "portable-op")
    assert "Hardsigmoid" not in r.text
    assert "keep one dtype and one memory format (channels_last)" in r.text


def test_no_significant_difference_on_an_sme2_device():
    doc = sme2_doc(verdict="no significant difference", speedup=interval(1.01, 0.99, 1.03))
    r = only(doc, "sme2-no-difference")
    assert "speed-up 1.010x [0.990, 1.030] (no significant difference) on an SME2 comparison" \
        in r.text
    assert "check sme2_on's build flags (labels: build_type=Release, sme2=on)" in r.text
    assert "hwcaps SME2: yes" in r.text


def test_no_significant_difference_on_a_device_without_sme2():
    doc = sme2_doc(verdict="no significant difference", speedup=interval(1.0, 0.98, 1.02),
                   device=HOST_NO_SME2)
    r = only(doc, "sme2-no-difference")
    assert "The device reports no SME2 (AMD EPYC, x86_64)" in r.text
    assert "run this comparison on an SME2 device" in r.text


def test_a_non_sme2_comparison_with_no_difference_is_not_an_sme2_problem():
    doc = sme2_doc(verdict="no significant difference", speedup=interval(1.0, 0.98, 1.02))
    for b in doc["benchmarks"]:
        b["runner"] = b["runner"].replace("sme2_", "")
        b["runner_info"] = {"name": b["runner"], "kind": "binary", "labels": {}}
    cmp = doc["comparisons"][0]
    cmp["base"], cmp["candidate"] = "off", "on"
    assert "sme2-no-difference" not in by_rule(doc)
    assert "evidence" not in by_rule(doc)


def test_slower_candidate():
    doc = sme2_doc(verdict="slower", speedup=interval(0.8, 0.75, 0.85))
    r = only(doc, "slower")
    assert r.text.startswith("sme2_on is slower than sme2_off on mobilenet_v3_small fp16 t1: "
                             "speed-up 0.800x [0.750, 0.850] (slower).")


def test_faster_without_sme2_kernels_is_not_credited_to_sme2():
    doc = sme2_doc(on_evidence=evidence("absent", "xnntrace lists 3 micro-kernels and none is "
                                        "SME2 (ISAs: neonfp16arith)"))
    r = only(doc, "faster-without-sme2")
    assert "kernel evidence is 'absent'" in r.text
    assert "the gain comes from something else in the build" in r.text


def test_outputs_that_differ_come_first():
    doc = sme2_doc(outputs={"max_abs_diff": 0.5, "tolerance": 0.01, "equal": False})
    first = recommendations(doc)[0]
    assert first.rule == "outputs"
    assert "(max |Δ| 0.5 > tolerance 0.01)" in first.text


def test_low_convolution_speedup_on_an_sme2_comparison():
    doc = sme2_doc(conv_speedup=interval(1.2, 1.1, 1.3), on_conv=5.0)
    r = only(doc, "low-compute-speedup")
    assert r.text.startswith("Convolution is 60.0% of E2E on mobilenet_v3_small fp16 t1 "
                             "sme2_off but only 1.200x [1.100, 1.300] faster on sme2_on")
    assert "here 'indicated'" in r.text


def test_noise_cv_above_10_percent():
    r = only(sme2_doc(on_samples=noisy), "noise")
    assert re.search(r"sme2_on CV 2\d\.\d% in 5 of 5 blocks", r.text)
    assert "CV above 10%" in r.text
    assert "--sme2-taskset" in r.text                    # an Android device
    assert "raise --runs (now 20)" in r.text
    host = only(single_doc(samples=noisy(2.0)), "noise")
    assert "taskset -c" in host.text and "blocks" not in host.text


def test_heat_is_noticed():
    r = only(sme2_doc(thermal=(35.0, 48.0)), "noise")
    assert "the hottest thermal zone rose from 35.0 to 48.0 °C" in r.text
    assert by_rule(sme2_doc(thermal=(35.0, 37.0))).get("noise") is None


def test_framework_overhead():
    doc = single_doc(overheads={"delegate_ms": 0.2, "operator_call_ms": 0.05,
                                "runtime_ms": 0.05})
    r = only(doc, "overhead")
    assert r.text.startswith("Framework overhead is 15.0% of E2E on toy_cnn fp32 t1 python")
    assert r.evidence.startswith("overhead 0.300 ms = 15.0% of 2.000 ms E2E (delegate 0.200")


def test_uncategorised_operators():
    e2e = 2.0
    ops = [op("Convolution (NHWC, F32) IGEMM #1", 1.5, e2e, "Convolution"),
           op("Mystery Op (NC) #1", 0.3, e2e, "Other")]
    r = only(single_doc(operators=ops, categories={"Convolution": 1.5}), "other-ops")
    assert "take 15.0% of E2E" in r.text and "`Mystery Op (NC) #1`" in r.text


def test_indicated_evidence_is_never_called_proven():
    recs = recommendations(sme2_doc())
    r = only(sme2_doc(), "evidence")
    assert "is 'indicated' (KleidiAI packed operators ran: `Fully Connected (NC, PF16)`)" in \
        r.text
    assert "--xnntrace" in r.text
    for rec in recs:
        assert not re.search(r"\bproven\b|confirm", rec.text, re.IGNORECASE), rec.text


def test_no_evidence_nagging_on_a_device_without_sme2():
    doc = single_doc(ev=evidence("unknown"))
    assert "evidence" not in by_rule(doc)
    sme2_phone = single_doc(ev=evidence("unknown"), device=copy.deepcopy(sme2_doc()[
        "benchmarks"][0]["device"]))
    assert "evidence" in by_rule(sme2_phone)


def _cases_doc(cases, ops_of, *, overheads_of=None, samples_of=None) -> dict:
    """Plain benchmarks of toy_cnn, one per (dtype, threads, e2e ms): ``ops_of(e2e)`` their
    operators."""
    from tests.fakes.results_docs import HOST_NO_SME2, benchmark, steady

    benches = []
    for dtype, threads, e2e in cases:
        ops = ops_of(e2e)
        cats: dict[str, float] = {}
        for o in ops:
            cats[o["category"]] = cats.get(o["category"], 0.0) + o["mean_ms_per_run"]
        benches.append(benchmark(f"b.py::test_latency[toy_cnn-{dtype}-t{threads}]", "native",
                                 (samples_of or steady)(e2e), cats, ops, model="toy_cnn",
                                 dtype=dtype, threads=threads, device=HOST_NO_SME2,
                                 overheads=overheads_of(e2e) if overheads_of else None))
    return {"schema": "pytest-sme2/results/1", "session": {}, "benchmarks": benches,
            "comparisons": []}


CASES = [("fp32", 1, 2.0), ("fp16", 1, 4.0), ("int8", 2, 1.0)]


def test_an_operator_a_model_keeps_portable_is_one_recommendation_for_all_its_cases():
    """A real session said the same gelu advice 15 times: once per transformer block (each its
    own instruction) in each dtype and thread count."""
    def ops_of(e2e):
        return [op("Convolution (NHWC, F32) IGEMM #1", 0.5 * e2e, e2e, "Convolution"),
                *[op("native_call_gelu.out", 0.08 * e2e, e2e, "Other", delegated=False,
                     instr=10 + i, op_types=["aten.gelu.default"],
                     module_paths=[f"blocks.{i}.mlp.act"]) for i in range(4)]]

    recs = by_rule(_cases_doc(CASES, ops_of))["portable-op"]
    assert len(recs) == 1
    r = recs[0]
    assert r.text.startswith("`native_call_gelu.out` runs 4 times per inference outside the "
                             "delegate (`blocks.0.mlp.act`, `blocks.1.mlp.act`, "
                             "`blocks.2.mlp.act` (+1 more)) in 3 cases of toy_cnn and takes "
                             "32.0% of E2E (most: 32.0% on toy_cnn fp16 t1 native)")
    assert r.evidence.count("32.0% of E2E") == 3 and "toy_cnn int8 t2 native" in r.evidence
    assert "0.160 ms and 1 call" not in r.evidence   # the four rows of a case are one figure


def test_one_case_among_many_keeps_the_single_case_wording():
    def ops_of(e2e):
        portable = e2e == 4.0   # only fp16 keeps it outside the delegate
        return [op("Convolution (NHWC, F32) IGEMM #1", 0.5 * e2e, e2e, "Convolution"),
                op("native_call_gelu.out", 0.2 * e2e, e2e, "Other", delegated=not portable)]

    r = only(_cases_doc(CASES, ops_of), "portable-op")
    assert "runs once per inference outside the delegate and takes 20.0% of E2E on toy_cnn " \
           "fp16 t1 native" in r.text


def test_data_movement_of_a_model_is_said_once_with_its_range():
    def ops_of(e2e):
        share = {2.0: 0.10, 4.0: 0.20, 1.0: 0.05}[e2e]
        return [op("Convolution (NHWC, F32) IGEMM #1", 0.5 * e2e, e2e, "Convolution"),
                # XNNPACK numbers operators per delegate: two delegates, two "#1"s
                op("Transpose (ND, X32) #1", share * e2e / 2, e2e, "Data Movement", instr=1),
                op("Transpose (ND, X32) #1", share * e2e / 2, e2e, "Data Movement", instr=2),
                op("Transpose (ND, X32) #2", 0.0001 * e2e, e2e, "Data Movement", instr=2)]

    r = only(_cases_doc(CASES, ops_of), "data-movement")
    assert r.text.startswith("Data Movement takes 5.0–20.0% of E2E in 3 cases of toy_cnn "
                             "(most: 20.0% on toy_cnn fp16 t1 native). Transpose operators "
                             "take up to 20.0% of E2E — look for layout changes (NCHW<->NHWC) "
                             "around `Transpose (ND, X32) #1` (20.0% over 2 operators):")
    assert "#2" not in r.text     # 0.0% of E2E names nothing
    assert r.evidence.startswith("Data Movement 20.0% of E2E (0.800 of 4.000 ms) on toy_cnn "
                                 "fp16 t1 native; Data Movement 10.0% of E2E")


def test_framework_overhead_of_a_model_is_said_once():
    def ops_of(e2e):
        return [op("Convolution (NHWC, F32) IGEMM #1", 0.7 * e2e, e2e, "Convolution")]

    def overheads_of(e2e):
        return {"delegate_ms": 0.3 * e2e, "operator_call_ms": 0.0, "runtime_ms": 0.0}

    r = only(_cases_doc(CASES, ops_of, overheads_of=overheads_of), "overhead")
    assert r.text.startswith("Framework overhead is 30.0% of E2E in 3 cases of toy_cnn (most: "
                             "30.0% on toy_cnn")
    assert r.evidence.count("overhead ") == 3


def test_noisy_benchmarks_share_one_recommendation():
    def ops_of(e2e):
        return [op("Convolution (NHWC, F32) IGEMM #1", 0.7 * e2e, e2e, "Convolution")]

    r = only(_cases_doc(CASES, ops_of, samples_of=noisy), "noise")
    assert r.text.startswith("3 benchmarks are noisy (toy_cnn fp32 t1: native CV 2")
    assert "toy_cnn int8 t2: native CV" in r.text and r.text.count("taskset") == 1


def test_grouped_recommendations_cite_figures_they_state():
    def ops_of(e2e):
        return [op("Convolution (NHWC, F32) IGEMM #1", 0.4 * e2e, e2e, "Convolution"),
                op("Transpose (ND, X32) #1", 0.2 * e2e, e2e, "Data Movement"),
                op("native_call_gelu.out", 0.1 * e2e, e2e, "Other", delegated=False)]

    for r in recommendations(_cases_doc(CASES, ops_of, samples_of=noisy)):
        figures = re.findall(r"\d+\.\d+(?:%|x| ms)|'\w+'", r.evidence)
        assert figures and any(f in r.text for f in figures), (r.text, r.evidence)


def test_module_paths_read_in_natural_order():
    def ops_of(e2e):
        return [op("Convolution (NHWC, F32) IGEMM #1", 0.5 * e2e, e2e, "Convolution"),
                *[op("native_call_gelu.out", 0.02 * (12 - i) * e2e, e2e, "Other",
                     delegated=False, instr=10 + i, module_paths=[f"blocks.{i}.mlp.act"])
                  for i in (10, 2, 1)]]

    r = only(_cases_doc(CASES[:1], ops_of), "portable-op")
    assert "(`blocks.1.mlp.act`, `blocks.2.mlp.act`, `blocks.10.mlp.act`)" in r.text


def test_a_noisy_comparison_is_told_apart_from_a_noisy_benchmark_of_the_same_case():
    doc = sme2_doc(on_samples=noisy)
    plain = single_doc(samples=noisy(2.0))["benchmarks"][0]
    plain.update(model="mobilenet_v3_small", dtype="fp16", nodeid="b.py::test_latency[m]",
                 device=copy.deepcopy(doc["benchmarks"][0]["device"]))
    doc["benchmarks"].append(plain)
    r = only(doc, "noise")
    assert r.text.startswith("2 benchmarks are noisy (mobilenet_v3_small fp16 t1 (sme2_off vs "
                             "sme2_on): sme2_on CV")
    assert "; mobilenet_v3_small fp16 t1: python CV" in r.text
    assert "1 outlier runs" not in r.text


def test_an_emulated_session_gets_no_advice_from_its_times():
    """A real --device qemu session: its speed-up, shares and CVs are the emulator's, so no
    rule that reads times fires ("Convolution ... only 1.004x faster (typically 3-15x)",
    "sme2_on is slower", "raise --runs"); the report says why (issue 49, item 13)."""
    import json
    from pathlib import Path

    from pytest_sme2.report.markdown.render import render_markdown

    doc = json.loads((Path(__file__).parents[2] / "fakes" / "results_qemu_session.json")
                     .read_text())
    rules = {r.rule for r in recommendations(doc)}
    assert not rules & {"low-compute-speedup", "noise", "sme2-no-difference", "overhead",
                        "portable-op", "data-movement"}, rules
    text = render_markdown(doc)
    advice = text.split("## Actionable Recommendations", 1)[1]
    assert "case(s) measured on an emulated CPU get no advice from their times" in advice
    assert "no noisy runs" not in advice and "typically 3-15x" not in advice
