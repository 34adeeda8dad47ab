"""The kernel map: each kernel family the aarch64 ExecuTorch wheel carries (names as its
symbol tables give them) placed in a category and an ISA family; a name the map cannot place is
listed with the reason, never dropped. The wheel itself: tests/integration/test_wheel_kernels.py."""

from __future__ import annotations

import pytest

from pytest_sme2.analysis.kernel_map import (NO_CATEGORY, NO_ISA, kernel_of, map_kernels, place,
                                             variant)

KAI = "kai_run_matmul_clamp_"


@pytest.mark.parametrize("name,category,family,weights", [
    # SME1 GEMM and packing: what a device with SME but no SME2 runs
    (KAI + "f32_f32p2vlx1_f32p2vlx1b_2vlx2vl_sme_mopa", "GEMM", "SME", ""),
    (KAI + "f32_f32_f32p2vlx1b_1x8vl_sme_mla", "GEMM", "SME", ""),
    (KAI + "f32_qai8dxp1x4_qsi8cxp4vlx4_1x4vl_sme_dot", "GEMM", "SME", "int8"),
    (KAI + "f32_qai8dxp1vlx4_qsi4cxp4vlx4_1vlx4vl_sme_mopa", "GEMM", "SME", "int4"),
    ("kai_run_lhs_pack_f32p2vlx1_f32_sme", "Packing", "SME", ""),
    ("kai_run_rhs_pack_nxk_f32p2vlx1biasf32_f32_f32_sme", "Packing", "SME", ""),
    ("kai_run_lhs_imatmul_pack_x32p2vlx1_x32p_sme", "Packing", "SME", ""),
    ("kai_run_rhs_imatmul_pack_kxn_qsi8cxp2vlx4sb_qs8cx_f32_i32_sme", "Packing", "SME", "int8"),
    ("xnn_pack_kai_pf32_conv_goki_w_sme", "Packing", "SME", ""),
    # SME2 mopa, dot, mla
    (KAI + "f32_f32p2vlx1_f32p2vlx1biasf32_sme2_mopa", "GEMM", "SME2", ""),
    (KAI + "f16_f16_f16p2vlx2b_1x16vl_sme2_dot", "GEMM", "SME2", ""),
    (KAI + "f32_f32_f32p2vlx1b_1x16vl_sme2_mla", "GEMM", "SME2", ""),
    (KAI + "f32_qai8dxp1x4_qsi4cxp4vlx4_1x4vl_sme2_sdot", "GEMM", "SME2", "int4"),
    ("xnn_pf32_gemm_minmax_ukernel_1x32__neonsme2", "GEMM", "SME2", ""),
    ("xnn_pqs8_qc8w_igemm_minmax_fp32_ukernel_32x32c4__neonsme2", "Convolution", "SME2", "int8"),
    ("xnn_pf16_f16_igemm_minmax_fp16_ukernel_32x32c2__neonsme", "Convolution", "SME", ""),
    # the F32 depthwise convolution (KleidiAI 1.x; not exported by the 1.5.1 wheel)
    ("kai_run_dwconv_clamp_f32_f32_f32p1vlx1b_3x3_s1_4xc_sme2_mla", "Convolution", "SME2", ""),
    ("xnn_f32_dwconv_minmax_ukernel_25p8c__aarch64_neonfma", "Convolution", "NEON", ""),
    # NEON int4 and the rest of XNNPACK's exported kernels
    (KAI + "f32_qai8dxp4x8_qsi4c32p4x8_16x4x32_neon_i8mm", "GEMM", "NEON", "int4"),
    ("xnn_f32_spmm_minmax_ukernel_8x1__scalar", "GEMM", "scalar", ""),
    ("xnn_f32_vexp_ukernel__neon_rational_3_2_div_u12", "Elementwise", "NEON", ""),
    ("xnn_f32_vcopysignc_ukernel__scalar_u8", "Elementwise", "scalar", ""),
    ("xnn_f32_maxpool_minmax_ukernel_9p__scalar_u1", "Pooling", "scalar", ""),
    ("xnn_f32_raddstoreexpminusmax_ukernel__neon_rr2_p5_u16", "Normalization", "NEON", ""),
    ("xnn_x32_transposec_ukernel__4x4_aarch64_neon_tbl128", "Data Movement", "NEON", ""),
])
def test_each_kernel_family_of_the_wheel_has_a_category_and_an_isa_family(name, category,
                                                                          family, weights):
    k = place(name)
    assert (k.category, k.isa_family, k.weights) == (category, family, weights)
    assert k.placed and k.why_not == ""


def test_a_kernel_the_map_cannot_place_is_listed_with_the_reason():
    names = ["kai_run_rhs_pack_kxn_qsi4c32p_qsu4c32s1s0",          # portable: no ISA
             "xnn_pack_qs8_qc2w_weights_and_biases",               # int2 weights, no ISA
             "xnn_f32_frobnicate_ukernel__neon_u4",                 # no category rule
             KAI + "f32_f32_f32p2vlx1b_1x8vl_sme_mla"]
    m = map_kernels(names + names)                                 # each once
    assert [k.name for k in m.placed] == [KAI + "f32_f32_f32p2vlx1b_1x8vl_sme_mla"]
    assert {k.name: k.why_not for k in m.unplaced} == {
        "kai_run_rhs_pack_kxn_qsi4c32p_qsu4c32s1s0": NO_ISA,
        "xnn_pack_qs8_qc2w_weights_and_biases": NO_ISA,
        "xnn_f32_frobnicate_ukernel__neon_u4": NO_CATEGORY}
    assert place("xnn_pack_qs8_qc2w_weights_and_biases").weights == "int2"


def test_a_kernel_body_and_an_accessor_stand_for_their_kernel():
    assert kernel_of("kai_kernel_matmul_clamp_f32_f32_f32p2vlx1b_1x8vl_sme_mla") == \
        KAI + "f32_f32_f32p2vlx1b_1x8vl_sme_mla"
    assert kernel_of("xnn_pf32_gemm_minmax_ukernel_1x32__neonsme2_get_nr") == \
        "xnn_pf32_gemm_minmax_ukernel_1x32__neonsme2"
    m = map_kernels(["xnn_pf32_gemm_minmax_ukernel_1x32__neonsme2_get_mr",
                     "xnn_pf32_gemm_minmax_ukernel_1x32__neonsme2_get_nr"])
    assert [k.name for k in m.placed] == ["xnn_pf32_gemm_minmax_ukernel_1x32__neonsme2"]


def test_families_group_unrolls_of_one_variant():
    assert variant("sme2_mopa") == "sme2_mopa" and variant("neon_u12") == "neon"
    assert variant("neonv8_mlal") == "neonv8_mlal"
    assert variant("scalar_rational_3_2_div_u4") == "scalar"
    m = map_kernels(["xnn_f32_vcopysign_ukernel__neon_u4", "xnn_f32_vcopysign_ukernel__neon_u8",
                     KAI + "f32_f32p2vlx1_f32p2vlx1b_2vlx2vl_sme_mopa"])
    assert m.families() == {
        ("Elementwise", "NEON", "neon", ""): ["xnn_f32_vcopysign_ukernel__neon_u4",
                                              "xnn_f32_vcopysign_ukernel__neon_u8"],
        ("GEMM", "SME", "sme_mopa", ""): [KAI + "f32_f32p2vlx1_f32p2vlx1b_2vlx2vl_sme_mopa"]}
