"""The operator taxonomy: every name we have seen, the seed's mistakes, overrides, robustness."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_sme2.analysis import categories
from pytest_sme2.analysis.categories import (
    DEFAULT_RULES,
    KNOWN_CATEGORIES,
    NAMED_CATEGORIES,
    OTHER,
    CategoryRule,
    classify,
    is_framework_event,
    named_categories,
    op_name,
    with_rules,
)

CONV, GEMM, DATA, ELEM, POOL, NORM, ATTN = (
    "Convolution",
    "GEMM",
    "Data Movement",
    "Elementwise",
    "Pooling",
    "Normalization",
    "Attention",
)

XNNPACK_NAMES = [
    ("Convolution (NHWC, F32) IGEMM", CONV),
    ("Convolution (NHWC, F32) DWConv", CONV),
    ("Convolution (NHWC, F32) VMulCAddC", CONV),
    ("Convolution (NHWC, PQS8, QS8, QC8W)", CONV),
    ("Convolution (NHWC, QC8) IGEMM", CONV),
    ("Convolution (NHWC, PF32)", CONV),
    ("Deconvolution (NHWC, PQS8, QS8, QC8W)", CONV),
    ("Fully Connected (NC, F32) GEMM", GEMM),
    ("Fully Connected (NC, QS8, QC8W) GEMM", GEMM),
    ("Fully Connected (NC, QDU8, F32, QC8W) GEMM", GEMM),
    ("Fully Connected (NC, PF32)", GEMM),
    ("Fully Connected (NC, PF16)", GEMM),
    ("Fully Connected (NC, QP8, F32, QC8W)", GEMM),
    ("Fully Connected (NC, PQS8, QC8W)", GEMM),
    ("Dynamic Fully Connected (NC, PF32)", GEMM),
    ("Batch Matrix Multiply (NC, PF16)", GEMM),
    ("Batch Matrix Multiply (NC, F32)", GEMM),
    ("Transpose (ND, X32)", DATA),
    ("Static Reshape (NC)", DATA),
    ("Copy (NC, X32)", DATA),
    ("Convert (NC)", DATA),
    ("Convert (NC, F32, QDU8)", DATA),
    ("Convert (NC, F16, F32)", DATA),
    ("Constant Pad (ND, X32)", DATA),
    ("Static Slice (ND, X32)", DATA),
    ("Concatenate (ND, X32)", DATA),
    ("Even Split", DATA),
    ("Depth To Space (NHWC, X32)", DATA),
    ("Pack LH (X32)", DATA),
    ("Resize Bilinear (NHWC, F32)", DATA),
    ("Add (ND)", ELEM),
    ("Multiply (ND)", ELEM),
    ("Subtract (ND)", ELEM),
    ("Divide (ND)", ELEM),
    ("Copy Sign (ND)", ELEM),
    ("HardSwish (NC)", ELEM),
    ("Sigmoid (NC, F32)", ELEM),
    ("Clamp (NC, F32)", ELEM),
    ("Tanh", ELEM),
    ("TanH (NC)", ELEM),
    ("GELU", ELEM),
    ("ApproxGELU (NC)", ELEM),
    ("LeakyReLU (NC)", ELEM),
    ("Square Root", ELEM),
    ("Reciprocal Square Root (NC)", ELEM),
    ("Square (NC)", ELEM),
    ("Bankders Rounding (NC)", ELEM),
    ("Invalid Unary Op", ELEM),
    ("Mean (ND)", POOL),
    ("Average Pooling (NHWC, F32)", POOL),
    ("Max Pooling (NHWC, F32)", POOL),
    ("Global Average Pooling", POOL),
    ("Softmax (NC, F32)", NORM),
    ("Layer Norm", NORM),
    ("Sum (ND)", OTHER),
    ("Reduce Max (ND)", OTHER),
    ("Scaled Dot Product Attention", ATTN),
]

PORTABLE_NAMES = [
    ("native_call_convolution.out", CONV),
    ("native_call_linear.out", GEMM),
    ("native_call_addmm.out", GEMM),
    ("native_call_mm.out", GEMM),
    ("native_call_bmm.out", GEMM),
    ("native_call_permute_copy.out", DATA),
    ("native_call_view_copy.out", DATA),
    ("native_call__to_dim_order_copy.out", DATA),
    ("native_call__clone_dim_order.out", DATA),
    ("native_call_cat.out", DATA),
    ("native_call_quantize_per_tensor.out", DATA),
    ("native_call_dequantize_per_channel.out", DATA),
    ("native_call_dequantize_per_tensor.out", DATA),
    ("native_call_upsample_bilinear2d.vec_out", DATA),
    ("native_call_full_like.out", DATA),
    ("native_call_add.out", ELEM),
    ("native_call_mul.out", ELEM),
    ("native_call_hardsigmoid.out", ELEM),
    ("native_call_hardswish.out", ELEM),
    ("native_call_relu.out", ELEM),
    ("native_call_gelu.out", ELEM),
    ("native_call_where.self_out", ELEM),
    ("native_call_ge.Scalar_out", ELEM),
    ("native_call__adaptive_avg_pool2d.out", POOL),
    ("native_call_mean.out", POOL),
    ("native_call__softmax.out", NORM),
    ("native_call_native_layer_norm.out", NORM),
    ("native_call__native_batch_norm_legit_no_training.out", NORM),
    ("native_call_sum.IntList_out", OTHER),
    ("native_call_arange.start_out", OTHER),
]

ALL_NAMES = XNNPACK_NAMES + PORTABLE_NAMES
FRAMEWORK_EVENTS = [
    "Method::execute",
    "Method::init",
    "Program::load_method",
    "DELEGATE_CALL",
    "OPERATOR_CALL",
]


@pytest.mark.parametrize("suffix", ["", " #1", " #12"])
@pytest.mark.parametrize(("name", "expected"), ALL_NAMES)
def test_classify_known_names(name: str, expected: str, suffix: str) -> None:
    assert classify(name + suffix) == expected


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("Convolution (NHWC, F32) IGEMM #1", CONV),
        ("Convolution (NHWC, F32) DWConv #3", CONV),
        ("Fully Connected (NC, F32) GEMM #2", GEMM),
        ("Fully Connected (NC, PF32) #1", GEMM),
        ("Even Split #4", DATA),
        ("Invalid Unary Op #2", ELEM),
    ],
)
def test_classify_names_as_they_appear_in_etdump(name: str, expected: str) -> None:
    assert classify(name) == expected


@pytest.mark.parametrize(
    ("raw", "stripped"),
    [
        ("Convolution (NHWC, F32) IGEMM #1", "Convolution (NHWC, F32) IGEMM"),
        ("Add (ND) #123", "Add (ND)"),
        ("  Tanh #7  ", "Tanh"),
        ("native_call_add.out", "native_call_add.out"),
        ("Foo#bar", "Foo#bar"),
    ],
)
def test_op_name_strips_only_the_instance_suffix(raw: str, stripped: str) -> None:
    assert op_name(raw) == stripped


# The seed kit's substring categoriser got these wrong.


@pytest.mark.parametrize(
    "name", ["Convert (NC)", "Convert (NC, F32, QDU8)", "Convert (NC, F16, F32)"]
)
def test_seed_bug_convert_is_data_movement_not_convolution(name: str) -> None:
    assert classify(name) == DATA


@pytest.mark.parametrize(
    "name", ["Resize Bilinear (NHWC, F32)", "native_call_upsample_bilinear2d.vec_out"]
)
def test_seed_bug_bilinear_resize_is_not_gemm(name: str) -> None:
    assert classify(name) == DATA


def test_seed_bug_batch_matrix_multiply_is_gemm() -> None:
    # "matmul" never occurs in XNNPACK's name, so the seed filed it under Elementwise ("mul").
    assert classify("Batch Matrix Multiply (NC, F32)") == GEMM


def test_multiply_is_elementwise_not_batch_matrix_multiply() -> None:
    assert classify("Multiply (ND)") == ELEM


def test_seed_bug_copy_sign_is_elementwise_not_copy() -> None:
    assert classify("Copy Sign (ND)") == ELEM


def test_seed_bug_batch_norm_is_normalization_not_data_movement() -> None:
    assert classify("native_call__native_batch_norm_legit_no_training.out") == NORM


def test_seed_bug_hardswish_is_elementwise_not_other() -> None:
    # The seed's keyword list had no "swish": every HardSwish landed in Other.
    assert classify("HardSwish (NC)") == ELEM
    assert classify("Invalid Unary Op") == ELEM


@pytest.mark.parametrize(
    ("packed", "plain"),
    [
        ("Fully Connected (NC, PF32)", "Fully Connected (NC, F32) GEMM"),
        ("Fully Connected (NC, PF16)", "Fully Connected (NC, F16)"),
        ("Fully Connected (NC, QP8, F32, QC8W)", "Fully Connected (NC, QD8, F32, QC8W)"),
        ("Fully Connected (NC, PQS8, QC8W)", "Fully Connected (NC, QS8, QC8W) GEMM"),
        ("Batch Matrix Multiply (NC, PF16)", "Batch Matrix Multiply (NC, F16)"),
        ("Batch Matrix Multiply (NC, PF32)", "Batch Matrix Multiply (NC, F32)"),
        ("Convolution (NHWC, PQS8, QS8, QC8W)", "Convolution (NHWC, QS8)"),
        ("Convolution (NHWC, PF32)", "Convolution (NHWC, F32) IGEMM"),
        ("Deconvolution (NHWC, PQS8, QS8, QC8W)", "Deconvolution (NHWC, QS8)"),
        ("Convert (NC, F32, QP8)", "Convert (NC, F32, QD8)"),
    ],
)
def test_kleidiai_packed_twins_classify_like_plain(packed: str, plain: str) -> None:
    assert classify(packed) == classify(plain)
    assert classify(packed) != OTHER


@pytest.mark.parametrize("name", FRAMEWORK_EVENTS)
def test_framework_events_are_not_operators(name: str) -> None:
    assert is_framework_event(name) is True
    assert classify(name) == OTHER


@pytest.mark.parametrize(
    "name",
    ["Convolution (NHWC, F32) IGEMM #1", "native_call_add.out", "Method", "Add (ND)", ""],
)
def test_operators_are_not_framework_events(name: str) -> None:
    assert is_framework_event(name) is False


def test_user_rules_never_classify_framework_events() -> None:
    catch_all = with_rules([CategoryRule("Everything", r".*", "greedy user rule")])
    assert classify("Method::execute", catch_all) == OTHER
    assert classify("Add (ND)", catch_all) == "Everything"


def test_user_rules_take_precedence_over_defaults() -> None:
    rules = with_rules([CategoryRule("Layout", r"^Transpose\b", "split transposes out")])
    assert rules[0].category == "Layout"
    assert rules[1:] == DEFAULT_RULES
    assert classify("Transpose (ND, X32) #2", rules) == "Layout"
    assert classify("Copy (NC, X32)", rules) == DATA
    assert classify("Transpose (ND, X32) #2") == DATA  # the default table is untouched


def test_user_rules_add_a_category() -> None:
    rules = with_rules([CategoryRule("Reductions", r"^Sum\b", "sums")])
    assert classify("Sum (ND) #1", rules) == "Reductions"
    assert classify("Sum (ND) #1") == OTHER
    assert named_categories(rules) == NAMED_CATEGORIES + ("Reductions",)
    assert named_categories() == NAMED_CATEGORIES


@pytest.mark.parametrize(("name", "category"), [
    ("llama::custom_sdpa.out", ATTN),
    ("llama::sdpa_with_kv_cache.out", ATTN),
    ("llama::custom_quantized_sdpa.out", ATTN),
    ("llama::update_cache.out", DATA),
    ("llama::update_cache_with_indices.out", DATA),
    ("llama::fast_hadamard_transform.out", OTHER),
    ("llama::custom_sdpa_extra.out", OTHER),      # exact operator names only
])
def test_the_llm_custom_operators_have_a_home(name: str, category: str) -> None:
    # Custom SDPA is attention in one operator; its cache write is a copy, as index_put is in
    # plain attention (ExecuTorch's Llama without --use_sdpa_with_kv_cache).
    assert classify(name) == category


def test_custom_table_replaces_the_default() -> None:
    assert classify("Add (ND)", rules=()) == OTHER
    only_add = [CategoryRule("Sum", r"^Add\b", "adds")]
    assert classify("Add (ND)", rules=only_add) == "Sum"
    assert classify("Convolution (NHWC, F32) IGEMM", rules=only_add) == OTHER


def test_with_rules_rejects_non_rules() -> None:
    with pytest.raises(TypeError, match="CategoryRule"):
        with_rules([("GEMM", "^Foo", "tuple, not a rule")])  # type: ignore[list-item]


def test_rule_rejects_other_as_category() -> None:
    with pytest.raises(ValueError, match="computed, not matched"):
        CategoryRule(OTHER, r"^Foo", "Other is E2E minus the named categories")


def test_rule_rejects_invalid_regex_at_construction() -> None:
    with pytest.raises(ValueError, match=r"invalid regex '\^Foo\('"):
        CategoryRule("GEMM", r"^Foo(", "broken")


def test_rule_rejects_empty_category() -> None:
    with pytest.raises(ValueError, match="empty category"):
        CategoryRule("  ", r"^Foo", "nameless")


def test_classify_rejects_non_strings() -> None:
    with pytest.raises(TypeError, match="must be str"):
        classify(None)  # type: ignore[arg-type]


def test_named_categories_keep_the_seed_keys_in_seed_order_then_ours() -> None:
    assert NAMED_CATEGORIES == (CONV, GEMM, DATA, ELEM, POOL, NORM, ATTN)
    assert KNOWN_CATEGORIES == NAMED_CATEGORIES + (OTHER,)
    assert OTHER not in NAMED_CATEGORIES


def test_every_default_rule_names_a_named_category() -> None:
    assert {rule.category for rule in DEFAULT_RULES} == set(NAMED_CATEGORIES)


def test_rules_are_precompiled() -> None:
    assert all(rule.regex.pattern == rule.pattern for rule in DEFAULT_RULES)


def test_module_imports_only_stdlib() -> None:
    tree = ast.parse(Path(categories.__file__).read_text())
    modules = {
        (node.module if isinstance(node, ast.ImportFrom) else alias.name).split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    }
    assert modules - {"__future__"} <= set(sys.stdlib_module_names)


@given(st.text())
def test_classify_never_raises_and_returns_a_known_category(text: str) -> None:
    assert classify(text) in KNOWN_CATEGORIES


@given(
    st.sampled_from([name for name, _ in ALL_NAMES]),
    st.text(alphabet=" ,()NCHWDFXQPS0123456789", max_size=20),
)
def test_classify_is_total_on_mangled_real_names(name: str, tail: str) -> None:
    assert classify(name + tail) in KNOWN_CATEGORIES


@given(st.text().filter(lambda t: "#" not in t), st.integers(min_value=0, max_value=10**6))
def test_instance_suffix_never_changes_the_category(text: str, n: int) -> None:
    assert classify(f"{text} #{n}") == classify(text)
