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

import bisect
import functools
import os
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from pytest_sme2.analysis.kernels import isa_family, kernel_isa
from pytest_sme2.errors import Sme2Error

TRACE_COLUMNS = ["name", "isa_family", "isa", "kind", "library", "blocks", "streaming_blocks"]
UNATTRIBUTED_COLUMNS = ["library", "reason", "blocks", "streaming_blocks"]
KLEIDIAI, XNNPACK, OTHER = "kleidiai", "xnnpack", "other"
# Kinds of the CSV's extra rows (after the kernels): blocks no function claims, and the total.
UNATTRIBUTED, TOTAL = "unattributed", "total"
TOTAL_NAME = "(all executed blocks)"
NO_SYMBOL = "no function symbol"
NOT_FOUND = "library not found here"
NO_FILE = "not a library file"

# "0x7f5d5b503124:  d503477f  smstart" (the encoding column is absent in some QEMU builds).
_INSN = re.compile(r"^0x([0-9a-fA-F]+):\s+(?:[0-9a-fA-F]{8}\s+)?(\S+)[ \t]*(.*)$")
_SME_MNEMONIC = re.compile(r"^(?:smstart|smstop|rdsvl|addsvl|\w*mop[as])$")
# za, za0h.s[w12, 0], za.s[w8, 0, vgx2], {za}, zt0: ZA array and ZT0 operands.
_SME_OPERAND = re.compile(r"\bza\d*[hv]?(?:\.[bhsdq])?(?:\[|\b)|\bzt0\b")
_KAI = re.compile(r"^kai_(?:run|kernel)_(\w+)$")


@dataclass(frozen=True)
class Mapping:
    """One line of ``/proc/self/maps``."""

    start: int
    end: int
    offset: int
    executable: bool
    path: str        # "" for anonymous memory, "[vdso]" and the like for special regions


@dataclass(frozen=True)
class SymbolTable:
    """What attribution needs from one library: load segments and sized function symbols."""

    segments: tuple[tuple[int, int, int], ...]   # PT_LOAD (p_offset, p_vaddr, p_filesz)
    functions: tuple[tuple[int, int, str], ...]  # (st_value, st_size, name), sorted

    def function_at(self, file_offset: int) -> str | None:
        """The function whose extent holds this file offset, or None."""
        vaddr = next((file_offset - off + va for off, va, size in self.segments
                      if off <= file_offset < off + size), None)
        if vaddr is None:
            return None
        i = bisect.bisect_right(self._starts, vaddr) - 1
        # Walk back a little: a large function may begin before a small one that ends early.
        for start, size, name in reversed(self.functions[max(0, i - 3):i + 1]):
            if start <= vaddr < start + size:
                return name
        return None

    @functools.cached_property
    def _starts(self) -> list[int]:
        return [s for s, _, _ in self.functions]


@dataclass(frozen=True)
class ExecutedKernel:
    """One micro-kernel that executed; ``blocks``: its distinct translated blocks."""

    name: str
    isa_family: str
    kind: str            # kleidiai | xnnpack | other
    library: str
    blocks: int
    streaming_blocks: int = 0  # of which hold SME instructions


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
    def executed(self) -> tuple[ExecutedKernel, ...]:
        return tuple(ExecutedKernel(r.name, r.isa_family, r.kind, r.library, int(r.blocks),
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


def parse_maps(text: str) -> list[Mapping]:
    """Lines of ``/proc/self/maps``; malformed lines are skipped."""
    out = []
    for line in text.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) < 5 or "-" not in fields[0]:
            continue
        try:
            lo, hi = (int(x, 16) for x in fields[0].split("-", 1))
            offset = int(fields[2], 16)
        except ValueError:
            continue
        path = fields[5].strip() if len(fields) > 5 else ""
        out.append(Mapping(lo, hi, offset, "x" in fields[1], path.removesuffix(" (deleted)")))
    return out


# -- symbols -------------------------------------------------------------------------------------


def read_symbols(path: Path) -> SymbolTable:
    """Load segments and sized ``STT_FUNC`` symbols (.symtab, then .dynsym) of an ELF file;
    cached per (path, size, mtime)."""
    st = path.stat()
    return _read_symbols(str(path), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _read_symbols(path: str, size: int, mtime_ns: int) -> SymbolTable:
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    try:
        with open(path, "rb") as fh:
            elf = ELFFile(fh)
            segments = tuple((s["p_offset"], s["p_vaddr"], s["p_filesz"])
                             for s in elf.iter_segments() if s["p_type"] == "PT_LOAD")
            by_start: dict[int, tuple[int, str]] = {}
            for section in (".symtab", ".dynsym"):   # .symtab first: it names hidden code too
                table = elf.get_section_by_name(section)
                for sym in table.iter_symbols() if table is not None else ():
                    if (sym["st_info"]["type"] == "STT_FUNC" and sym["st_size"] > 0
                            and sym["st_shndx"] != "SHN_UNDEF"):
                        by_start.setdefault(sym["st_value"], (sym["st_size"], sym.name))
    except (OSError, ELFError) as e:
        raise Sme2Error(f"{path}: not a readable ELF library ({e})") from None
    functions = tuple(sorted((start, sz, name) for start, (sz, name) in by_start.items()))
    return SymbolTable(segments, functions)


def library_resolver(libraries_root: Path | None) -> Callable[[str], SymbolTable | None]:
    """Symbols for a library path from the maps: the path itself, or with ``libraries_root``
    (for device paths such as ``/data/local/tmp/...``) the file of the same name under it.

    With a root, nothing outside it is used: a host file at the device's path (``/lib/libc.so``)
    would be another architecture's library.
    """
    if libraries_root is not None and not libraries_root.is_dir():
        raise Sme2Error(f"{libraries_root}: libraries root is not a folder (give the folder "
                        "holding copies of the device's libraries)")
    index: dict[str, Path] | None = None

    def resolve(path: str) -> SymbolTable | None:
        nonlocal index
        if libraries_root is None:
            local: Path | None = Path(path)
        else:
            if index is None:
                index = {}
                for p in sorted(libraries_root.rglob("*")):
                    if p.is_file():
                        index.setdefault(p.name, p)
            local = index.get(os.path.basename(path))
        return read_symbols(local) if local is not None and local.is_file() else None

    return resolve


# -- names ---------------------------------------------------------------------------------------


def kernel_kind(name: str) -> str | None:
    """kleidiai / xnnpack / other for a micro-kernel function, None for anything else."""
    if _KAI.match(name):
        return KLEIDIAI
    if "ukernel" in name:
        return XNNPACK if name.startswith("xnn_") else OTHER
    return None


def _kernel_key(name: str) -> str:
    """One micro-kernel per key: ``kai_kernel_X`` is the body of ``kai_run_X``."""
    m = _KAI.match(name)
    return f"kai_run_{m.group(1)}" if m else name


# -- the entry point -----------------------------------------------------------------------------


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
                        "hwcap-mask preload), so the run did not finish") from None
    if not mappings:
        raise Sme2Error(f"{maps}: no executable mappings: not a /proc/self/maps copy, or cut "
                        "short; run the traced process again")
    return attribute(blocks, mappings, symbols or library_resolver(libraries_root),
                     source=str(log), maps_source=str(maps))


def attribute(blocks: dict[int, bool], mappings: Iterable[Mapping],
              symbols: Callable[[str], SymbolTable | None], *, source: str = "kernel trace",
              maps_source: str = "maps") -> KernelTrace:
    """Attribute executed blocks (from :func:`parse_block_starts`) to micro-kernels."""
    maps_sorted = sorted((m for m in mappings if m.executable), key=lambda m: m.start)
    starts = [m.start for m in maps_sorted]
    tables: dict[str, SymbolTable | None] = {}
    kernels: dict[tuple[str, str], list] = {}       # (library, key) -> [blocks, sme, name]
    lost: Counter[tuple[str, str]] = Counter()       # (library, reason) -> blocks
    lost_sme: Counter[tuple[str, str]] = Counter()
    for address, sme in blocks.items():
        i = bisect.bisect_right(starts, address) - 1
        where = maps_sorted[i] if i >= 0 and address < maps_sorted[i].end else None
        name, why, library = None, NO_FILE, "(unmapped)"
        if where is not None:
            library = os.path.basename(where.path) if where.path.startswith("/") else (
                where.path or "(anonymous)")
            if where.path.startswith("/"):
                if where.path not in tables:
                    tables[where.path] = symbols(where.path)
                table = tables[where.path]
                why = NO_SYMBOL if table is not None else NOT_FOUND
                if table is not None:
                    name = table.function_at(address - where.start + where.offset)
        if name is None:
            lost[(library, why)] += 1
            lost_sme[(library, why)] += sme
            continue
        if kernel_kind(name) is not None:
            row = kernels.setdefault((library, _kernel_key(name)), [0, 0, name])
            row[0] += 1
            row[1] += sme
            if name.startswith("kai_run_"):
                row[2] = name        # name the micro-kernel by its entry point when it ran
    mapped = len(blocks) - lost[("(unmapped)", NO_FILE)]
    if mapped * 2 < len(blocks):
        raise Sme2Error(f"{maps_source}: only {mapped} of {len(blocks)} executed blocks of "
                        f"{source} lie in its mappings: the map is from another run; keep the "
                        "log and the map of the same process")
    files = {lib for (lib, why) in lost if why == NOT_FOUND}
    if files and not any(t is not None for t in tables.values()):
        example = next(p for p in tables)
        raise Sme2Error(f"{maps_source}: none of the {len(tables)} libraries that ran code is "
                        f"readable here (e.g. {example}); give libraries_root, a folder with "
                        "copies of the device's libraries")
    rows = [(name, isa_family(kernel_isa(name)), kernel_isa(name), kernel_kind(name), lib, n, sme)
            for (lib, _), (n, sme, name) in kernels.items()]
    frame = pd.DataFrame(rows, columns=TRACE_COLUMNS).sort_values(
        ["kind", "library", "name"], kind="stable").reset_index(drop=True)
    unattributed = pd.DataFrame(
        [(lib, why, n, lost_sme[(lib, why)]) for (lib, why), n in sorted(lost.items())],
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
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(path, index=False)
    return path


def read_kernel_trace_csv(path: str | Path) -> KernelTrace:
    """Read what :func:`write_kernel_trace_csv` wrote."""
    path = Path(path)
    try:
        frame = pd.read_csv(path, keep_default_na=False, dtype={"name": str, "library": str})
    except FileNotFoundError:
        raise Sme2Error(f"{path}: no such kernel-trace CSV (written by `pytest-sme2 run "
                        "--device qemu --kernel-trace OUT.csv`)") from None
    except (OSError, ValueError) as e:
        raise Sme2Error(f"{path}: not a kernel-trace CSV ({e})") from None
    missing = [c for c in TRACE_COLUMNS if c not in frame.columns]
    total = frame[frame.get("kind", pd.Series(dtype=str)) == TOTAL] if not missing else None
    if missing or total is None or len(total) != 1:
        what = f"missing columns {', '.join(missing)}" if missing else "no total row"
        raise Sme2Error(f"{path}: not a complete kernel-trace CSV ({what}); write it again with "
                        "`pytest-sme2 run --kernel-trace`")
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


def executed_frame(executed: Iterable[ExecutedKernel]) -> pd.DataFrame:
    """``kernels.csv`` rows for executed kernels: the xnntrace columns (``kind`` holding the
    kernel's origin, kleidiai/xnnpack/other) plus ``library, blocks, streaming_blocks``."""
    rows = [(k.name, k.kind, kernel_isa(k.name), k.isa_family, k.isa_family == "SME2",
             k.library, k.blocks, k.streaming_blocks) for k in executed]
    return pd.DataFrame(rows, columns=["name", "kind", "isa", "isa_family", "sme2", "library",
                                       "blocks", "streaming_blocks"]).astype({"sme2": bool})
