"""Kernel evidence: what the ETDump, an XNNPACK log and the device say about SME2.

Three sources, of different strength:

* ``xnntrace``: XNNPACK built with logging (log level >= 4) prints
  ``Using gemm microkernel 'xnn_pf16_gemm_minmax_ukernel_32x32c2__neonsme2'.`` once per kernel
  config it initialises. A ``__neonsme2`` kernel there *proves* SME2 ran. Prebuilt wheels log
  nothing, so a log without such lines proves nothing either way.
* ETDump operator names: XNNPACK names KleidiAI operators with a packed datatype
  (``Fully Connected (NC, PF32)``); on an SME2 device those paths run SME2 kernels, so they
  *indicate* SME2 but cannot prove it.
* device hwcaps: a device without SME2 cannot have run SME2 kernels, whatever ran.

``sme2_verdict`` combines them and never claims more than the strongest source shows.

``kernels_frame`` gives the ``kernels.csv`` table (seed-compatible), one row per distinct kernel:

==============  ============================================================================
``name``        micro-kernel function name, e.g. ``xnn_pf32_gemm_minmax_ukernel_32x32__neonsme2``
``kind``        the word before "microkernel" in the log line: gemm, igemm, dwconv, vunary...
``isa``         text after the last ``__`` in the name (ISA plus variant, e.g. ``neonsme2``,
                ``neon_u16``, ``aarch64_neonfma_lane_ld128``); ``unknown`` without ``__``
``isa_family``  SME2, SME, SVE, NEON, x86, WASM, RISC-V, Hexagon, scalar or unknown
``sme2``        True iff ``isa_family`` is SME2 (``neonsme`` alone is SME1: False)
==============  ============================================================================
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pandas as pd

from pytest_sme2.analysis.categories import op_name

KERNEL_COLUMNS = ["name", "kind", "isa", "isa_family", "sme2"]

PROVEN = "proven"
INDICATED = "indicated"
ABSENT = "absent"
UNKNOWN = "unknown"

# Liberal about what precedes "Using" (logcat, "[xnnpack]", clog's "Info (XNNPACK):").
_KERNEL_LINE = re.compile(r"\bUsing[ \t]+([\w-]+)[ \t]+micro-?kernel[ \t]+['\"]([^'\"\s]+)['\"]")
_ARGS = re.compile(r"\(([^()]*)\)")
# KleidiAI packed datatypes: P-prefixed (PF32, PF16, PQS8) or QP8. QS8, QD8, QDU8... are not.
_PACKED_DTYPE = re.compile(r"^(?:P[A-Z]+\d+\w*|QP\d+\w*)$")
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


@dataclass(frozen=True)
class Kernel:
    """One micro-kernel XNNPACK reported selecting."""

    name: str
    kind: str
    isa: str
    sme2: bool


@dataclass(frozen=True)
class Evidence:
    """The SME2 verdict and what it rests on.

    ``sme2`` is ``proven`` (trace shows SME2 kernels), ``indicated`` (KleidiAI packed operators
    ran on a device that has, or may have, SME2), ``absent`` or ``unknown``; ``reason`` says how
    we know and names the source.
    """

    sme2: str
    reason: str
    kleidiai_ops: tuple[str, ...]
    kernels: tuple[Kernel, ...]


def is_kleidiai_op(name: str) -> bool:
    """True if the operator's datatype list holds a KleidiAI packed datatype."""
    args = _ARGS.search(name)
    if args is None:
        return False
    return any(_PACKED_DTYPE.match(token.strip()) for token in args.group(1).split(","))


def kleidiai_ops(names: Iterable[str]) -> list[str]:
    """Sorted distinct operator names (``#n`` stripped) that ran a KleidiAI packed path."""
    return sorted({op_name(name) for name in names if is_kleidiai_op(name)})


def isa_family(isa: str) -> str:
    """Coarse ISA family of a kernel's ISA suffix; ``neonsme`` (SME1) is not SME2.

    The first token naming an ISA decides: ``wasmsimd_x86_splat`` is WASM, not x86.
    """
    for token in isa.lower().split("_"):
        for regex, family in _ISA_FAMILY_RES:
            if regex.match(token):
                return family
    return "unknown"


def parse_xnntrace(text: str) -> list[Kernel]:
    """Kernels named by ``Using <kind> microkernel '<name>'`` lines, distinct, first-seen order."""
    seen: dict[tuple[str, str], Kernel] = {}
    for match in _KERNEL_LINE.finditer(text):
        kind, name = match.group(1), match.group(2)
        if (name, kind) not in seen:
            isa = _isa_of(name)
            seen[(name, kind)] = Kernel(name, kind, isa, isa_family(isa) == "SME2")
    return list(seen.values())


def sme2_verdict(
    *, kernels: Sequence[Kernel] | None, kleidiai: Sequence[str], device_sme2: bool | None
) -> Evidence:
    """Combine kernel trace, KleidiAI operator names and device hwcaps into one verdict.

    ``kernels`` is None when no log was captured. A log with no kernel lines counts the same
    (XNNPACK logging was off): silence is not evidence of absence.
    """
    packed = tuple(dict.fromkeys(kleidiai))
    traced = tuple(kernels or ())
    empty_log = kernels is not None and not traced
    sme2_kernels = [k.name for k in traced if k.sme2]
    n_packed = _count(len(packed), "KleidiAI packed operator")

    def verdict(sme2: str, reason: str) -> Evidence:
        if empty_log:
            reason += "; the xnntrace log had no kernel lines (XNNPACK logging off?)"
        return Evidence(sme2, reason, packed, traced)

    if sme2_kernels and device_sme2 is False:
        return verdict(
            UNKNOWN,
            f"xnntrace shows SME2 micro-kernels ({_few(sme2_kernels)}) but device hwcaps "
            "report no SME2: the trace and the device do not match",
        )
    if sme2_kernels:
        return verdict(
            PROVEN,
            f"xnntrace shows {_count(len(sme2_kernels), 'SME2 micro-kernel')} "
            f"({_few(sme2_kernels)})",
        )
    if device_sme2 is False:
        if packed:
            return verdict(
                ABSENT,
                f"device hwcaps report no SME2, so the {n_packed} that ran ({_few(packed)}) "
                "used non-SME2 kernels",
            )
        return verdict(ABSENT, "device hwcaps report no SME2")
    if traced:
        isas = sorted({k.isa for k in traced})
        reason = (
            f"xnntrace lists {_count(len(traced), 'micro-kernel')} and none is SME2 "
            f"(ISAs: {_few(isas)})"
        )
        if any(isa_family(isa) == "SME" for isa in isas):
            reason += "; neonsme is SME (SME1), not SME2"
        return verdict(ABSENT, reason)
    if packed:
        device = (
            "a device reporting SME2"
            if device_sme2
            else "a device whose SME2 support is unknown (no device hwcaps)"
        )
        return verdict(
            INDICATED,
            f"{n_packed} ran ({_few(packed)}) on {device}; "
            "no kernel trace to prove SME2 micro-kernels",
        )
    device = "device hwcaps report SME2" if device_sme2 else "device SME2 support is unknown"
    return verdict(
        UNKNOWN,
        f"no KleidiAI packed operators in the ETDump operator names and no kernel trace; {device}",
    )


def kernels_frame(kernels: Iterable[Kernel]) -> pd.DataFrame:
    """The ``kernels.csv`` table: one row per kernel, columns ``KERNEL_COLUMNS``."""
    rows = [(k.name, k.kind, k.isa, isa_family(k.isa), k.sme2) for k in kernels]
    return pd.DataFrame(rows, columns=KERNEL_COLUMNS).astype({"sme2": bool})


def _isa_of(name: str) -> str:
    _, sep, suffix = name.rpartition("__")
    return suffix if sep and suffix else "unknown"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _few(items: Sequence[str], limit: int = 3) -> str:
    """``a, b, c and 2 more``: enough to check, short enough for one sentence."""
    shown = ", ".join(items[:limit])
    return shown if len(items) <= limit else f"{shown} and {len(items) - limit} more"
