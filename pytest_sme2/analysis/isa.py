"""ISA names of micro-kernels: the ISA suffix of a kernel's name and its coarse family (SME2,
SME, SVE, NEON, x86, ...). One rule table, used by every kernel evidence source (XNNPACK's log,
the QEMU trace, sampling) and the verdict."""

from __future__ import annotations

import re

# Matched against each "_"-separated token of the suffix, since the ISA may follow a tile or
# arch prefix ("4x4_sse", "aarch64_neonfma_ld128"). Ordered: "neonsme2" before "neonsme".
_ISA_FAMILIES: tuple[tuple[str, str], ...] = (
    (r"(?:neon)?sme2", "SME2"),
    (r"(?:neon)?sme", "SME"),
    (r"sve", "SVE"),
    (r"neon", "NEON"),
    (r"(?:sse|ssse3|avx|f16c|fma3|xop|amx)", "x86"),
    (r"wasm", "WASM"),
    (r"rvv", "RISC-V"),
    (r"hvx", "Hexagon"),
    (r"scalar", "scalar"),
)
_ISA_FAMILY_RES = tuple((re.compile(p), family) for p, family in _ISA_FAMILIES)



def isa_family(isa: str) -> str:
    """Coarse ISA family of a kernel's ISA suffix; ``neonsme`` (SME1) is not SME2.

    The first token naming an ISA decides: ``wasmsimd_x86_splat`` is WASM, not x86.
    """
    for token in isa.lower().split("_"):
        for regex, family in _ISA_FAMILY_RES:
            if regex.match(token):
                return family
    return "unknown"


def kernel_isa(name: str) -> str:
    """ISA part of a micro-kernel name: after ``__`` for XNNPACK (``neonsme2``), from the first
    ISA token on for KleidiAI (``kai_run_matmul_..._sme2_mopa`` -> ``sme2_mopa``)."""
    if "__" in name:
        return xnn_isa_suffix(name)
    tokens = name.split("_")
    for i, token in enumerate(tokens):
        if isa_family(token) != "unknown":
            return "_".join(tokens[i:])
    return "unknown"


def xnn_isa_suffix(name: str) -> str:
    _, sep, suffix = name.rpartition("__")
    return suffix if sep and suffix else "unknown"
