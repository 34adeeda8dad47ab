"""Kernel names read (analysis/isa.py): the ISA part, the GEMM datatype a kernel serves, and
what a phase's evidence ran, in a few words."""

from __future__ import annotations

import pytest

from pytest_sme2.analysis.isa import gemm_datatype, kernel_isa, kernel_phrase, phase_kernels
from pytest_sme2.results import load_results
from pytest_sme2.results.records import KernelEvidence, SampledKernel, TracedKernel
from tests.fakes.results_docs import llm_doc
from tests.kernel_names import (F16_MOPA, F32_GEMV, F32_IMATMUL, F32_MOPA, QP8_DOT, QS8_MOPA,
                                SME2_GEMM)


# --- kernel_isa -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "isa"),
    [
        ("kai_run_matmul_clamp_f32_f32p2vlx1_f32p2vlx1biasf32_sme2_mopa", "sme2_mopa"),
        ("kai_run_matmul_clamp_f32_f32_f32p2vlx1b_1x8vl_sme_mla", "sme_mla"),
        ("kai_run_matmul_clamp_f32_qai8dxp4x8_qsi8cxp4x8_16x4_neon_dotprod", "neon_dotprod"),
        ("kai_run_rhs_pack_nxk_f32p2vlx1biasf32_f32_f32_sme", "sme"),
        (SME2_GEMM, "neonsme2"),
        ("xnn_x32_packw_gemm_goi_ukernel", "unknown"),
    ],
)
def test_kernel_isa(name: str, isa: str) -> None:
    assert kernel_isa(name) == isa



# --- gemm_datatype ----------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("name", "dtype"),
    [
        (F32_MOPA, "PF32"),
        (F32_GEMV, "PF32"),
        (F32_IMATMUL, "PF32"),
        (F16_MOPA, "PF16"),
        (QP8_DOT, "QP8"),
        ("kai_run_matmul_clamp_f32_qsi8d32p1vlx4_qai4c32p4vlx4_1vlx4vl_sme2_mopa", "QP8"),
        (QS8_MOPA, "PQS8"),
        ("kai_run_rhs_pack_nxk_f32p2vlx1biasf32_f32_f32_sme", None),
        ("kai_run_lhs_imatmul_pack_x32p2vlx1_x32p_sme", None),
        ("xnn_pf32_gemm_minmax_ukernel_1x32__neonsme2", "PF32"),
        ("xnn_qd8_f32_qc8w_gemm_minmax_ukernel_4x16c4__neondot", "QD8"),
        ("xnn_f32_igemm_minmax_ukernel_4x8__aarch64_neonfma_ld128", "F32"),
        ("xnn_x32_packw_gemm_goi_ukernel_x16__neon_ld4lane", None),
        ("xnn_f32_dwconv_minmax_ukernel_25p8c__neon_acc2", None),
    ],
)
def test_gemm_datatype(name: str, dtype: str | None) -> None:
    assert gemm_datatype(name) == dtype



# --- kernel_phrase: what a phase ran --------------------------------------------------------

def test_kernel_phrase_names_family_variants_and_weights():
    b = load_results(llm_doc()).benchmarks
    int4, int8 = b[1].generation, b[2].generation
    assert kernel_phrase(int4.prefill.kernel_evidence) == "NEON i8mm/dotprod int4 kernels"
    assert kernel_phrase(int4.decode.kernel_evidence) == "NEON dotprod int4 kernels"
    assert kernel_phrase(int8.prefill.kernel_evidence) == "SME2 mopa int8 kernels"
    assert kernel_phrase(int8.decode.kernel_evidence) == "SME2 dot int8 kernels"
    assert kernel_phrase(None) is None


def test_kernel_phrase_of_sampled_xnnpack_kernels():
    ev = KernelEvidence(sme2="indicated", samples_total=100, sampled_kernels=[
        SampledKernel("xnn_qp8_f32_qc4w_gemm_minmax_ukernel_16x64c4__neonsme2", "SME2",
                      "xnnpack", "xnnpack", 60, 0.6),
        SampledKernel("xnn_qd8_f32_qc8w_gemm_minmax_ukernel_1x16c4__aarch64_neondot_ld128",
                      "NEON", "xnnpack", "xnnpack", 30, 0.3),
        SampledKernel("xnn_x32_packw_gemm_goi_ukernel_x16__neon_ld4lane_u4", "NEON",
                      "xnnpack", "xnnpack", 10, 0.1)])
    assert kernel_phrase(ev) == "SME2 int4 and NEON neondot/ld128 int8 kernels"
    assert [k.how for k in phase_kernels(ev)] == ["sampled"] * 3


def test_kleidiais_accessors_are_not_kernels_of_the_phrase():
    """Found on QEMU: a trace lists XNNPACK's ``…__neonsme2_get_mr``/``_get_nr`` (and
    KleidiAI's ``kai_get_mr_…``) beside the kernel they describe, and the phrase read "SME2
    mopa/dot/get/mr/nr int8 kernels"."""
    name = "kai_run_matmul_clamp_f32_qai8dxp1vlx4_qsi8cxp4vlx4_1vlx4vl_sme2_mopa"
    ev = KernelEvidence(sme2="proven", executed_kernels=[
        TracedKernel(name, "SME2", "kleidiai"),
        TracedKernel(name.replace("kai_run_", "kai_get_mr_"), "SME2", "kleidiai"),
        TracedKernel(name.replace("kai_run_", "kai_get_nr_"), "SME2", "kleidiai"),
        TracedKernel("xnn_qp8_f32_qc8w_gemm_minmax_ukernel_16x64c4__neonsme2_get_mr", "SME2",
                     "xnnpack"),
        TracedKernel("xnn_qp8_f32_qc8w_gemm_minmax_ukernel_16x64c4__neonsme2_get_nr", "SME2",
                     "xnnpack")])
    assert kernel_phrase(ev) == "SME2 mopa int8 kernels"
