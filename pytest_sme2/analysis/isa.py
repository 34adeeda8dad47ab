"""Micro-kernel names read: the one place a kernel's name is parsed.

The ISA suffix of a name and its coarse family (SME2, SME, SVE, NEON, x86, ...): one rule
table, used by every kernel evidence source (XNNPACK's log, the QEMU trace, sampling) and the
verdict. Beside it what else a name carries: the GEMM datatype it serves
(:func:`gemm_datatype`), the seed kit's fields of an XNNPACK name (:func:`kernel_name_fields`),
its weight type (:func:`weight_type`), and what a phase's evidence ran, in a few words
(:func:`kernel_phrase`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from pytest_sme2.results.records import KernelEvidence

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


# -- what else a name carries ---------------------------------------------------------------

_XNN_GEMM = re.compile(r"^xnn_([a-z0-9]+)_(?:[a-z0-9]+_)*?i?gemm_")
_KAI_MATMUL = re.compile(r"^kai_(?:run|kernel)_i?matmul_clamp_([a-z0-9]+)_([a-z0-9]+)_")


def gemm_datatype(name: str) -> str | None:
    """The XNNPACK operator datatype (``PF32``, ``PF16``, ``PQS8``, ``QP8``, ``F32``...) a GEMM
    micro-kernel serves, or None (not a GEMM kernel, or a datatype not mapped here)."""
    if "pack" in name:
        return None                # weight and activation packing, not the GEMM
    if m := _XNN_GEMM.match(name):
        return m.group(1).upper()
    if m := _KAI_MATMUL.match(name):
        out, lhs = m.group(1), m.group(2)
        if lhs.startswith(("qai8dx", "qsi8d32")):
            return "QP8"           # dynamically quantised activations, f32 out
        if out == "qai8":
            return "PQS8"
        if out in ("f32", "f16") and lhs.startswith(out):
            return "P" + out.upper()
    return None


_KAI_PREFIX = re.compile(r"^kai_(?:run_|kernel_)?")
_KAI_SHAPE = re.compile(r"^\d+(?:vl)?x\d+(?:vl)?(?:x\d+)?$")
_ISA_WORDS = ("sme2", "sme", "sve2", "sve", "neon")


def _kai_fields(name: str) -> tuple[str, str, str, str, str]:
    """KleidiAI's ``kai_run_<op>[_<fused op>]_<dst>_<lhs>_<rhs>_<shape>_<isa>_<feature>``
    (``kai_run_matmul_clamp_f32_qai8dxp1vlx4_qsi8cxp4vlx4_1vlx4vl_sme2_mopa``: ``f32``,
    ``matmul``, ``clamp``, ``1vlx4vl``, ``sme2_mopa``) and its packers
    (``kai_run_lhs_imatmul_pack_x32p2vlx1_x32p_sme``: op ``lhs_imatmul_pack``)."""
    words = _KAI_PREFIX.sub("", name).split("_")
    isa_at = next((i for i, w in enumerate(words) if w in _ISA_WORDS), len(words))
    body, arch = words[:isa_at], "_".join(words[isa_at:])
    shape = body.pop() if body and _KAI_SHAPE.match(body[-1]) else ""
    if "pack" in body:      # the packed operand's source type last
        at = body.index("pack") + 1
        return (body[-1] if len(body) > at else ""), "_".join(body[:at]), "", shape, arch
    op = body[0] if body else ""
    variant = body[1] if len(body) > 2 and body[1] == "clamp" else ""
    rest = body[2 if variant else 1:]
    return (rest[0] if rest else ""), op, variant, shape, arch


def kernel_category(name: str) -> str:
    """The seed kit's ``category`` read from a kernel's name where no log line gives it:
    ``igemm``/``gemm`` for (indirect) matrix multiplies, ``pack`` for packing, else the
    ``xnn_`` name's op."""
    if "pack" in name.split("__")[0].split("_"):
        return "pack"
    op = kernel_name_fields(name)[1]
    return {"imatmul": "igemm", "matmul": "gemm"}.get(op, op)


def kernel_name_fields(name: str) -> tuple[str, str, str, str, str]:
    """``(dtype, xnn_op, variant, ukernel_shape, arch_chain)`` of a micro-kernel name: an
    XNNPACK one as the seed kit reads ``xnn_<dtype>_<op>[_<variant>]_ukernel[_<shape>]__
    <arch...>`` (``xnn_f32_igemm_minmax_ukernel_4x8__aarch64_neonfma`` gives ``f32, igemm,
    minmax, 4x8, aarch64_neonfma``; ``arch_chain`` is everything after the first ``__``), a
    KleidiAI ``kai_`` one by its own scheme (:func:`_kai_fields`); empty for the rest."""
    if name.startswith("kai_"):
        return _kai_fields(name)
    base, sep, arch = name.partition("__")
    if not name.startswith("xnn_"):
        return "", "", "", "", arch if sep else ""
    parts = base.split("_")
    dtype = parts[1] if len(parts) > 2 else ""
    op = parts[2] if len(parts) > 2 else ""
    variant = shape = ""
    if "ukernel" in parts:
        at = parts.index("ukernel")
        variant = parts[3] if at > 3 else ""
        shape = parts[at + 1] if at + 1 < len(parts) else ""
    return dtype, op, variant, shape, arch if sep else ""


# -- what a phase ran, in a few words ---------------------------------------------------------

# Weight types a KleidiAI kernel's name carries (``qsi4c32``: signed int4 weights, ...).
# XNNPACK's: ``qc4w``/``qb4w`` (per channel / blockwise int4), ``qc8w`` (per channel int8),
# ``qc2w`` (per channel int2: the 1.5.1 aarch64 wheel packs it, xnn_pack_qs8_qc2w_*).
WEIGHT_TYPES = (("qsi4", "int4"), ("qai4", "int4"), ("qsu4", "int4"), ("qsi8", "int8"),
                 ("qai8cx", "int8"), ("qc4w", "int4"), ("qb4w", "int4"), ("qc8w", "int8"),
                 ("qsi2", "int2"), ("qsu2", "int2"), ("qc2w", "int2"))


@dataclass(frozen=True)
class PhaseKernel:
    name: str
    family: str         # SME2, NEON, ... (isa_family)
    isa: str            # the name's ISA part: sme2_mopa, neon_i8mm
    how: str            # executed (a trace), sampled, logged (XNNPACK's selection log)


def _family(name: str, given: str = "") -> str:
    return given or isa_family(kernel_isa(name))


def phase_kernels(ev: KernelEvidence | None) -> list[PhaseKernel]:
    """The kernels a phase's evidence names, the strongest source first: executed (a kernel
    trace), else sampled, else the selection log; XNNPACK's packing and KleidiAI's
    ``kai_get_*`` helpers included as the evidence lists them."""
    if ev is None:
        return []
    if ev.executed_kernels:
        return [PhaseKernel(k.name, _family(k.name, k.isa_family), kernel_isa(k.name),
                            "executed") for k in ev.executed_kernels]
    if ev.sampled_kernels:
        return [PhaseKernel(k.name, _family(k.name, k.isa_family), kernel_isa(k.name),
                            "sampled") for k in ev.sampled_kernels]
    return [PhaseKernel(k.name, _family(k.name), kernel_isa(k.name), "logged")
            for k in ev.kernels]


def weight_type(name: str) -> str:
    """The weight type a kernel's name carries (``int4``, ``int8``), or ""."""
    low = name.lower()
    return next((w for tag, w in WEIGHT_TYPES if tag in low), "")


_ACCESSOR = re.compile(r"(^kai_get_|_get_(mr|nr|kr|sr|m_step|n_step)$)", re.IGNORECASE)


def is_accessor(name: str) -> bool:
    """A kernel's tile-size accessor (``…__neonsme2_get_mr``, ``kai_get_mr_…``), not a kernel:
    a trace lists it beside the kernel, and calling it proves nothing about the kernel's body."""
    return bool(_ACCESSOR.search(name))


def _compute(kernels: Iterable[PhaseKernel]) -> list[PhaseKernel]:
    """The compute kernels (matmul, conv, ...): KleidiAI's ``kai_run_*`` and XNNPACK's
    micro-kernels, not packing helpers nor the accessors of a kernel's tile size
    (``…__neonsme2_get_mr``, ``kai_get_mr_…``: a trace lists them beside the kernel), when any;
    else all of them."""
    ks = [k for k in kernels if k.family != "unknown"]
    runs = [k for k in ks if "pack" not in k.name.lower() and not is_accessor(k.name)]
    return runs or ks


def _variants(isa: str, family: str) -> list[str]:
    """The ISA part's tokens from the family's on, the bare family word dropped:
    ``neon_i8mm`` -> ``i8mm``, ``sme2_mopa`` -> ``mopa``, ``aarch64_neondot`` -> ``neondot``,
    ``neonsme2`` -> nothing."""
    tokens = isa.split("_")
    start = next((i for i, t in enumerate(tokens) if isa_family(t) == family), 0)
    return [t for t in tokens[start:] if t and not t.lower().endswith(family.lower())]


def kernel_phrase(ev: KernelEvidence | None) -> str | None:
    """What a phase ran, in a few words, from its evidence: ``NEON i8mm/dotprod int4
    kernels``, ``SME2 mopa int8 kernels``; None without kernels named."""
    ks = _compute(phase_kernels(ev))
    if not ks:
        return None
    families: dict[str, tuple[list[str], list[str]]] = {}
    for k in ks:
        variants, weights = families.setdefault(k.family, ([], []))
        for t in _variants(k.isa, k.family):
            if t not in variants:
                variants.append(t)
        w = weight_type(k.name)
        if w and w not in weights:
            weights.append(w)
    # SME2 first: it is what the report is about.
    order = sorted(families, key=lambda f: (f != "SME2", f != "SME", f))
    parts = []
    for fam in order:
        variants, weights = families[fam]
        parts.append(" ".join(x for x in (fam, "/".join(variants), "/".join(weights)) if x))
    return " and ".join(parts) + " kernels"
