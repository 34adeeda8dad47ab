"""Kernel evidence: trace parsing, ISA families, KleidiAI operator names, the SME2 verdict."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from pytest_sme2.analysis import kernels as kernels_module
from pytest_sme2.analysis.kernels import (
    KERNEL_COLUMNS,
    DispatchBugError,
    is_kleidiai_op,
    kernel_hint,
    kernels_frame,
    kleidiai_ops,
    operator_kernel_hints,
    parse_xnntrace,
    sme2_verdict,
)
from pytest_sme2.analysis.isa import isa_family, kernel_isa
from pytest_sme2.results import KernelEvidence, LoggedKernel, TracedKernel
from tests.kernel_names import F16_MOPA, F32_GEMV, F32_MOPA, QP8_DOT, QS8_MOPA, SME2_GEMM

SME1_GEMM = "xnn_pf32_gemm_minmax_ukernel_16x64__neonsme"
NEON_IGEMM = "xnn_f32_igemm_minmax_ukernel_4x8__aarch64_neonfma_ld128"

K_SME2 = LoggedKernel(SME2_GEMM, "gemm", "neonsme2", True)
K_SME1 = LoggedKernel(SME1_GEMM, "gemm", "neonsme", False)
K_NEON = LoggedKernel(NEON_IGEMM, "igemm", "aarch64_neonfma_ld128", False)

PACKED = ["Batch Matrix Multiply (NC, PF16)", "Fully Connected (NC, PF32)"]

# --- parse_xnntrace -------------------------------------------------------------------------


def test_parse_plain_line() -> None:
    text = f"Using gemm microkernel '{SME2_GEMM}'.\n"
    assert parse_xnntrace(text) == [K_SME2]


def test_parse_logcat_and_bracket_prefixes() -> None:
    text = (
        f"11-26 02:31:45.123  1234  1234 I XNNPACK: Using igemm microkernel '{NEON_IGEMM}'.\n"
        "[xnnpack] Using dwconv microkernel 'xnn_f32_dwconv_minmax_ukernel_25p8c__neon_acc2'.\n"
        "Info (XNNPACK): Using vunary microkernel 'xnn_f32_vclamp_ukernel__neon_u16'.\n"
    )
    assert parse_xnntrace(text) == [
        K_NEON,
        LoggedKernel("xnn_f32_dwconv_minmax_ukernel_25p8c__neon_acc2", "dwconv", "neon_acc2",
                     False),
        LoggedKernel("xnn_f32_vclamp_ukernel__neon_u16", "vunary", "neon_u16", False),
    ]


def test_parse_deduplicates_keeping_first_seen_order() -> None:
    text = "\n".join(
        [
            f"Using gemm microkernel '{SME2_GEMM}'.",
            f"Using igemm microkernel '{NEON_IGEMM}'.",
            f"Using gemm microkernel '{SME2_GEMM}'.",
            f"Using igemm microkernel '{NEON_IGEMM}'.",
        ]
    )
    assert parse_xnntrace(text) == [K_SME2, K_NEON]


def test_parse_same_name_different_kind_is_two_kernels() -> None:
    text = (
        "Using copy microkernel 'xnn_xx_copy_ukernel__scalar_memcpy'.\n"
        "Using vunary microkernel 'xnn_xx_copy_ukernel__scalar_memcpy'.\n"
    )
    assert [k.kind for k in parse_xnntrace(text)] == ["copy", "vunary"]


def test_parse_ignores_noise_lines() -> None:
    text = "\r\n".join(
        [
            "I XNNPACK: XNNPACK initialised",
            "Using 4 threads",
            "Using gemm microkernel without a name",
            "W XNNPACK: failed to create operator: unsupported",
            "Iteration 1 of 10: 1.07 ms",
            "Model executed successfully 10 time(s) in 10.7 ms.",
            "Using transposec microkernel 'xnn_x32_transposec_ukernel__4x4_sse'.\r",
        ]
    )
    assert parse_xnntrace(text) == [
        LoggedKernel("xnn_x32_transposec_ukernel__4x4_sse", "transposec", "4x4_sse", False)
    ]


def test_parse_name_without_isa_suffix() -> None:
    text = "Using packw microkernel 'xnn_x32_packw_gemm_goi_ukernel'.\n"
    assert parse_xnntrace(text) == [
        LoggedKernel("xnn_x32_packw_gemm_goi_ukernel", "packw", "unknown", False)
    ]


def test_parse_trailing_double_underscore_is_unknown_isa() -> None:
    assert parse_xnntrace("Using gemm microkernel 'xnn_weird__'.")[0].isa == "unknown"


def test_parse_empty_text() -> None:
    assert parse_xnntrace("") == []


def test_parse_sme1_kernel_is_not_sme2() -> None:
    assert parse_xnntrace(f"Using gemm microkernel '{SME1_GEMM}'.") == [K_SME1]


# --- isa_family -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("isa", "family"),
    [
        ("neonsme2", "SME2"),
        ("neonsme2_u4", "SME2"),
        ("neonsme", "SME"),
        ("sve2", "SVE"),
        ("neonfp16arith", "NEON"),
        ("neondot", "NEON"),
        ("neoni8mm", "NEON"),
        ("neon", "NEON"),
        ("neon_u16", "NEON"),
        ("aarch64_neonfma_lane_ld128", "NEON"),
        ("asm_aarch64_neondot_ld128", "NEON"),
        ("avx512skx", "x86"),
        ("avx2", "x86"),
        ("sse2", "x86"),
        ("ssse3", "x86"),
        ("f16c", "x86"),
        ("wasmsimd", "WASM"),
        ("rvv_u4v", "RISC-V"),
        ("hvx", "Hexagon"),
        ("scalar", "scalar"),
        ("scalar_u4", "scalar"),
        ("wasmsimd_x86_splat", "WASM"),
        ("4x4_sse", "x86"),
        ("8x8_reuse_multi_zip_neon", "NEON"),
        ("2x4_scalar_int", "scalar"),
        ("unknown", "unknown"),
        ("ld128", "unknown"),
        ("", "unknown"),
    ],
)
def test_isa_family(isa: str, family: str) -> None:
    assert isa_family(isa) == family


# --- kleidiai_ops ---------------------------------------------------------------------------


# Operators whose datatype list holds a KleidiAI packed datatype (PF32, PF16, PQS8, QP8), and
# operators with plain ones only (QS8, QD8, QDU8, F32...) or no list at all.
PACKED_OPS = [
    "Fully Connected (NC, PF32)",
    "Fully Connected (NC, PF16) #3",
    "Fully Connected (NC, QP8, F32, QC8W)",
    "Fully Connected (NC, PQS8, QC8W)",
    "Batch Matrix Multiply (NC, PF16)",
    "Convolution (NHWC, PQS8, QS8, QC8W) IGEMM",
    "Deconvolution (NHWC, PQS8, QS8, QC8W)",
    "Convert (NC, F32, QP8)",
]
PLAIN_OPS = [
    "Fully Connected (NC, QS8, QC8W) GEMM",
    "Fully Connected (NC, QDU8, F32, QC8W) GEMM",
    "Fully Connected (NC, QD8, F32, QC8W)",
    "Fully Connected (NC, F32) GEMM",
    "Convolution (NHWC, QC8) IGEMM",
    "Convolution (NHWC, F32) DWConv",
    "Transpose (ND, X32)",
    "Pack LH (X32)",
    "Even Split",
    "native_call_linear.out",
    "Method::execute",
]


@pytest.mark.parametrize("name,kleidiai", [(n, True) for n in PACKED_OPS]
                         + [(n, False) for n in PLAIN_OPS])
def test_packed_datatypes_are_kleidiai_and_plain_ones_are_not(name: str, kleidiai: bool) -> None:
    assert is_kleidiai_op(name) is kleidiai


def test_kleidiai_ops_sorted_unique_without_instance_suffix() -> None:
    names = [
        "Fully Connected (NC, PF32) #1",
        "Convolution (NHWC, F32) IGEMM #1",
        "Fully Connected (NC, PF32) #2",
        "Batch Matrix Multiply (NC, PF16) #1",
        "Fully Connected (NC, QS8, QC8W) GEMM #1",
        "native_call_linear.out",
        "Fully Connected (NC, PF32) #1",
    ]
    assert kleidiai_ops(names) == PACKED


def test_kleidiai_ops_of_nothing() -> None:
    assert kleidiai_ops([]) == []


# --- sme2_verdict ---------------------------------------------------------------------------


def test_proven_when_trace_has_sme2_kernel() -> None:
    ev = sme2_verdict(kernels=[K_NEON, K_SME2], kleidiai=PACKED, device_sme2=True)
    assert ev == KernelEvidence(
        "proven",
        f"xnntrace shows 1 SME2 micro-kernel ({SME2_GEMM})",
        PACKED,
        [K_NEON, K_SME2],
    )


def test_proven_without_device_info() -> None:
    assert sme2_verdict(kernels=[K_SME2], kleidiai=[], device_sme2=None).sme2 == "proven"


def test_an_sme2_kernel_logged_in_a_process_without_sme2_is_a_dispatch_bug() -> None:
    with pytest.raises(DispatchBugError, match=rf"^dispatch bug: SME2 micro-kernel {SME2_GEMM} "
                                               r"selected \(XNNPACK's log\) in a process whose "
                                               "hwcaps hide SME2"):
        sme2_verdict(kernels=[K_SME1, K_SME2], kleidiai=PACKED, device_sme2=False)
    # An SME1 kernel there is what such a process should run: no finding.
    assert sme2_verdict(kernels=[K_SME1], kleidiai=PACKED, device_sme2=False).sme2 == "absent"


def test_packed_operators_on_an_sme1_only_device_indicate_the_sme_level() -> None:
    ev = sme2_verdict(kernels=None, kleidiai=PACKED, device_sme2=False, device_sme=True)
    assert (ev.sme, ev.sme2) == ("indicated", "absent")
    assert ev.sme_reason.startswith("2 KleidiAI packed operators ran on a device reporting SME "
                                    "without SME2")
    # Without anything saying SME, nothing is claimed; the level is left out of the record.
    ev = sme2_verdict(kernels=None, kleidiai=PACKED, device_sme2=None)
    assert ev.sme == "unknown" and "sme" not in ev.to_json()
    assert ev.levels == "SME2: unknown"


def test_absent_when_device_lacks_sme2_even_if_packed_ops_ran() -> None:
    ev = sme2_verdict(kernels=None, kleidiai=PACKED, device_sme2=False)
    assert ev.sme2 == "absent"
    assert ev.reason == (
        "device hwcaps report no SME2, so the 2 KleidiAI packed operators that ran "
        "(Batch Matrix Multiply (NC, PF16), Fully Connected (NC, PF32)) used non-SME2 kernels"
    )
    assert ev.kleidiai_ops == PACKED


def test_absent_when_device_lacks_sme2_and_nothing_else_known() -> None:
    ev = sme2_verdict(kernels=None, kleidiai=[], device_sme2=False)
    assert (ev.sme2, ev.reason) == ("absent", "device hwcaps report no SME2")


def test_absent_when_trace_has_only_sme1_kernels() -> None:
    ev = sme2_verdict(kernels=[K_SME1], kleidiai=PACKED, device_sme2=True)
    assert ev.sme2 == "absent"
    assert ev.reason == (
        "xnntrace lists 1 micro-kernel and none is SME2 (ISAs: neonsme); "
        "neonsme is SME (SME1), not SME2"
    )


def test_absent_when_trace_contradicts_packed_ops() -> None:
    ev = sme2_verdict(kernels=[K_NEON], kleidiai=PACKED, device_sme2=None)
    assert ev.sme2 == "absent"
    assert ev.reason.startswith("xnntrace lists 1 micro-kernel and none is SME2")
    assert "SME1" not in ev.reason


def test_empty_trace_is_not_evidence_of_absence() -> None:
    ev = sme2_verdict(kernels=[], kleidiai=PACKED, device_sme2=True)
    assert ev.sme2 == "indicated"
    assert ev.reason.endswith("the xnntrace log had no kernel lines (XNNPACK logging off?)")
    assert ev.kernels == []


def test_empty_trace_without_packed_ops_is_unknown() -> None:
    ev = sme2_verdict(kernels=[], kleidiai=[], device_sme2=None)
    assert ev.sme2 == "unknown"
    assert "no kernel lines" in ev.reason


def test_indicated_on_sme2_device() -> None:
    three = [*PACKED, "Fully Connected (NC, QP8, F32, QC8W)"]
    ev = sme2_verdict(kernels=None, kleidiai=three, device_sme2=True)
    assert ev == KernelEvidence(
        "indicated",
        "3 KleidiAI packed operators ran (Batch Matrix Multiply (NC, PF16), "
        "Fully Connected (NC, PF32), Fully Connected (NC, QP8, F32, QC8W)) on a device "
        "reporting SME2; no kernel trace to prove SME2 micro-kernels",
        three,
        [],
    )


def test_packed_names_on_a_device_of_unknown_sme2_are_unknown_not_indicated() -> None:
    # Changed rule (issue 12): PF32/PF16/PQS8/QP8 names mean KleidiAI, not SME2 -- the same
    # names appear when KleidiAI runs SME1 kernels (QEMU 10, SME without SME2). Only a device
    # reporting SME2 makes them an indication. This test used to expect "indicated".
    ev = sme2_verdict(kernels=None, kleidiai=PACKED[:1], device_sme2=None)
    assert ev.sme2 == "unknown"
    assert ev.reason == (
        "1 KleidiAI packed operator ran (Batch Matrix Multiply (NC, PF16)), but device SME2 "
        "support is unknown (no device hwcaps): KleidiAI runs SME1 and NEON kernels too; "
        "no kernel trace"
    )


def test_empty_xnntrace_and_unknown_device_is_unknown() -> None:
    ev = sme2_verdict(kernels=[], kleidiai=PACKED, device_sme2=None)
    assert ev.sme2 == "unknown"
    assert ev.reason.endswith("the xnntrace log had no kernel lines (XNNPACK logging off?)")


def test_evidence_without_a_trace_keeps_its_old_shape() -> None:
    ev = sme2_verdict(kernels=None, kleidiai=[], device_sme2=False)
    assert (ev.executed_kernels, ev.streaming_sme_blocks, ev.kernel_trace_source) == ([], None, "")
    assert not ev.traced and not ev.sampled


def test_the_analysis_emits_the_records_results_json_stores() -> None:
    ev = sme2_verdict(kernels=[K_SME2], kleidiai=PACKED, device_sme2=True)
    assert type(ev) is KernelEvidence and type(ev.kernels[0]) is LoggedKernel
    assert KernelEvidence.from_json(ev.to_json()) == ev


def test_the_old_names_of_the_kernel_records_are_gone() -> None:
    from pytest_sme2.analysis import kernel_trace, kernels

    assert not any(hasattr(kernels, n) for n in ("Evidence", "Kernel"))
    assert not hasattr(kernel_trace, "ExecutedKernel")
    ev = KernelEvidence("proven", "r", executed_kernels=[TracedKernel("k", "SME2")],
                        streaming_sme_blocks=3)
    assert not hasattr(ev, "executed") and not hasattr(ev, "streaming_blocks")


def test_long_operator_lists_are_shortened() -> None:
    ops = [f"Fully Connected (NC, PF32) variant {i}" for i in range(5)]
    reason = sme2_verdict(kernels=None, kleidiai=ops, device_sme2=True).reason
    assert "variant 2 and 2 more)" in reason
    assert "variant 3" not in reason


@pytest.mark.parametrize(
    ("device_sme2", "tail"),
    [(True, "device hwcaps report SME2"), (None, "device SME2 support is unknown")],
)
def test_unknown_without_trace_or_packed_ops(device_sme2: bool | None, tail: str) -> None:
    ev = sme2_verdict(kernels=None, kleidiai=[], device_sme2=device_sme2)
    assert ev.sme2 == "unknown"
    assert ev.reason == (
        "no KleidiAI packed operators in the ETDump operator names and no kernel trace; " + tail
    )


def test_verdict_deduplicates_operator_names() -> None:
    ev = sme2_verdict(kernels=None, kleidiai=[*PACKED, PACKED[0]], device_sme2=True)
    assert ev.kleidiai_ops == PACKED


# --- kernels_frame --------------------------------------------------------------------------


def test_kernels_frame_rows_and_columns() -> None:
    df = kernels_frame([K_SME2, K_SME1, K_NEON])
    assert list(df.columns) == KERNEL_COLUMNS == ["name", "kind", "isa", "isa_family", "sme2"]
    assert df.to_dict("records") == [
        {"name": SME2_GEMM, "kind": "gemm", "isa": "neonsme2", "isa_family": "SME2", "sme2": True},
        {"name": SME1_GEMM, "kind": "gemm", "isa": "neonsme", "isa_family": "SME", "sme2": False},
        {
            "name": NEON_IGEMM,
            "kind": "igemm",
            "isa": "aarch64_neonfma_ld128",
            "isa_family": "NEON",
            "sme2": False,
        },
    ]
    assert df["sme2"].dtype == bool


def test_kernels_frame_empty_keeps_columns() -> None:
    df = kernels_frame([])
    assert list(df.columns) == KERNEL_COLUMNS
    assert len(df) == 0
    assert df["sme2"].dtype == bool


def test_module_imports_only_stdlib_pandas_and_categories() -> None:
    tree = ast.parse(Path(kernels_module.__file__).read_text())
    modules = {
        node.module if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    }
    # kernel_trace and kernel_sample are imported for type annotations only (under
    # TYPE_CHECKING); the ISA rules live in isa.py, which both evidence sources use too; the
    # records it emits are results.json's.
    allowed = set(sys.stdlib_module_names) | {"pandas", "pytest_sme2.analysis.categories",
                                              "pytest_sme2.errors",
                                              "pytest_sme2.analysis.isa",
                                              "pytest_sme2.results.records",
                                              "pytest_sme2.analysis.kernel_sample",
                                              "pytest_sme2.analysis.kernel_trace"}
    assert {m if m.startswith("pytest_sme2") else m.split(".")[0] for m in modules} <= allowed


def test_kernel_trace_is_imported_for_types_only() -> None:
    source = Path(kernels_module.__file__).read_text()
    assert "if TYPE_CHECKING:" in source
    assert not hasattr(kernels_module, "KernelTrace")


# --- operator kernel hints --------------------------------------------------------------------


def ek(name: str) -> TracedKernel:
    return TracedKernel(name, isa_family(kernel_isa(name)), "kleidiai", "lib.so", 3)


def test_one_operator_of_a_datatype_gets_its_kernels() -> None:
    ops = ["Fully Connected (NC, PF16) #1", "Fully Connected (NC, PF16) #2",
           "Convolution (NHWC, PF32) #1", "Add (ND, F32) #1"]
    hints = operator_kernel_hints(ops, [ek(F16_MOPA), ek(F32_MOPA), ek(F32_GEMV)])
    assert hints == {"Convolution (NHWC, PF32)": [F32_GEMV, F32_MOPA],
                     "Fully Connected (NC, PF16)": [F16_MOPA]}
    assert kernel_hint("Fully Connected (NC, PF16) #2", hints) == F16_MOPA
    assert kernel_hint("Convolution (NHWC, PF32) #1", hints) == f"{F32_GEMV}, {F32_MOPA}"
    assert kernel_hint("Add (ND, F32) #1", hints) == ""


def test_several_operators_of_one_datatype_cannot_be_told_apart() -> None:
    ops = ["Convolution (NHWC, PF32)", "Fully Connected (NC, PF32)"]
    hints = operator_kernel_hints(ops, [ek(F32_MOPA)])
    assert kernel_hint("Convolution (NHWC, PF32)", hints) == (
        f"cannot tell (2 operators share the datatype): {F32_MOPA}")


@pytest.mark.parametrize(
    ("op", "kernel"),
    [
        ("Fully Connected (NC, QP8, F32, QC8W)", QP8_DOT),
        ("Convolution (NHWC, PQS8, QS8, QC8W) IGEMM", QS8_MOPA),
        ("Convolution (NHWC, QC8) IGEMM", "xnn_qs8_qc8w_igemm_minmax_fp32_ukernel_4x16__neon"),
        ("Batch Matrix Multiply (NC, PF16)", F16_MOPA),
    ],
)
def test_datatypes_pair_operators_and_kernels(op: str, kernel: str) -> None:
    assert operator_kernel_hints([op], [ek(kernel)]) == {op: [kernel]}


def test_no_hint_for_other_datatypes_depthwise_or_without_trace() -> None:
    assert operator_kernel_hints(["Convolution (NHWC, F32) IGEMM"], [ek(F32_MOPA)]) == {}
    assert operator_kernel_hints(["Convolution (NHWC, PF32) DWConv"], [ek(F32_MOPA)]) == {}
    assert operator_kernel_hints(["Convolution (NHWC, PF32)"], []) == {}
