"""An LLM's quantization schemes, one table (:data:`SCHEMES`): the dtype axis of a model that
is an LLM. Every list of the schemes reads it: ``parse_scheme``'s error, the
``--sme2-llm-schemes`` help, the export's dtype check, docs/reference/llm-schemes.md.

Pure data (no torch import): the matrix, ids and caches branch on them early. Each scheme names
its quantizer (:data:`QUANTIZERS`); the function that applies it is
:data:`pytest_sme2.programs.recipes.LLM_QUANTIZE`'s (torchao's
``Int8DynamicActivationIntxWeightConfig``, as ExecuTorch's ``export_llama -qmode 8da4w|8da8w``
does in its ``source_transformation/quantize.py``, or PT2E's ``XNNPACKQuantizer``).
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_sme2.errors import Sme2Error


TORCHAO = "torchao"
PT2E = "pt2e"
# How a scheme's weights are quantized: torchao's quantize_ with
# Int8DynamicActivationIntxWeightConfig (export_llama -qmode), or PT2E's XNNPACKQuantizer
# (export_llama --pt2e_quantize xnnpack_dynamic[_qc4]).
QUANTIZERS: dict[str, str] = {
    TORCHAO: "torchao quantize_ (export_llama -qmode)",
    PT2E: "PT2E XNNPACKQuantizer (export_llama --pt2e_quantize)",
}


@dataclass(frozen=True)
class Scheme:
    """One scheme: ``weight_bits`` None is float (no quantization); ``group_size`` None is one
    scale per output channel (torchao ``PerAxis(0)``), else ``PerGroup(group_size)``.
    Activations of quantized schemes are int8, quantized dynamically per token."""

    name: str
    weight_bits: int | None
    group_size: int | None
    # Largest accepted max |pte logits - reference logits| relative to max |reference logits|.
    # The reference is the eager model after torchao quantization (same weights, same rounding
    # of weights); the rest is how XNNPACK/KleidiAI round dynamic activations and accumulate.
    tolerance: float
    description: str
    short: str = ""             # a few words, as parse_scheme's error says it ("" for fp32)
    quantizer: str = TORCHAO    # how the weights are quantized: a key of QUANTIZERS
    by_name_only: bool = False  # not in an LLM's default dtype axis: asked for by name

    @property
    def quantized(self) -> bool:
        return self.weight_bits is not None

    @property
    def granularity(self) -> str:
        if not self.quantized:
            return "-"
        return "per channel" if self.group_size is None else f"group {self.group_size}"


SCHEMES: dict[str, Scheme] = {s.name: s for s in (
    Scheme("fp32", None, None, 1e-3, "float32 weights and activations"),
    Scheme("8da4w", 4, 32, 0.05,
           "int8 dynamic activations, int4 weights in groups of 32 (ExecuTorch's CI recipe: "
           "export_llama -qmode 8da4w --group_size 32)", "int4 weights in groups of 32"),
    Scheme("8da4w-pc", 4, None, 0.05,
           "int8 dynamic activations, int4 weights per output channel (export_llama -qmode "
           "8da4w --group_size 0)", "int4 per channel"),
    Scheme("8da8w", 8, None, 0.05,
           "int8 dynamic activations, int8 weights per output channel (export_llama -qmode "
           "8da8w --group_size 0)", "int8 per channel"),
    # torchao's per-channel int4 reaches XNNPACK as blockwise int4 with one block per row
    # (executorch's quant_params.py maps int4 group_size == input channels to qb4w); the PT2E
    # quantizer with weights in [-8, 7] is the path to XNNPACK's per-channel int4 (qc4w).
    Scheme("8da4w-pc-pt2e", 4, None, 0.05,
           "int8 dynamic activations, int4 weights per output channel through PT2E "
           "(export_llama --pt2e_quantize xnnpack_dynamic_qc4)",
           "int4 per channel through PT2E", quantizer=PT2E, by_name_only=True),
)}
LLM_SCHEMES: tuple[str, ...] = tuple(SCHEMES)
# What an LLM's dtype axis is when nothing is asked for: the four schemes of issue 30.
DEFAULT_SCHEMES: tuple[str, ...] = tuple(s.name for s in SCHEMES.values() if not s.by_name_only)


class SchemeError(Sme2Error):
    pass




def parse_scheme(text: str) -> Scheme:
    """``"8da4w"`` -> its :class:`Scheme`; case and surrounding blanks do not matter, ``_`` is
    read as ``-``. Anything else is one line naming the schemes."""
    key = text.strip().lower().replace("_", "-")
    if key in SCHEMES:
        return SCHEMES[key]
    raise SchemeError(f"unknown LLM scheme {text!r}; choose one of {', '.join(LLM_SCHEMES)} "
                      f"({schemes_in_short()})")


def schemes_in_short() -> str:
    """``8da4w: int4 weights in groups of 32, ...; all with int8 dynamic activations``."""
    said = ", ".join(f"{s.name}: {s.short}" for s in SCHEMES.values() if s.short)
    return f"{said}; all with int8 dynamic activations"


def parse_schemes(text: str) -> tuple[str, ...]:
    """A comma-separated list (``"fp32,8da8w"``), in order, once each; empty: the defaults."""
    names = [parse_scheme(p).name for p in text.split(",") if p.strip()]
    return tuple(dict.fromkeys(names)) or DEFAULT_SCHEMES
