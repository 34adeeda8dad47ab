"""Kernel evidence: what an execution trace, the ETDump, an XNNPACK log and the device say
about SME2.

Four sources, of different strength:

* ``executed``: the micro-kernels a traced process executed (QEMU's translated-block log and
  the libraries' symbols, :mod:`pytest_sme2.analysis.kernel_trace`). The strongest: an executed
  SME2 kernel *proves* SME2 ran, and a trace with no SME code at all *proves* it did not.
* ``xnntrace``: XNNPACK built with logging (log level >= 4) prints
  ``Using gemm microkernel 'xnn_pf16_gemm_minmax_ukernel_32x32c2__neonsme2'.`` once per kernel
  config it initialises. A ``__neonsme2`` kernel there *proves* SME2 ran. Prebuilt wheels log
  nothing, so a log without such lines proves nothing either way.
* ETDump operator names: XNNPACK names KleidiAI operators with a packed datatype
  (``Fully Connected (NC, PF32)``). They mean KleidiAI, not SME2: the same names appear when
  KleidiAI runs SME1 kernels. Only on a device reporting SME2 do they *indicate* SME2.
* device hwcaps: a device without SME2 cannot have run SME2 kernels, whatever ran.

``sme2_verdict`` combines them into the :class:`~pytest_sme2.results.records.KernelEvidence`
results.json stores, and never claims more than the strongest source shows. Beside the SME2
verdict it gives the SME (SME1) level's, from the same sources: which SME1 kernels ran on a
device with SME but no SME2 (``SME: proven (SME1 kernels: ...)`` next to ``SME2: absent``).

An SME2 kernel that a process whose hwcaps hide SME2 executed, was sampled in or logged as
selected is a dispatch bug (:class:`DispatchBugError`): the kernel was chosen without asking for
SME2, and real silicon without SME2 faults on it. Under QEMU, which runs the hidden instructions
anyway, and on a phone (sampling), it is a finding, never a verdict.
``operator_kernel_hints`` pairs GEMM operators with the executed kernels of their datatype.

``kernels_frame`` gives our columns of the ``kernels.csv`` table, one row per distinct kernel
(``pytest_sme2.measure.artifacts.csv`` puts the seed kit's columns, from
:func:`pytest_sme2.analysis.isa.kernel_name_fields` and :func:`xnntrace_counts`, in front of them;
docs/reference/csv-files.md):

==============  ============================================================================
``name``        micro-kernel function name, e.g. ``xnn_pf32_gemm_minmax_ukernel_32x32__neonsme2``
                (the file calls it ``kernel_name``, the kit's name for it)
``kind``        the word before "microkernel" in the log line: gemm, igemm, dwconv, vunary...
``isa``         text after the last ``__`` in the name (ISA plus variant, e.g. ``neonsme2``,
                ``neon_u16``, ``aarch64_neonfma_lane_ld128``); ``unknown`` without ``__``
``isa_family``  SME2, SME, SVE, NEON, x86, WASM, RISC-V, Hexagon, scalar or unknown
``sme2``        True iff ``isa_family`` is SME2 (``neonsme`` alone is SME1: False)
==============  ============================================================================
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

import pandas as pd

from pytest_sme2.analysis.categories import op_name
from pytest_sme2.analysis.isa import gemm_datatype, is_accessor, isa_family, xnn_isa_suffix
from pytest_sme2.errors import Sme2Error
from pytest_sme2.results.records import KernelEvidence, LoggedKernel, TracedKernel

if TYPE_CHECKING:
    from pytest_sme2.analysis.kernel_sample import KernelSample
    from pytest_sme2.analysis.kernel_trace import KernelTrace

KERNEL_COLUMNS = ["name", "kind", "isa", "isa_family", "sme2"]

PROVEN = "proven"
INDICATED = "indicated"
ABSENT = "absent"
UNKNOWN = "unknown"
SME2_VERDICTS = (PROVEN, INDICATED, ABSENT, UNKNOWN)   # strongest claim first

# Liberal about what precedes "Using" (logcat, "[xnnpack]", clog's "Info (XNNPACK):").
_KERNEL_LINE = re.compile(r"\bUsing[ \t]+([\w-]+)[ \t]+micro-?kernel[ \t]+['\"]([^'\"\s]+)['\"]")
_ARGS = re.compile(r"\(([^()]*)\)")
# KleidiAI packed datatypes: P-prefixed (PF32, PF16, PQS8) or QP8. QS8, QD8, QDU8... are not.
_PACKED_DTYPE = re.compile(r"^(?:P[A-Z]+\d+\w*|QP\d+\w*)$")


def is_kleidiai_op(name: str) -> bool:
    """True if the operator's datatype list holds a KleidiAI packed datatype."""
    args = _ARGS.search(name)
    if args is None:
        return False
    return any(_PACKED_DTYPE.match(token.strip()) for token in args.group(1).split(","))


def kleidiai_ops(names: Iterable[str]) -> list[str]:
    """Sorted distinct operator names (``#n`` stripped) that ran a KleidiAI packed path."""
    return sorted({op_name(name) for name in names if is_kleidiai_op(name)})


class DispatchBugError(Sme2Error):
    """An SME2 micro-kernel ran (or was selected) in a process whose hwcaps hide SME2: the
    benchmark fails with one line naming the kernel."""


def dispatch_bug(*, kernels: Sequence[LoggedKernel], device_sme2: bool | None,
                 executed: KernelTrace | None = None,
                 sampled: KernelSample | None = None) -> str | None:
    """The one line saying which SME2 kernel a process whose hwcaps hide SME2 ran (traced or
    sampled) or selected (XNNPACK's log), or None: no SME2 kernel, or the process may have
    SME2."""
    if device_sme2 is not False:
        return None
    seen = (("executed (kernel trace)",
             [k.name for k in (executed.executed if executed is not None else ())
              if k.isa_family == "SME2"]),
            ("sampled running",
             [k.name for k in (sampled.sampled if sampled is not None else ())
              if k.isa_family == "SME2"]),
            ("selected (XNNPACK's log)", [k.name for k in kernels if k.sme2]))
    for how, names in seen:
        if names:
            others = f" (and {_count(len(names) - 1, 'more SME2 kernel')})" \
                if len(names) > 1 else ""
            return (f"dispatch bug: SME2 micro-kernel {names[0]} {how}{others} in a process "
                    "whose hwcaps hide SME2: it was chosen without asking for SME2, and a CPU "
                    "without SME2 faults on it (SIGILL)")
    return None


def parse_xnntrace(text: str) -> list[LoggedKernel]:
    """Kernels named by ``Using <kind> microkernel '<name>'`` lines, distinct, first-seen order."""
    seen: dict[tuple[str, str], LoggedKernel] = {}
    for match in _KERNEL_LINE.finditer(text):
        kind, name = match.group(1), match.group(2)
        if (name, kind) not in seen:
            isa = xnn_isa_suffix(name)
            seen[(name, kind)] = LoggedKernel(name, kind, isa, isa_family(isa) == "SME2")
    return list(seen.values())


def sme2_verdict(
    *,
    kernels: Sequence[LoggedKernel] | None,
    kleidiai: Sequence[str],
    device_sme2: bool | None,
    executed: KernelTrace | None = None,
    sampled: KernelSample | None = None,
    device_sme: bool | None = None,
) -> KernelEvidence:
    """Combine executed kernels, xnntrace, KleidiAI operator names and device hwcaps into one
    verdict, the strongest source first; the SME level's beside it (``device_sme``: whether
    the process has SME). An SME2 kernel in a process without SME2 raises
    :class:`DispatchBugError`.

    ``kernels`` is None when no log was captured. A log with no kernel lines counts the same
    (XNNPACK logging was off): silence is not evidence of absence. ``executed`` is a kernel
    trace; SME code it cannot name (blocks without symbols) leaves the verdict to the other
    sources, with a note. ``sampled``: the kernels a sampling process caught; SME2 ones prove
    SME2, none prove nothing (a short kernel may get no sample), said in a note.
    """
    packed = tuple(dict.fromkeys(kleidiai))
    traced = tuple(kernels or ())
    bug = dispatch_bug(kernels=traced, device_sme2=device_sme2, executed=executed,
                       sampled=sampled)
    if bug is not None:
        raise DispatchBugError(bug)
    note = ""
    found: tuple[str, str] | None = None
    if executed is not None:
        found, note = _from_execution(executed)
    if sampled is not None:
        by_sampling, sample_note = _from_sampling(sampled)
        found = found or by_sampling
        note += sample_note
    found = found or _from_xnntrace(traced, device_sme2) or _from_names(packed, device_sme2)
    sme2, reason = found
    reason += note
    if kernels is not None and not traced:
        reason += "; the xnntrace log had no kernel lines (XNNPACK logging off?)"
    sme, sme_reason = sme_level(executed=executed, sampled=sampled, packed=packed,
                                device_sme=device_sme, device_sme2=device_sme2)
    return KernelEvidence(
        sme2, reason, list(packed), list(traced),
        executed_kernels=list(executed.executed) if executed is not None else [],
        streaming_sme_blocks=executed.streaming_blocks if executed is not None else None,
        kernel_trace_source=executed.source if executed is not None else "",
        sampled_kernels=list(sampled.sampled) if sampled is not None else [],
        samples_total=sampled.samples_total if sampled is not None else None,
        kernel_sample_source=sampled.source if sampled is not None else "",
        sme=sme, sme_reason=sme_reason)


def _compute_first(names: Sequence[str]) -> list[str]:
    """Compute kernels before packing ones: what did the arithmetic first; tile-size accessors
    left out (they are no kernels)."""
    return sorted((n for n in names if not is_accessor(n)), key=lambda n: "pack" in n.lower())


def sme_level(*, executed: KernelTrace | None, sampled: KernelSample | None,
              packed: Sequence[str], device_sme: bool | None,
              device_sme2: bool | None) -> tuple[str, str]:
    """(verdict, reason) of the SME (SME1) level: SME1 micro-kernels executed or sampled
    prove it; a process without SME, or a trace with no SME1 kernel, rules it out; KleidiAI
    packed operators on a device with SME but no SME2 indicate it (they run SME1 kernels
    there, or NEON ones: a trace or samples tell); else unknown, with no reason."""
    if executed is not None:
        ran = _compute_first([k.name for k in executed.executed if k.isa_family == "SME"])
        if ran:
            return PROVEN, (f"kernel trace: {_count(len(ran), 'SME1 kernel')} executed "
                            f"({_few(ran)})")
    if sampled is not None:
        caught = [k for k in sampled.sampled if k.isa_family == "SME" and not is_accessor(k.name)]
        if caught:
            names = _compute_first([k.name for k in caught])
            return PROVEN, (f"sampling: {sum(k.samples for k in caught)} of "
                            f"{sampled.samples_total} samples in "
                            f"{_count(len(caught), 'SME1 kernel')} ({_few(names)})")
    if device_sme is False:
        return ABSENT, "the process's hwcaps report no SME"
    if executed is not None:
        if not executed.streaming_blocks:
            return ABSENT, "kernel trace: no SME code executed"
        if executed.streaming_unattributed:
            return UNKNOWN, ("kernel trace: SME code ran in code without symbols, SME1 or SME2 "
                             "cannot be told from it")
        return ABSENT, "kernel trace: no SME1 kernel executed (the SME code was SME2 kernels')"
    if packed and device_sme and device_sme2 is False:
        return INDICATED, (f"{_count(len(packed), 'KleidiAI packed operator')} ran on a device "
                           "reporting SME without SME2; no kernel trace to prove SME1 kernels")
    return UNKNOWN, ""


def _from_sampling(sample: KernelSample) -> tuple[tuple[str, str] | None, str]:
    """(verdict, "") when SME2 micro-kernels were sampled; else (None, a note of what the
    samples showed): absence in a sample is no proof."""
    caught = sample.sampled
    sme2 = [k for k in caught if k.isa_family == "SME2"]
    n = sample.samples_total
    if sme2:
        hits = sum(k.samples for k in sme2)
        return (PROVEN, f"sampling: {hits} of {n} samples in "
                        f"{_count(len(sme2), 'SME2 micro-kernel')} "
                        f"({_few([k.name for k in sme2])})"), ""
    families = sorted({k.isa_family for k in caught})
    seen = (f"{sum(k.samples for k in caught)} in micro-kernels of {', '.join(families)}"
            if caught else "none in a named micro-kernel")
    return None, (f"; sampling: no SME2 micro-kernel in {n} samples ({seen}); a short kernel "
                  "may get no sample, so this alone proves nothing")


def _from_execution(executed: KernelTrace) -> tuple[tuple[str, str] | None, str]:
    """(verdict, reason) from the kernels that executed, or None and a note when SME code ran
    in functions without symbols (SME1 and SME2 cannot be told apart there)."""
    ran = executed.executed
    sme2_run = [k.name for k in ran if k.isa_family == "SME2"]
    sme1_run = [k.name for k in ran if k.isa_family == "SME"]
    hidden = executed.streaming_unattributed
    if sme2_run:
        return (PROVEN, f"kernel trace: {_count(len(sme2_run), 'SME2 micro-kernel')} executed "
                        f"({_few(sme2_run)})"), ""
    if hidden:
        libs = sorted(set(executed.unattributed.loc[
            executed.unattributed["streaming_blocks"] > 0, "library"]))
        return None, (f"; kernel trace: {hidden} blocks with SME instructions ran in code "
                      f"without symbols ({_few(libs)}), SME or SME2 cannot be told from them")
    if sme1_run:
        return (ABSENT, f"kernel trace: SME (SME1) kernels executed ({_few(sme1_run)}), "
                        "no SME2"), ""
    if not executed.streaming_blocks:
        return (ABSENT, f"kernel trace: no SME or SME2 code executed ({executed.blocks_total} "
                        f"blocks, none with SME instructions); {_executed_summary(ran)}"), ""
    return (ABSENT, f"kernel trace: no SME2 micro-kernel executed ({executed.streaming_blocks} "
                    "blocks with SME instructions, all in functions that are not SME2 "
                    "kernels)"), ""


def _from_xnntrace(traced: Sequence[LoggedKernel], device_sme2: bool | None
                   ) -> tuple[str, str] | None:
    """(verdict, reason) from XNNPACK's kernel log; None when it names no kernel."""
    sme2_kernels = [k.name for k in traced if k.sme2]
    if sme2_kernels:
        return PROVEN, (f"xnntrace shows {_count(len(sme2_kernels), 'SME2 micro-kernel')} "
                        f"({_few(sme2_kernels)})")
    if not traced or device_sme2 is False:
        return None              # the device's word (below) is the stronger one then
    isas = sorted({k.isa for k in traced})
    reason = (f"xnntrace lists {_count(len(traced), 'micro-kernel')} and none is SME2 "
              f"(ISAs: {_few(isas)})")
    if any(isa_family(isa) == "SME" for isa in isas):
        reason += "; neonsme is SME (SME1), not SME2"
    return ABSENT, reason


def _from_names(packed: Sequence[str], device_sme2: bool | None) -> tuple[str, str]:
    """(verdict, reason) from the ETDump's operator names and the device's hwcaps alone."""
    n_packed = _count(len(packed), "KleidiAI packed operator")
    if device_sme2 is False:
        if packed:
            return ABSENT, (f"device hwcaps report no SME2, so the {n_packed} that ran "
                            f"({_few(packed)}) used non-SME2 kernels")
        return ABSENT, "device hwcaps report no SME2"
    # Packed names mean KleidiAI, which also runs SME1 and NEON kernels: only the device's SME2
    # capability turns them into an indication.
    if packed and device_sme2:
        return INDICATED, (f"{n_packed} ran ({_few(packed)}) on a device reporting SME2; "
                           "no kernel trace to prove SME2 micro-kernels")
    if packed:
        return UNKNOWN, (f"{n_packed} ran ({_few(packed)}), but device SME2 support is unknown "
                         "(no device hwcaps): KleidiAI runs SME1 and NEON kernels too; no "
                         "kernel trace")
    device = "device hwcaps report SME2" if device_sme2 else "device SME2 support is unknown"
    return UNKNOWN, ("no KleidiAI packed operators in the ETDump operator names and no kernel "
                     f"trace; {device}")


def _executed_summary(ran: Sequence[TracedKernel]) -> str:
    if not ran:
        return "no KleidiAI/XNNPACK kernel symbols among them"
    families = sorted({k.isa_family for k in ran})
    return (f"{_count(len(ran), 'KleidiAI/XNNPACK kernel')}: {', '.join(families)} "
            f"({_few([k.name for k in ran])})")


# Operators whose work is a GEMM (XNNPACK names them with their datatypes); depthwise
# convolutions use dwconv kernels, not GEMMs.
_GEMM_OPS = re.compile(
    r"^(?:Convolution|Deconvolution|Fully Connected|Batch Matrix Multiply)\b")
_OP_DTYPE_ALIASES = {"QC8": "QS8"}   # "Convolution (NHWC, QC8)" runs xnn_qs8_qc8w_* kernels
def _op_datatype(name: str) -> str | None:
    args = _ARGS.search(name)
    if not _GEMM_OPS.match(name) or args is None or "DWConv" in name:
        return None
    tokens = [t.strip() for t in args.group(1).split(",")]
    dtype = tokens[1] if len(tokens) > 1 else tokens[0]     # after the layout (NC, NHWC)
    return _OP_DTYPE_ALIASES.get(dtype, dtype)


def operator_kernel_hints(
    operator_names: Iterable[str], executed: Iterable[TracedKernel]
) -> dict[str, list[str]]:
    """GEMM-class operator (``#n`` stripped) -> executed GEMM micro-kernels of its datatype.

    Only operators with at least one such kernel appear. Several operators of one datatype
    get the same list: the trace cannot tell which of them ran which (see :func:`kernel_hint`).
    """
    by_dtype: dict[str, list[str]] = {}
    for k in executed:
        dtype = gemm_datatype(k.name)
        if dtype is not None and k.name not in by_dtype.setdefault(dtype, []):
            by_dtype[dtype].append(k.name)
    hints = {}
    for op in sorted({op_name(n) for n in operator_names}):
        dtype = _op_datatype(op)
        if dtype in by_dtype:
            hints[op] = sorted(by_dtype[dtype])
    return hints


def kernel_hint(operator: str, hints: Mapping[str, Sequence[str]]) -> str:
    """The operator's ``kernel_hint``: "" when none, its kernels when it alone has their
    datatype, else ``cannot tell (N operators share the datatype): kernels``."""
    mine = list(hints.get(op_name(operator), ()))
    if not mine:
        return ""
    sharing = sum(1 for kernels in hints.values() if list(kernels) == mine)
    if sharing == 1:
        return ", ".join(mine)
    return f"cannot tell ({sharing} operators share the datatype): {', '.join(mine)}"


def xnntrace_counts(text: str) -> dict[tuple[str, str], int]:
    """How many ``Using <kind> microkernel '<name>'`` lines name each (name, kind): XNNPACK logs
    one per kernel config it sets up, so a kernel several operators use is named several
    times."""
    counts: dict[tuple[str, str], int] = {}
    for match in _KERNEL_LINE.finditer(text):
        key = (match.group(2), match.group(1))
        counts[key] = counts.get(key, 0) + 1
    return counts


def log_category(kind: str) -> str:
    """The seed kit's ``category`` of a kernel log line's kind: lower case, ``transposec``
    written ``transpose``."""
    kind = kind.lower()
    return "transpose" if kind == "transposec" else kind


def kernels_frame(kernels: Iterable[LoggedKernel]) -> pd.DataFrame:
    """The ``kernels.csv`` table: one row per kernel, columns ``KERNEL_COLUMNS``."""
    rows = [(k.name, k.kind, k.isa, isa_family(k.isa), k.sme2) for k in kernels]
    return pd.DataFrame(rows, columns=KERNEL_COLUMNS).astype({"sme2": bool})


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _few(items: Sequence[str], limit: int = 3) -> str:
    """``a, b, c and 2 more``: enough to check, short enough for one sentence."""
    shown = ", ".join(items[:limit])
    return shown if len(items) <= limit else f"{shown} and {len(items) - limit} more"
