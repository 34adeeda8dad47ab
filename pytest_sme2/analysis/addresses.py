"""Which library and function an address of a process lies in: its ``/proc/self/maps`` (copied
at exit by the preload library) and the libraries' ELF symbol tables. Both kinds of kernel
evidence use it: the executed blocks of a QEMU trace (:mod:`.kernel_trace`) and sampled program
counters (:mod:`.kernel_sample`).

A library offset becomes a virtual address through the library's ``PT_LOAD`` segments, and the
function symbol whose ``[st_value, st_value + st_size)`` holds it names the code. Sizes are
required: the nearest preceding symbol alone gives unexported code to its exported neighbour.

Micro-kernels are KleidiAI's ``kai_run_*``/``kai_kernel_*`` (``kai_kernel_X`` is the body of
``kai_run_X``), XNNPACK's ``xnn_*ukernel*`` and other ``*ukernel*`` functions; everything else
(the runtime, libc, KleidiAI's ``kai_get_*`` getters) is glue that says nothing about which ISA
did the arithmetic.
"""

from __future__ import annotations

import bisect
import functools
import os
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pytest_sme2.errors import Sme2Error

KLEIDIAI, XNNPACK, OTHER = "kleidiai", "xnnpack", "other"
NO_SYMBOL = "no function symbol"
NOT_FOUND = "library not found here"
NO_FILE = "not a library file"
UNMAPPED = "(unmapped)"
_KAI = re.compile(r"^kai_(?:run|kernel)_(\w+)$")


@dataclass(frozen=True)
class MappedRegion:
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



def parse_maps(text: str) -> list[MappedRegion]:
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
        out.append(MappedRegion(lo, hi, offset, "x" in fields[1], path.removesuffix(" (deleted)")))
    return out


# -- symbols -------------------------------------------------------------------------------------


def read_symbols(path: Path) -> SymbolTable:
    """Load segments and sized ``STT_FUNC`` symbols (.symtab, then .dynsym) of an ELF file;
    cached per (path, size, mtime)."""
    st = path.stat()
    return _read_symbols(str(path), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _read_symbols(path: str, size: int, mtime_ns: int) -> SymbolTable:
    from elftools.common.exceptions import ELFError  # elftools: only _read_symbols() needs it
    from elftools.elf.elffile import ELFFile  # elftools: only _read_symbols() needs it

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


def kernel_key(name: str) -> str:
    """One micro-kernel per key: ``kai_kernel_X`` is the body of ``kai_run_X``."""
    m = _KAI.match(name)
    return f"kai_run_{m.group(1)}" if m else name


# -- the entry point -----------------------------------------------------------------------------



@dataclass(frozen=True)
class CodeLocation:
    """Where an address lies: the library's file name (or a placeholder) and the function, or
    None with the reason no function could be named."""

    library: str
    function: str | None
    reason: str = ""


class AddressMap:
    """Addresses of one process -> library and function (symbol tables read once each)."""

    def __init__(self, mappings: Iterable[MappedRegion],
                 symbols: Callable[[str], SymbolTable | None]):
        self._regions = sorted((m for m in mappings if m.executable), key=lambda m: m.start)
        self._starts = [m.start for m in self._regions]
        self._symbols = symbols
        self.tables: dict[str, SymbolTable | None] = {}

    def locate(self, address: int) -> CodeLocation:
        i = bisect.bisect_right(self._starts, address) - 1
        where = self._regions[i] if i >= 0 and address < self._regions[i].end else None
        if where is None:
            return CodeLocation(UNMAPPED, None, NO_FILE)
        if not where.path.startswith("/"):
            return CodeLocation(where.path or "(anonymous)", None, NO_FILE)
        if where.path not in self.tables:
            self.tables[where.path] = self._symbols(where.path)
        table = self.tables[where.path]
        library = os.path.basename(where.path)
        if table is None:
            return CodeLocation(library, None, NOT_FOUND)
        name = table.function_at(address - where.start + where.offset)
        return CodeLocation(library, name, "" if name else NO_SYMBOL)

    def unreadable_libraries(self) -> str | None:
        """A library that ran code when none of them could be read here (else None)."""
        if self.tables and not any(t is not None for t in self.tables.values()):
            return next(iter(self.tables))
        return None


def files_resolver(files: Mapping[str, Path]) -> Callable[[str], SymbolTable | None]:
    """Symbols for a device path from host copies named like it (file name -> host path): the
    libraries a device was given are the host files we pushed."""
    def resolve(path: str) -> SymbolTable | None:
        local = files.get(os.path.basename(path))
        return read_symbols(local) if local is not None and local.is_file() else None

    return resolve


@dataclass
class Tally:
    """Counts of addresses by micro-kernel and by what could not be named. Each address brings
    two numbers (e.g. blocks and SME blocks, or samples and 0)."""

    kernels: dict[tuple[str, str], list] = field(default_factory=dict)  # (library, key) ->
    #                                                                     [count, extra, name]
    lost: Counter = field(default_factory=Counter)          # (library, reason) -> count
    lost_extra: Counter = field(default_factory=Counter)
    total: int = 0

    @property
    def unmapped(self) -> int:
        return self.lost[(UNMAPPED, NO_FILE)]


def tally(addresses: Iterable[tuple[int, int, int]], where: AddressMap) -> Tally:
    """(address, count, extra) triples -> counts per micro-kernel (glue functions count in
    ``total`` only) and per unnamed (library, reason)."""
    out = Tally()
    for address, count, extra in addresses:
        out.total += count
        loc = where.locate(address)
        if loc.function is None:
            out.lost[(loc.library, loc.reason)] += count
            out.lost_extra[(loc.library, loc.reason)] += extra
            continue
        if kernel_kind(loc.function) is not None:
            row = out.kernels.setdefault((loc.library, kernel_key(loc.function)),
                                         [0, 0, loc.function])
            row[0] += count
            row[1] += extra
            if loc.function.startswith("kai_run_"):
                row[2] = loc.function   # name the micro-kernel by its entry point when it ran
    return out


def check_tally(t: Tally, where: AddressMap, what: str, source: str, maps_source: str) -> None:
    """Sme2Error when the map is not this process's or no library is readable here."""
    mapped = t.total - t.unmapped
    if mapped * 2 < t.total:
        raise Sme2Error(f"{maps_source}: only {mapped} of {t.total} {what} of {source} lie in "
                        "its mappings: the map is from another run; keep the two files of the "
                        "same process")
    example = where.unreadable_libraries()
    if example is not None and any(why == NOT_FOUND for (_, why) in t.lost):
        raise Sme2Error(f"{maps_source}: none of the {len(where.tables)} libraries that ran code "
                        f"is readable here (e.g. {example}); give libraries_root, a folder with "
                        "copies of the device's libraries")
