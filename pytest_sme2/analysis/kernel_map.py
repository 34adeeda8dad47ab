"""The kernel map: a micro-kernel's name placed in a category (the work it does) and an ISA
family (what it runs on), and the check of that map against the kernels a library carries.

Categories (:data:`KERNEL_CATEGORIES`), one rule table (:data:`RULES`), first match wins:

==============  =============================================================================
GEMM            matrix multiplication: KleidiAI ``kai_run_matmul_*``, XNNPACK ``*_gemm_*``,
                ``*_spmm_*`` (sparse)
Convolution     indirect GEMMs (``*_igemm_*``, KleidiAI ``imatmul``) and depthwise
                convolutions (XNNPACK ``*_dwconv_*``, KleidiAI ``kai_run_dwconv_*``: the F32
                depthwise kernels of KleidiAI 1.x)
Packing         LHS/RHS packing, quantize-and-pack included (``kai_run_lhs_quant_pack_*``),
                XNNPACK ``packw``/``pack_lh`` and its weight packers (``xnn_pack_*``)
Pooling         ``maxpool``, ``avgpool``, ``argmaxpool``
Normalization   reductions feeding softmax and norms (``raddstoreexpminusmax``, ``rmax``,
                ``rsum``, ``rdsum``)
Elementwise     XNNPACK's ``v*`` unary and binary kernels (``vexp``, ``vcopysign``, ``vsqrt``,
                ``vadd``...)
Data Movement   ``transpose``, ``copy``, ``fill``, ``pad``, ``zip``, conversions (``vcvt``)
==============  =============================================================================

The ISA family is :func:`pytest_sme2.analysis.isa.isa_family` of the name's ISA part: ``sme``
(SME1), ``sme2``, ``neon``... A kernel whose name names no ISA (KleidiAI's portable packing:
``kai_run_rhs_pack_kxn_qsi4c32p_qsu4c32s1s0``) or matches no category rule cannot be placed:
:func:`map_kernels` lists it with the reason, never drops it.

XNNPACK's own micro-kernels are hidden symbols in the prebuilt wheels; what they export of
them are tile-size accessors (``xnn_pf32_gemm_minmax_ukernel_1x32__neonsme2_get_mr``): each is
read as the kernel it describes (:func:`kernel_of`), so the map still sees that kernel.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pytest_sme2.analysis.addresses import kernel_key, kernel_kind, read_symbols
from pytest_sme2.analysis.isa import isa_family, kernel_isa, weight_type

GEMM, CONVOLUTION, PACKING = "GEMM", "Convolution", "Packing"
KERNEL_CATEGORIES: tuple[str, ...] = (GEMM, CONVOLUTION, PACKING, "Pooling", "Normalization",
                                      "Elementwise", "Data Movement")

# (pattern searched in the name before its ISA part, category): first match wins. Depthwise
# before "conv", packing before "matmul" (``lhs_imatmul_pack`` is packing), indirect GEMMs
# before "gemm".
RULES: tuple[tuple[str, str], ...] = (
    (r"dwconv", CONVOLUTION),
    (r"(?:^|_)(?:lhs|rhs)_(?:\w+_)?pack(?:_|$)|packw|pack_lh|^xnn_pack_|(?:^|_)x\d+_pack",
     PACKING),
    (r"(?:^|_)(?:igemm|imatmul)(?:_|$)|(?:^|_)conv", CONVOLUTION),
    (r"(?:^|_)(?:gemm|matmul|spmm|ppmm)(?:_|$)", GEMM),
    (r"(?:^|_)(?:argmax|max|avg|gavg|pavg)pool(?:_|$)", "Pooling"),
    (r"(?:^|_)(?:raddstoreexpminusmax|rmax|rmin|rminmax|rsum|rdsum|softmax)(?:_|$)",
     "Normalization"),
    (r"(?:^|_)(?:transposec?|copy|fill|pad|zip|unpool|vcvt|lut\d*)(?:_|$)", "Data Movement"),
    (r"(?:^|_)v[a-z]+c?(?:_|$)", "Elementwise"),
)
_RULES = tuple((re.compile(p), category) for p, category in RULES)
_ACCESSOR = re.compile(r"_get_(?:mr|nr|kr|sr|m_step|n_step)$")
NO_ISA = "its name names no ISA"
NO_CATEGORY = "no category rule matches its name"


@dataclass(frozen=True)
class PlacedKernel:
    """A kernel as the map places it: ``category`` ("" when no rule matches) and
    ``isa_family`` ("unknown" when its name names no ISA), its ISA part and weight type."""

    name: str
    category: str
    isa_family: str
    isa: str
    weights: str = ""

    @property
    def placed(self) -> bool:
        return bool(self.category) and self.isa_family != "unknown"

    @property
    def why_not(self) -> str:
        """Why the map cannot place it ("" when it can)."""
        return "; ".join(why for why, missing in ((NO_CATEGORY, not self.category),
                                                  (NO_ISA, self.isa_family == "unknown"))
                         if missing)


def kernel_of(name: str) -> str:
    """The kernel a symbol stands for: KleidiAI's ``kai_kernel_X`` is the body of
    ``kai_run_X``; an XNNPACK tile-size accessor (``..._get_mr``) describes its kernel."""
    return _ACCESSOR.sub("", kernel_key(name))


def place(name: str) -> PlacedKernel:
    """The category and ISA family of one kernel name."""
    isa = kernel_isa(name)
    head = name[:-len(isa)] if isa != "unknown" and name.endswith(isa) else name
    category = next((c for regex, c in _RULES if regex.search(head.lower())), "")
    return PlacedKernel(name, category, isa_family(isa), isa, weight_type(name))


@dataclass(frozen=True)
class KernelMap:
    """Every kernel of a list placed, or listed with the reason it cannot be."""

    placed: tuple[PlacedKernel, ...]
    unplaced: tuple[PlacedKernel, ...]

    def families(self) -> dict[tuple[str, str, str, str], list[str]]:
        """The placed kernels by family: (category, ISA family, variant, weights) -> names;
        the variant is the ISA part without its unroll and tile words (``sme2_mopa``,
        ``neon_i8mm``, ``neonsme2``, ``scalar``)."""
        out: dict[tuple[str, str, str, str], list[str]] = {}
        for k in self.placed:
            out.setdefault((k.category, k.isa_family, variant(k.isa), k.weights),
                           []).append(k.name)
        return dict(sorted(out.items()))


# The words of an ISA part that name how the arithmetic is done; the rest (u8, ld64, poly, 3)
# are unrolls and tiles of one variant.
_VARIANT_WORDS = frozenset({"mopa", "mla", "dot", "sdot", "dotprod", "i8mm", "mlal", "fma"})


def variant(isa: str) -> str:
    """``sme2_mopa`` -> ``sme2_mopa``, ``neon_u12`` -> ``neon``, ``neonv8_mlal`` ->
    ``neonv8_mlal``, ``scalar_rational_3_2_div_u4`` -> ``scalar``."""
    first, *rest = isa.split("_")
    return "_".join([first, *(t for t in rest if t in _VARIANT_WORDS)])


def map_kernels(names: Iterable[str]) -> KernelMap:
    """Each distinct kernel (:func:`kernel_of`) placed; the ones the map cannot place listed
    apart, in name order."""
    kernels = [place(n) for n in sorted({kernel_of(n) for n in names})]
    return KernelMap(tuple(k for k in kernels if k.placed),
                     tuple(k for k in kernels if not k.placed))


# XNNPACK's weight packers (``xnn_pack_qs8_qc2w_weights_and_biases``): not micro-kernels
# (they run once, at load, and a kernel trace counts them as glue), but what tells that a
# library packs a weight type (int2) whose GEMM kernels it hides.
_WEIGHT_PACKER = re.compile(r"^xnn_pack_\w+$")


def library_kernels(path: Path, weight_packers: bool = False) -> list[str]:
    """The micro-kernels an ELF library's symbol tables name (KleidiAI's ``kai_run_*`` and
    ``kai_kernel_*``, ``*ukernel*`` functions and their accessors), each once
    (:func:`kernel_of`), sorted; with ``weight_packers``, XNNPACK's ``xnn_pack_*`` too."""
    return sorted({kernel_of(name) for _, _, name in read_symbols(Path(path)).functions
                   if kernel_kind(name) is not None
                   or (weight_packers and _WEIGHT_PACKER.match(name))})
