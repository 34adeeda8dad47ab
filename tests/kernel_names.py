"""Real micro-kernel names, as XNNPACK and KleidiAI export them, that the analysis tests read
(tests/unit/analysis/): one spelling each, so a test of naming and a test of evidence speak of
the same kernels."""

from __future__ import annotations

# XNNPACK's FP16 GEMM on SME2 (packed LHS)
SME2_GEMM = "xnn_pf16_gemm_minmax_ukernel_32x32c2__neonsme2"
# KleidiAI's SME2 kernels, one per GEMM datatype: outer products (mopa), a GEMV (mla)
F32_MOPA = "kai_run_matmul_clamp_f32_f32p2vlx1_f32p2vlx1biasf32_sme2_mopa"
F32_GEMV = "kai_run_matmul_clamp_f32_f32_f32p2vlx1b_1x16vl_sme2_mla"
F16_MOPA = "kai_run_matmul_clamp_f16_f16p2vlx2_f16p2vlx2b_2vlx2vl_sme2_mopa"
QP8_DOT = "kai_run_matmul_clamp_f32_qai8dxp1vlx4_qsi8cxp4vlx4_1vlx4vl_sme2_mopa"
QS8_MOPA = "kai_run_matmul_clamp_qai8_qai8p2vlx4_qsi8cxpsb2vlx4_2vlx2vl_sme2_mopa"
F32_IMATMUL = "kai_run_imatmul_clamp_f32_f32p2vlx1_f32p2vlx1b_2vlx2vl_sme2_mopa"
