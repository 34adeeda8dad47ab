"""The thresholds the rules use, and the advice tables they quote (what to do about an
operator left outside the delegate, which data-movement families to name)."""

from __future__ import annotations

import re

from pytest_sme2.results import OperatorStats


DATA_MOVEMENT_PCT = 15.0     # Data Movement at least this share of E2E is worth a look
DATA_FAMILY_PCT = 5.0        # ... and so is one family of it above this (transposes...)
OVERHEAD_PCT = 10.0          # delegate + operator call + runtime time
SMALL_MODEL_MS = 1.0         # below this, fixed per-call costs bound what any kernel can gain
OTHER_OPS_PCT = 10.0         # operators no category rule matched
LOW_COMPUTE_SPEEDUP = 2.0    # Conv/GEMM speed-up below this in an SME2 comparison is low
COMPUTE_SHARE_PCT = 10.0     # ... when the category is at least this share of base E2E
THERMAL_RISE_C = 5.0
MAX_PATHS = 3


_PORTABLE_ADVICE: tuple[tuple[str, str, str], ...] = (
    # (operator regex, module path / op type regex or "", advice)
    (r"_to_dim_order_copy|_to_copy", r"hardsigmoid|scale_activation",
     "the Hardsigmoid decomposes into int64 casts the XNNPACK partitioner leaves in the "
     "portable runtime; write it as `clamp(x + 3, 0, 6) / 6` (with 3 and 6 as buffers so fp16 "
     "needs no casts either; see models/mobilenet_v3_small.py, export_friendly=True)"),
    (r"_to_dim_order_copy|_to_copy|_clone_dim_order|clone", "",
     "a dtype or memory-format copy between partitions: keep one dtype and one memory format "
     "(channels_last) across the graph so no copy is needed"),
    (r"adaptive_avg_pool2d", "",
     "XNNPACK delegates adaptive average pooling only to a 1x1 output; for a fixed input size "
     "write the pooling as `nn.AvgPool2d(kernel_size=k, stride=k)` with k = input / output, "
     "which it delegates"),
)




def portable_advice(op: OperatorStats) -> str:
    context = " ".join(op.module_paths + op.op_types).lower()
    for name_re, context_re, advice in _PORTABLE_ADVICE:
        if re.search(name_re, op.name) and (not context_re or re.search(context_re, context)):
            return advice
    types = ", ".join(op.op_types) or "this operator"
    return (f"check whether the XNNPACK partitioner supports {types}; if not, rewrite the "
            "module with supported operators or fuse it into its neighbour")


# Families of data movement, each with what usually removes it.
DATA_FAMILIES: tuple[tuple[str, str, str], ...] = (
    ("Transpose", r"transpose|permute|_t_copy",
     "look for layout changes (NCHW<->NHWC) around {where}: keep activations channels-last "
     "between delegated operators and avoid permutes in forward()"),
    ("Convert", r"^convert|quantize|choose_qparams",
     "dtype conversions at partition boundaries around {where}: keep the partition in one "
     "dtype (quantize the whole graph, or none of it)"),
    ("Copy", r"^copy|_copy|clone",
     "copies around {where}: a partition boundary or a memory-format change forces them"),
    ("Concatenate/Slice/Pad", r"concat|slice|split|pad|cat\b|stack|select|narrow",
     "concatenation, slicing and padding around {where}: fuse into the neighbouring "
     "convolution (padding) or preallocate (concatenation)"),
    ("Reshape", r"reshape|view|expand|squeeze|dims",
     "reshapes around {where}: usually free views; if they cost time they copy, which a "
     "different layout avoids"),
    ("Resize", r"resize|upsample|grid_sampler",
     "resampling at {where}: consider a smaller resize or doing it once upstream"),
)
