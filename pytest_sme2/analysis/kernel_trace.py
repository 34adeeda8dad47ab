"""Kernels proven by execution: which micro-kernels ran, from QEMU's translated-block log.

QEMU user mode with ``-d in_asm -D LOG`` writes every block of guest code it translates:

    ----------------
    IN: [symbol]
    0x7f5d5b503124:  d503477f  smstart
    0x7f5d5b503128:  ...

QEMU translates a block only when execution reaches it, so each block's first address is code
that executed. The guest's ``/proc/self/maps`` (copied at exit) maps an address to a library and
a file offset; the library's ``PT_LOAD`` segments turn the offset into a virtual address, and the
function symbol whose ``[st_value, st_value + st_size)`` holds it names the code. Sizes are
required: the nearest preceding symbol alone gives unexported code to its exported neighbour.

The disassembly also tells, without any symbol, whether streaming-SME code ran: a block holding
``smstart``/``smstop``, a ZA operand or an outer product (``fmopa``...) is SME code. The
``.byte`` lines of instructions QEMU's disassembler does not know (some SME2 ones) are not
counted: this check can miss SME code, never invent it.

Only micro-kernels are kept as rows: KleidiAI's ``kai_run_*``/``kai_kernel_*`` (one row per
micro-kernel, ``kai_kernel_X`` being the body of ``kai_run_X``), XNNPACK's ``xnn_*ukernel*`` and
other ``*ukernel*`` functions. Everything else that ran (the runtime, libc, KleidiAI's
``kai_get_*`` getters) is glue: it says nothing about which ISA did the arithmetic, so it only
counts in the block totals. XNNPACK's own ukernels are hidden symbols in prebuilt libraries: their
blocks count as unattributed, per library.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from pytest_sme2.analysis.addresses import (AddressMap, MappedRegion, SymbolTable, check_tally,
                                            kernel_kind, library_resolver, parse_maps, tally)
from pytest_sme2.analysis.isa import isa_family, kernel_isa
from pytest_sme2.analysis.kernel_csv import TOTAL, read_kernel_csv, write_kernel_csv
from pytest_sme2.errors import Sme2Error
from pytest_sme2.results.records import TracedKernel

TRACE_COLUMNS = ["name", "isa_family", "isa", "kind", "library", "blocks", "streaming_blocks"]
UNATTRIBUTED_COLUMNS = ["library", "reason", "blocks", "streaming_blocks"]
# Kinds of the CSV's extra rows (after the kernels): blocks no function claims, and the total.
UNATTRIBUTED = "unattributed"
TOTAL_NAME = "(all executed blocks)"

# "0x7f5d5b503124:  d503477f  smstart" (the encoding column is absent in some QEMU builds).
_INSN = re.compile(r"^0x([0-9a-fA-F]+):\s+(?:[0-9a-fA-F]{8}\s+)?(\S+)[ \t]*(.*)$")
_SME_MNEMONIC = re.compile(r"^(?:smstart|smstop|rdsvl|addsvl|\w*mop[as])$")
# za, za0h.s[w12, 0], za.s[w8, 0, vgx2], {za}, zt0: ZA array and ZT0 operands.
_SME_OPERAND = re.compile(r"\bza\d*[hv]?(?:\.[bhsdq])?(?:\[|\b)|\bzt0\b")



@dataclass(frozen=True, eq=False)
class KernelTrace:
    """What one traced process executed.

    ``kernels``: one row per micro-kernel, columns ``TRACE_COLUMNS``; ``unattributed``: blocks no
    function symbol claims, per library and reason, columns ``UNATTRIBUTED_COLUMNS``;
    ``blocks_total``: distinct executed blocks; ``streaming_blocks``: those holding SME
    instructions.
    """

    source: str
    kernels: pd.DataFrame
    unattributed: pd.DataFrame
    blocks_total: int
    streaming_blocks: int

    @property
    def executed(self) -> tuple[TracedKernel, ...]:
        return tuple(TracedKernel(r.name, r.isa_family, r.kind, r.library, int(r.blocks),
                                    int(r.streaming_blocks))
                     for r in self.kernels.itertuples(index=False))

    @property
    def blocks_attributed(self) -> int:
        return self.blocks_total - int(self.unattributed["blocks"].sum())

    @property
    def streaming_unattributed(self) -> int:
        """SME blocks in code without a symbol: SME or SME2 cannot be told for them."""
        return int(self.unattributed["streaming_blocks"].sum())

    def summary(self) -> str:
        """One line: blocks, attribution, SME code and the SME/SME2 kernels."""
        fams = Counter(self.kernels["isa_family"])
        ran = ", ".join(f"{fam} {n}" for fam, n in sorted(fams.items())) or "none"
        sme = (f"streaming SME code executed: {self.streaming_blocks} blocks"
               if self.streaming_blocks else "streaming SME code executed: none")
        return (f"{self.source}: {self.blocks_total} blocks executed, {self.blocks_attributed} "
                f"in named functions; {len(self.kernels)} micro-kernels by ISA: {ran}; {sme}")


# -- parsing -------------------------------------------------------------------------------------


def parse_block_starts(log: str | Path) -> dict[int, bool]:
    """Block start address -> True if that block's disassembly holds an SME instruction.

    ``log`` is a path, or the log's text when a ``str``. A block translated twice (QEMU
    retranslates after a flush) counts once; a log cut short keeps the blocks it has.
    """
    lines = _lines(log) if isinstance(log, Path) else iter(log.splitlines())
    blocks: dict[int, bool] = {}
    start: int | None = None
    expecting = False
    for line in lines:
        if line.startswith("IN:"):
            start, expecting = None, True
            continue
        m = _INSN.match(line.rstrip()) if line.startswith("0x") else None
        if m is None:
            start = None     # a block's lines are contiguous; "OUT:" (host code) is not ours
            continue
        if expecting:
            start, expecting = int(m.group(1), 16), False
            blocks.setdefault(start, False)
        if start is not None and not blocks[start] and _is_sme(m.group(2), m.group(3)):
            blocks[start] = True
    return blocks


def _is_sme(mnemonic: str, operands: str) -> bool:
    return bool(_SME_MNEMONIC.match(mnemonic) or _SME_OPERAND.search(operands))


def _lines(path: Path) -> Iterator[str]:
    with path.open(errors="replace") as fh:
        yield from fh



def executed_kernels(log: Path, maps: Path, libraries_root: Path | None = None, *,
                     symbols: Callable[[str], SymbolTable | None] | None = None) -> KernelTrace:
    """The micro-kernels one process executed, from its QEMU ``-d in_asm`` log and its
    ``/proc/self/maps``. ``symbols`` maps a library path from the maps to its symbol table
    (default: read the ELF file, see :func:`library_resolver`)."""
    log, maps = Path(log), Path(maps)
    try:
        blocks = parse_block_starts(log)
    except OSError as e:
        raise Sme2Error(f"{log}: cannot read the QEMU block log ({e.strerror}); run the runner "
                        f"under qemu-aarch64 with -d in_asm -D {log}") from None
    if not blocks:
        raise Sme2Error(f"{log}: no translated blocks ('IN:' then address lines): not a QEMU "
                        "-d in_asm log, or the run died before running code; run it again")
    try:
        mappings = [m for m in parse_maps(maps.read_text(errors="replace")) if m.executable]
    except OSError as e:
        raise Sme2Error(f"{maps}: cannot read the guest address map ({e.strerror}); the runner "
                        "must copy /proc/self/maps there at exit (PYTEST_SME2_MAPS_OUT with the "
                        "preload library), so the run did not finish") from None
    if not mappings:
        raise Sme2Error(f"{maps}: no executable mappings: not a /proc/self/maps copy, or cut "
                        "short; run the traced process again")
    return attribute(blocks, mappings, symbols or library_resolver(libraries_root),
                     source=str(log), maps_source=str(maps))


def attribute(blocks: dict[int, bool], mappings: Iterable[MappedRegion],
              symbols: Callable[[str], SymbolTable | None], *, source: str = "kernel trace",
              maps_source: str = "maps") -> KernelTrace:
    """Attribute executed blocks (from :func:`parse_block_starts`) to micro-kernels."""
    where = AddressMap(mappings, symbols)
    t = tally(((address, 1, int(sme)) for address, sme in blocks.items()), where)
    check_tally(t, where, "executed blocks", source, maps_source)
    rows = [(name, isa_family(kernel_isa(name)), kernel_isa(name), kernel_kind(name), lib, n, sme)
            for (lib, _), (n, sme, name) in t.kernels.items()]
    frame = pd.DataFrame(rows, columns=TRACE_COLUMNS).sort_values(
        ["kind", "library", "name"], kind="stable").reset_index(drop=True)
    unattributed = pd.DataFrame(
        [(lib, why, n, t.lost_extra[(lib, why)]) for (lib, why), n in sorted(t.lost.items())],
        columns=UNATTRIBUTED_COLUMNS)
    return KernelTrace(source, _typed(frame), _typed(unattributed), len(blocks),
                       sum(blocks.values()))


def _typed(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.astype({"blocks": int, "streaming_blocks": int})


# -- the CSV artifact ----------------------------------------------------------------------------


def write_kernel_trace_csv(trace: KernelTrace, path: Path) -> Path:
    """The ``--kernel-trace`` CSV: one row per micro-kernel (``TRACE_COLUMNS``), then one
    ``unattributed`` row per (library, reason) named ``(reason)``, then the ``total`` row named
    ``(all executed blocks)``; ``kind`` tells the rows apart."""
    extra = [(f"({r.reason})", "", "", UNATTRIBUTED, r.library, r.blocks, r.streaming_blocks)
             for r in trace.unattributed.itertuples(index=False)]
    extra.append((TOTAL_NAME, "", "", TOTAL, "", trace.blocks_total, trace.streaming_blocks))
    frame = pd.concat([trace.kernels, pd.DataFrame(extra, columns=TRACE_COLUMNS)],
                      ignore_index=True)
    return write_kernel_csv(frame, path)


def read_kernel_trace_csv(path: str | Path) -> KernelTrace:
    """Read what :func:`write_kernel_trace_csv` wrote."""
    frame, total = read_kernel_csv(path, TRACE_COLUMNS, "kernel-trace",
                                   "--device qemu --kernel-trace")
    try:
        frame = frame.astype({"blocks": int, "streaming_blocks": int})
    except (TypeError, ValueError):
        raise Sme2Error(f"{path}: block counts are not integers; write it again") from None
    lost = frame[frame["kind"] == UNATTRIBUTED]
    unattributed = pd.DataFrame({"library": lost["library"],
                                 "reason": lost["name"].str.strip("()"),
                                 "blocks": lost["blocks"],
                                 "streaming_blocks": lost["streaming_blocks"]},
                                columns=UNATTRIBUTED_COLUMNS).reset_index(drop=True)
    kernels = frame[~frame["kind"].isin([UNATTRIBUTED, TOTAL])][TRACE_COLUMNS]
    return KernelTrace(str(path), _typed(kernels.reset_index(drop=True)), _typed(unattributed),
                       int(total["blocks"].iloc[0]), int(total["streaming_blocks"].iloc[0]))


def executed_frame(executed: Iterable[TracedKernel]) -> pd.DataFrame:
    """``kernels.csv`` rows for executed kernels: the xnntrace columns (``kind`` holding the
    kernel's origin, kleidiai/xnnpack/other) plus ``library, blocks, streaming_blocks``."""
    rows = [(k.name, k.kind, kernel_isa(k.name), k.isa_family, k.isa_family == "SME2",
             k.library, k.blocks, k.streaming_blocks) for k in executed]
    return pd.DataFrame(rows, columns=["name", "kind", "isa", "isa_family", "sme2", "library",
                                       "blocks", "streaming_blocks"]).astype({"sme2": bool})
