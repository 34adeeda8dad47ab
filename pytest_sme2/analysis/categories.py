"""Operator categories: the one taxonomy every report in this product uses.

An ETDump names operators in two families:

* XNNPACK delegate events: ``Convolution (NHWC, F32) IGEMM #1``, ``Fully Connected (NC, PF32)``,
  ``Transpose (ND, X32)``... the operator words, a parenthesised layout/datatype list, sometimes
  a micro-kernel form (IGEMM, DWConv, VMulCAddC) and a ``#n`` instance suffix that restarts in
  each delegate.
* portable (non-delegated) operators: ``native_call_<op>.<overload>``, e.g.
  ``native_call_convolution.out``, ``native_call_upsample_bilinear2d.vec_out``.

Every rule is a regex anchored on the whole operator word (XNNPACK words followed by ``(`` or
the end of the name, portable ops by ``.`` or the end), so KleidiAI's packed datatypes classify
like their plain twins; why, and what the seed kit misfiled: docs/outputs.md, "Categories".

Categories, in report order:

==================  ===========================================================================
Convolution         Convolution/Deconvolution in any datatype or kernel form; conv ops
GEMM                Fully Connected, Batch Matrix Multiply; linear, addmm, mm, bmm, matmul
Data Movement       layout and copies (Transpose, Reshape, Copy, Slice, Concatenate, Pad, Pack
                    LH...), dtype conversion (Convert, quantize, dequantize), resize/upsample
                    (gathers pixels, no reduction over channels) and constant fills
Elementwise         per-element ops and activations (HardSwish, Sigmoid, Clamp, GELU...),
                    comparisons, ``where``; ``Invalid Unary Op`` (XNNPACK's quantized HardSwish)
Pooling             average/max/global pooling and ``Mean`` (ExecuTorch's global average pool)
Normalization       Softmax, layer/batch/group/RMS norm: reductions plus arithmetic that SME2
                    does not speed up, large in transformers; the seed misfiled batch norm
Attention           fused attention: ExecuTorch's LLM custom SDPA (``llama::custom_sdpa`` and
                    its kin, outside the delegate) and XNNPACK's Scaled Dot Product Attention
Other               not a rule: reports compute it as E2E minus the named categories
==================  ===========================================================================

``classify`` returns Other for names no rule matches and for framework events (``Method::execute``,
``DELEGATE_CALL``...), which are containers, not operators: drop them with ``is_framework_event``
before summing, or they double count.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

CONVOLUTION = "Convolution"
GEMM = "GEMM"
DATA_MOVEMENT = "Data Movement"
ELEMENTWISE = "Elementwise"
POOLING = "Pooling"
NORMALIZATION = "Normalization"
ATTENTION = "Attention"
OTHER = "Other"

NAMED_CATEGORIES: tuple[str, ...] = (
    CONVOLUTION,
    GEMM,
    DATA_MOVEMENT,
    ELEMENTWISE,
    POOLING,
    NORMALIZATION,
    ATTENTION,
)
KNOWN_CATEGORIES: tuple[str, ...] = NAMED_CATEGORIES + (OTHER,)

_INSTANCE_SUFFIX = re.compile(r"\s*#\d+\s*$")
_FRAMEWORK = re.compile(r"^(?:(?:Method|Program)::\w+|[A-Z]+(?:_[A-Z]+)*_CALL)$")


@dataclass(frozen=True)
class CategoryRule:
    """One row of the taxonomy: names matching ``pattern`` belong to ``category``.

    ``pattern`` is searched case-insensitively in the name with its ``#n`` suffix removed; anchor
    it (``^``) on the operator word. It is compiled once, here, so a bad regex fails at
    construction rather than in the middle of a report.
    """

    category: str
    pattern: str
    description: str
    regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.category.strip():
            raise ValueError(f"category rule {self.pattern!r} has an empty category name")
        if self.category == OTHER:
            # Other is E2E minus the named categories; a rule feeding it would double count.
            raise ValueError(f"category rule {self.pattern!r}: {OTHER!r} is computed, not matched")
        try:
            compiled = re.compile(self.pattern, re.IGNORECASE)
        except re.error as exc:
            raise ValueError(
                f"category rule {self.category!r}: invalid regex {self.pattern!r}: {exc}"
            ) from None
        object.__setattr__(self, "regex", compiled)


def _xnn(*words: str) -> str:
    """XNNPACK operator words, followed by ``(``-arguments or the end of the name."""
    return r"^(?:%s)(?=\s*\(|\s*$)" % "|".join(words)


def _custom(namespace: str, *ops: str) -> str:
    """Operators of a library's own namespace (``llama::custom_sdpa.out``), exact op name."""
    return r"^%s::(?:%s)(?:\.|$)" % (namespace, "|".join(ops))


def _portable(*ops: str) -> str:
    """Portable ops as ``native_call_<op>.<overload>`` (or ``aten::<op>``), exact op name."""
    return r"^(?:native_call_|aten::|aten\.)(?:\w+::)?(?:%s)(?:\.|$)" % "|".join(ops)


# First match wins. Extra rules from users go in front (see ``with_rules``).
DEFAULT_RULES: tuple[CategoryRule, ...] = (
    CategoryRule(
        CONVOLUTION,
        _xnn(r"(?:De)?convolution"),
        "XNNPACK Convolution/Deconvolution, any datatype (plain or KleidiAI packed) and any "
        "micro-kernel form (IGEMM, DWConv, VMulCAddC, Subconv2D)",
    ),
    CategoryRule(
        CONVOLUTION,
        _portable(r"_?convolution", r"conv[123]d", r"conv_transpose[123]d"),
        "portable convolution ops",
    ),
    CategoryRule(
        GEMM,
        _xnn(r"(?:Dynamic )?Fully Connected", r"Batch Matrix Multiply"),
        "XNNPACK Fully Connected and Batch Matrix Multiply, plain or KleidiAI packed",
    ),
    CategoryRule(
        GEMM,
        _portable("linear", "addmm", "mm", "bmm", "baddbmm", "matmul", "_weight_int8pack_mm"),
        "portable matrix multiplies",
    ),
    CategoryRule(
        DATA_MOVEMENT,
        _xnn(
            r"(?:Static )?Transpose",
            r"(?:Static )?Reshape",
            r"Static Expand Dims",
            r"Fuse Dims",
            r"Split Dims",
            r"Copy",
            r"Convert",
            r"(?:Static )?Constant Pad",
            r"(?:Static )?Slice",
            r"Concatenate\d?",
            r"(?:Even )?Split",
            r"Depth To Space",
            r"Space To Depth",
            r"Channel Shuffle",
            r"Pack LH",
            r"(?:Static )?Resize Bilinear(?: 2D)?",
        ),
        "XNNPACK layout, copy, pad, slice, concat/split, LHS packing, dtype Convert and "
        "bilinear resize (a gather of neighbours, not a GEMM)",
    ),
    CategoryRule(
        DATA_MOVEMENT,
        _portable(
            r"permute(?:_copy)?",
            r"view(?:_copy)?",
            r"_unsafe_view",
            r"reshape",
            r"_to_dim_order_copy",
            r"_clone_dim_order",
            r"clone",
            r"_to_copy",
            r"copy_?",
            r"alias_copy",
            r"expand(?:_copy)?",
            r"(?:un)?squeeze(?:_copy)?",
            r"transpose(?:_copy)?",
            r"t_copy",
            r"slice(?:_copy)?",
            r"select(?:_copy)?",
            r"narrow_copy",
            r"split(?:_with_sizes)?(?:_copy)?",
            r"unbind_copy",
            r"cat",
            r"concat",
            r"stack",
            r"index_select",
            r"index",
            r"gather",
            r"repeat",
            r"tile",
            r"flip",
            r"roll",
            r"pixel_(?:un)?shuffle",
            r"constant_pad_nd",
            r"pad",
            r"(?:reflection|replication)_pad[123]d",
            r"as_strided_copy",
        ),
        "portable layout changes, copies, slicing, concatenation and padding",
    ),
    CategoryRule(
        DATA_MOVEMENT,
        _custom("llama", r"update_cache(?:_with_indices)?"),
        "ExecuTorch's LLM KV-cache write (llama::update_cache): a copy into the cache, as plain "
        "attention's index_put",
    ),
    CategoryRule(
        DATA_MOVEMENT,
        _portable(r"(?:de)?quantize_\w+", r"choose_qparams\w*"),
        "portable quantize/dequantize (and the qparams they need): a dtype conversion like "
        "XNNPACK's Convert",
    ),
    CategoryRule(
        DATA_MOVEMENT,
        _portable(r"_?upsample_\w+", r"grid_sampler_2d"),
        "portable resize/upsample: resampling, not a GEMM",
    ),
    CategoryRule(
        DATA_MOVEMENT,
        _portable(
            r"full(?:_like)?", r"zeros(?:_like)?", r"ones(?:_like)?", r"fill_?", r"scalar_tensor"
        ),
        "portable constant fills: memory writes, no arithmetic",
    ),
    CategoryRule(
        POOLING,
        _xnn(
            r"(?:Global )?(?:Average|Max|ArgMax|Sum) Pooling",
            r"Pixelwise Average Pooling",
            r"Unpooling",
            r"Mean",
        ),
        "XNNPACK pooling and Mean (ExecuTorch lowers global average pooling to Mean)",
    ),
    CategoryRule(
        POOLING,
        _portable(
            r"avg_pool[123]d",
            r"max_pool[123]d(?:_with_indices)?",
            r"_?adaptive_(?:avg|max)_pool[123]d",
            r"max_unpool[23]d",
            r"mean",
        ),
        "portable pooling and mean",
    ),
    CategoryRule(
        NORMALIZATION,
        _xnn(r"Softmax", r"Log Softmax", r"Layer Norm", r"RMS Norm", r"Normalize"),
        "XNNPACK softmax and normalisation",
    ),
    CategoryRule(
        NORMALIZATION,
        _portable(
            r"_?(?:log_)?softmax",
            r"native_layer_norm",
            r"layer_norm",
            r"native_batch_norm",
            r"_native_batch_norm_legit(?:_no_training|_functional)?",
            r"batch_norm",
            r"native_group_norm",
            r"group_norm",
            r"instance_norm",
            r"_?(?:fused_)?rms_norm",
        ),
        "portable softmax and normalisation",
    ),
    CategoryRule(
        ATTENTION,
        _custom("llama", r"custom_sdpa", r"sdpa_with_kv_cache", r"custom_quantized_sdpa"),
        "ExecuTorch's LLM custom SDPA (export_llama --use_sdpa_with_kv_cache): attention over "
        "the filled KV-cache positions in one operator, outside the delegate",
    ),
    CategoryRule(
        ATTENTION,
        _xnn(r"Scaled Dot Product Attention"),
        "XNNPACK's fused attention",
    ),
    CategoryRule(
        ELEMENTWISE,
        _xnn(
            r"Add",
            r"Subtract",
            r"Multiply",
            r"Divide",
            r"Minimum",
            r"Maximum",
            r"Copy Sign",
            r"Squared Difference",
            r"PReLU",
            r"Modulus",
            r"ATan2",
            r"Power",
            r"Bitwise (?:And|Or|Xor|Not)",
            r"Shift (?:Left|Right Logical|Right Arithmetic)",
            r"Binary Elementwise",
            r"Invalid Binary Op",
        ),
        "XNNPACK binary per-element ops",
    ),
    CategoryRule(
        ELEMENTWISE,
        _xnn(
            r"Abs",
            r"Bankd?ers Rounding",  # XNNPACK spells it "Bankders" in some versions
            r"Ceiling",
            r"Floor",
            r"Truncation",
            r"Clamp",
            r"Exp",
            r"Log",
            r"Negate",
            r"Sign",
            r"Square",
            r"(?:Reciprocal )?Square Root",
            r"Cube Root",
            r"Sine",
            r"Cosine",
            r"HardSwish",
            r"Sigmoid",
            r"Tanh",
            r"ELU",
            r"Leaky ?ReLU",
            r"(?:Approx)?GELU",
            r"Count Leading Zeros",
            r"Population Count",
            r"RoPE",
            r"Unary Elementwise",
            r"Invalid Unary Op",  # quantized HardSwish in the XNNPACK ExecuTorch 1.5 ships
        ),
        "XNNPACK unary per-element ops and activations",
    ),
    CategoryRule(
        ELEMENTWISE,
        _portable(
            r"add",
            r"r?sub",
            r"mul",
            r"div",
            r"floor_divide",
            r"remainder",
            r"fmod",
            r"pow",
            r"minimum",
            r"maximum",
            r"neg",
            r"abs",
            r"sign",
            r"exp(?:m1)?",
            r"log(?:1p|2|10)?",
            r"r?sqrt",
            r"reciprocal",
            r"floor",
            r"ceil",
            r"round",
            r"trunc",
            r"clamp",
            r"hardtanh",
            r"relu",
            r"leaky_relu",
            r"elu",
            r"gelu",
            r"silu",
            r"sigmoid",
            r"hardsigmoid",
            r"hardswish",
            r"tanh",
            r"erf",
            r"a?(?:sin|cos|tan)h?",
            r"atan2",
            r"_?prelu(?:_kernel)?",
            r"glu",
            r"softplus",
            r"(?:eq|ne|lt|le|gt|ge)",
            r"logical_(?:and|or|not|xor)",
            r"bitwise_(?:and|or|xor|not)",
            r"isnan",
            r"isinf",
            r"where",
            r"masked_fill",
        ),
        "portable per-element arithmetic, activations, comparisons and where",
    ),
)


def op_name(name: str) -> str:
    """The operator name without XNNPACK's per-delegate ``#n`` instance suffix."""
    return _INSTANCE_SUFFIX.sub("", name.strip())


def is_framework_event(name: str) -> bool:
    """True for runtime containers (``Method::execute``, ``DELEGATE_CALL``...), not operators.

    They enclose operator events, so adding them to any category would double count.
    """
    return _FRAMEWORK.match(op_name(name)) is not None


def classify(name: str, rules: Sequence[CategoryRule] | None = None) -> str:
    """The category of one event name: the first matching rule's, else ``OTHER``.

    Framework events are ``OTHER`` whatever the rules say. Results are cached: an ETDump repeats
    the same few hundred names thousands of times.
    """
    if not isinstance(name, str):
        raise TypeError(f"event name must be str, not {type(name).__name__}: {name!r}")
    if rules is None:
        return _classify_default(name)
    return _classify_with(name, tuple(rules))


def with_rules(
    extra: Iterable[CategoryRule], base: Sequence[CategoryRule] = DEFAULT_RULES
) -> tuple[CategoryRule, ...]:
    """A rule table with ``extra`` in front of ``base``, so the user's rules take precedence."""
    extra = tuple(extra)
    for rule in extra:
        if not isinstance(rule, CategoryRule):
            raise TypeError(f"expected CategoryRule, got {type(rule).__name__}: {rule!r}")
    return extra + tuple(base)


def named_categories(rules: Sequence[CategoryRule] | None = None) -> tuple[str, ...]:
    """Report order: ``NAMED_CATEGORIES``, then any category a custom table adds, first seen."""
    names = list(NAMED_CATEGORIES)
    for rule in rules if rules is not None else ():
        if rule.category not in names:
            names.append(rule.category)
    return tuple(names)


@lru_cache(maxsize=65536)
def _classify_default(name: str) -> str:
    # Separate cache so the default path does not hash the whole table on every call.
    return _classify_uncached(name, DEFAULT_RULES)


@lru_cache(maxsize=65536)
def _classify_with(name: str, rules: tuple[CategoryRule, ...]) -> str:
    return _classify_uncached(name, rules)


def _classify_uncached(name: str, rules: tuple[CategoryRule, ...]) -> str:
    key = op_name(name)
    if _FRAMEWORK.match(key):
        return OTHER
    for rule in rules:
        if rule.regex.search(key):
            return rule.category
    return OTHER

