"""Read an ETDump flatbuffer straight into a pandas DataFrame.

The schema (``etdump_schema_flatcc.fbs`` in the executorch package) is small and stable, so we
walk the flatbuffer ourselves: no torch, no executorch, no flatc round trip. The few RunData
blocks are walked with ``struct``; the (hundreds of thousands of) events are read with numpy
gathers over the whole file at once, every offset bounds-checked, so a corrupt file is an
:class:`ETDumpError`, never a crash. ExecuTorch's Inspector takes seconds per thousand runs;
this takes a fraction of that.

One row per profiling event occurrence. Columns (the one events schema the analysis reads):

=================  ===========================================================================
``block``          index of the RunData block in the file
``block_name``     its name: ``Default`` (load/init) or ``Execute`` (one per ``forward()``);
                   categorical
``run``            index among ``Execute`` blocks (0-based), -1 for other blocks
``seq``            order of the event within its block
``name``           event name; for delegate events the delegate's debug id string (XNNPACK
                   puts the operator name there and leaves ``name`` empty); categorical
``instruction_id`` runtime instruction id (-1 when absent)
``delegate_debug_id``  integer delegate debug id (-1 when absent)
``delegated``      True for events emitted inside a delegate
``start``/``end``  raw timestamps (ticks; nanoseconds for the runtimes we know)
``duration_ms``    ``(end - start) / ticks_per_ms``
=================  ===========================================================================
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from pytest_sme2.errors import Sme2Error

FILE_IDENTIFIER = b"ED00"
# The runtimes we target (Python pybindings, executor_runner on Linux/Android/macOS) stamp
# events with a nanosecond clock; Inspector assumes the same by default.
TICKS_PER_MS = 1_000_000.0

EVENT_COLUMNS = [
    "block",
    "block_name",
    "run",
    "seq",
    "name",
    "instruction_id",
    "delegate_debug_id",
    "delegated",
    "start",
    "end",
    "duration_ms",
]

_MAX_GRID_NAME = 4096
# Largest names grid (events x longest name, bytes) built in one piece; beyond it names are
# decoded per distinct string position, so a crafted file cannot claim gigabytes.
_MAX_GRID_BYTES = 64 << 20
_I32 = struct.Struct("<i").unpack_from
_U32 = struct.Struct("<I").unpack_from


class ETDumpError(Sme2Error):
    """The file is not a readable ETDump; the message names the file and the problem."""


@dataclass(frozen=True)
class _Table:
    """Field lookup for one flatbuffer table: ``pos`` is the table start, ``fields`` the
    offsets from its vtable (0 = field absent)."""

    pos: int
    fields: tuple[int, ...]


class _Reader:
    """Bounds-checked flatbuffer walker; any out-of-range access raises ETDumpError."""

    def __init__(self, buf: bytes, source: str):
        self.buf = buf
        self.size = len(buf)
        self.source = source
        self._vtables: dict[int, tuple[int, ...]] = {}
        self._strings: dict[int, str] = {}

    def fail(self, what: str) -> ETDumpError:
        return ETDumpError(f"{self.source}: {what}")

    def _check(self, pos: int, n: int) -> None:
        if pos < 0 or pos + n > self.size:
            raise self.fail("truncated or corrupt ETDump (an offset points outside the file)")

    def table(self, pos: int) -> _Table:
        self._check(pos, 4)
        vt = pos - _I32(self.buf, pos)[0]
        fields = self._vtables.get(vt)
        if fields is None:
            self._check(vt, 4)
            vt_size, _ = struct.unpack_from("<HH", self.buf, vt)
            if vt_size < 4 or vt_size % 2:
                raise self.fail("corrupt ETDump (bad flatbuffer vtable)")
            self._check(vt, vt_size)
            fields = struct.unpack_from(f"<{(vt_size - 4) // 2}H", self.buf, vt + 4)
            self._vtables[vt] = fields
        return _Table(pos, fields)

    def _field_pos(self, t: _Table, i: int) -> int:
        if i < len(t.fields) and t.fields[i]:
            return t.pos + t.fields[i]
        return -1

    def ref(self, t: _Table, i: int) -> int:
        """Position of the object an offset field points to, or -1 if absent."""
        p = self._field_pos(t, i)
        if p < 0:
            return -1
        self._check(p, 4)
        return p + _U32(self.buf, p)[0]


    def vector(self, t: _Table, i: int) -> np.ndarray:
        """Positions of the tables in a vector-of-tables field."""
        p = self.ref(t, i)
        if p < 0:
            return np.zeros(0, dtype=np.int64)
        self._check(p, 4)
        n = _U32(self.buf, p)[0]
        self._check(p + 4, 4 * n)
        offsets = np.frombuffer(self.buf, dtype="<u4", count=n, offset=p + 4).astype(np.int64)
        return p + 4 + 4 * np.arange(n, dtype=np.int64) + offsets

    def string(self, t: _Table, i: int) -> str | None:
        p = self.ref(t, i)
        if p < 0:
            return None
        s = self._strings.get(p)
        if s is None:
            self._check(p, 4)
            n = _U32(self.buf, p)[0]
            self._check(p + 4, n)
            try:
                s = self.buf[p + 4 : p + 4 + n].decode("utf-8")
            except UnicodeDecodeError:
                raise self.fail("corrupt ETDump (an event name is not UTF-8)") from None
            self._strings[p] = s
        return s




# Field indices, in schema order (etdump_schema_flatcc.fbs).
_ETDUMP_RUN_DATA = 1
_RUNDATA_NAME, _RUNDATA_EVENTS = 0, 3
_EVENT_PROFILE = 0
(_PE_NAME, _PE_CHAIN, _PE_INSTRUCTION, _PE_DEBUG_INT, _PE_DEBUG_STR, _PE_METADATA, _PE_START,
 _PE_END) = range(8)


def _root(buf: bytes, source: str) -> tuple[_Reader, int]:
    """Find the root table; ETDumps from ExecuTorch are size-prefixed, accept both forms."""
    reader = _Reader(buf, source)
    if len(buf) == 0:
        raise reader.fail("empty file, not an ETDump (did the run crash before writing it?)")
    for base in (4, 0):  # size-prefixed first
        if len(buf) >= base + 8 and buf[base + 4 : base + 8] == FILE_IDENTIFIER:
            if base and _U32(buf, 0)[0] + 4 > len(buf):
                raise reader.fail(f"truncated ETDump ({len(buf)} of {_U32(buf, 0)[0] + 4} "
                                  "bytes; was the run interrupted while writing it?)")
            return reader, base + _U32(buf, base)[0]
    raise reader.fail("not an ETDump (no 'ED00' flatbuffer identifier)")


def read_etdump(path: str | Path) -> pd.DataFrame:
    """Read every profiling event of an ETDump file into a DataFrame (see module doc)."""
    path = Path(path)
    try:
        buf = path.read_bytes()
    except FileNotFoundError:
        raise ETDumpError(f"{path}: no such ETDump file") from None
    except IsADirectoryError:
        raise ETDumpError(f"{path}: is a directory, not an ETDump file") from None
    except OSError as e:
        raise ETDumpError(f"{path}: cannot read ({e.strerror})") from None
    return parse_etdump(buf, source=str(path))


def _unique_rows(grid: np.ndarray, length: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(index of one row per distinct row, which distinct row each row is). Rows are hashed to
    64 bits and the hash is checked against the rows themselves; on a collision the exact (and
    slower) comparison of whole rows is used."""
    h = length.astype(np.uint64)
    cols = grid.astype(np.uint64)
    with np.errstate(over="ignore"):
        for k in range(grid.shape[1]):
            h = h * np.uint64(0x100000001B3) ^ cols[:, k]
    _, first, inverse = np.unique(h, return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    if np.array_equal(grid, grid[first][inverse]) and \
            np.array_equal(length, length[first][inverse]):
        return first, inverse
    keys = np.ascontiguousarray(grid).view(f"V{grid.shape[1] * grid.itemsize}").ravel()
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    return first, inverse.ravel()


class _Gather:
    """Vectorised little-endian reads at many positions at once, bounds-checked as a whole."""

    def __init__(self, reader: _Reader):
        self.reader = reader
        self.bytes = np.frombuffer(reader.buf, dtype=np.uint8)
        self._views: dict[str, np.ndarray] = {}

    def _check(self, pos: np.ndarray, width: int) -> None:
        if pos.size and (pos.min() < 0 or pos.max() + width > self.bytes.size):
            raise self.reader.fail("truncated or corrupt ETDump (an offset points outside "
                                   "the file)")

    def _read(self, pos: np.ndarray, dtype: str) -> np.ndarray:
        """Values of ``dtype`` at byte positions ``pos``. Flatbuffers align scalars to their
        size, so the usual case is one fancy index into a typed view of the file; a file that
        breaks alignment (crafted or corrupt) is read byte by byte instead."""
        width = np.dtype(dtype).itemsize
        self._check(pos, width)
        if pos.size and not (pos % width).any():
            return self._view(dtype)[pos // width]
        return self.bytes[pos[:, None] + np.arange(width)].view(dtype).ravel()

    def _view(self, dtype: str) -> np.ndarray:
        view = self._views.get(dtype)
        if view is None:
            width = np.dtype(dtype).itemsize
            view = np.frombuffer(self.reader.buf, dtype=dtype, count=self.bytes.size // width)
            self._views[dtype] = view
        return view

    def u16(self, pos):
        return self._read(pos, "<u2").astype(np.int64)

    def i32(self, pos):
        return self._read(pos, "<i4").astype(np.int64)

    def u32(self, pos):
        return self._read(pos, "<u4").astype(np.int64)

    def u64(self, pos):
        return self._read(pos, "<u8")

    def field_offsets(self, tables: np.ndarray, fields: list[int]) -> list[np.ndarray]:
        """For each table, the offset of each wanted field (0 when absent), via its vtable."""
        vt = tables - self.i32(tables)
        vt_size = self.u16(vt)
        out = []
        for f in fields:
            slot = 4 + 2 * f
            has = vt_size > slot
            off = np.zeros(tables.size, dtype=np.int64)
            if has.any():
                off[has] = self.u16(vt[has] + slot)
            out.append(off)
        return out

    def _decode(self, raw: bytes) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise self.reader.fail("corrupt ETDump (an event name is not UTF-8)") from None

    def strings(self, field_pos: np.ndarray, present: np.ndarray
                ) -> tuple[np.ndarray, list[str]]:
        """Decode string fields as (codes, strings): ``strings[codes[i]]`` is row i's string,
        code -1 where the field is absent. Each distinct byte string is decoded once (names
        repeat in every run)."""
        codes = np.full(field_pos.size, -1, dtype=np.int64)
        if not present.any():
            return codes, []
        fp = field_pos[present]
        spos = fp + self.u32(fp)
        length = self.u32(spos)
        if (spos + 4 + length).max() > self.bytes.size:
            raise self.reader.fail("truncated or corrupt ETDump (a string runs past the end)")
        width = max(int(length.max()), 1)
        if width > _MAX_GRID_NAME or spos.size * width > max(_MAX_GRID_BYTES,
                                                              4 * self.bytes.size):
            # Absurd names, or many events sharing one long name (a crafted file): decode each
            # string position once; distinct positions hold distinct bytes of the file, so
            # this stays linear in the file size.
            uniq, first, inverse = np.unique(spos, return_index=True, return_inverse=True)
            codes[present] = inverse.ravel()
            return codes, [self._decode(bytes(self.bytes[p + 4:p + 4 + n]))
                           for p, n in zip(uniq.tolist(), length[first].tolist())]
        if not (spos % 4).any() and self.bytes.size % 4 == 0:
            # Strings follow a 4-byte aligned length: gather whole 32-bit words (4x fewer
            # elements) from a typed view; indices past the file are clipped, which only
            # touches bytes past a string's end, and those are cleared.
            words = (width + 3) // 4
            view = self._view("<u4")
            idx = np.minimum((spos // 4 + 1)[:, None] + np.arange(words), view.size - 1)
            grid = view[idx]
            keep = np.clip(length[:, None] - 4 * np.arange(words), 0, 4).astype(np.uint64)
            grid &= ((np.uint64(1) << (np.uint64(8) * keep)) - np.uint64(1)).astype(np.uint32)
        else:
            padded = np.concatenate([self.bytes, np.zeros(width, dtype=np.uint8)])
            grid = padded[(spos + 4)[:, None] + np.arange(width)]
            grid[np.arange(width) >= length[:, None]] = 0
        first, inverse = _unique_rows(grid, length)
        codes[present] = inverse
        return codes, [self._decode(grid[i].tobytes()[:n])
                       for i, n in zip(first.tolist(), length[first].tolist())]


def _event_names(name: tuple[np.ndarray, list[str]], debug: tuple[np.ndarray, list[str]],
                 debug_int: np.ndarray) -> pd.Categorical:
    """One categorical of event names: the ``name`` field, or — XNNPACK leaves it empty and
    puts the operator in the delegate debug string — the debug string, or the integer debug
    id. Categorical because a few hundred names repeat over every run."""
    labels: dict[str, int] = {}

    def ids(strings: list[str]) -> np.ndarray:  # old code -> label id; index -1 -> -1
        return np.array([labels.setdefault(x, len(labels)) for x in strings] + [-1],
                        dtype=np.int64)

    codes = ids(name[1])[name[0]]
    missing = codes == -1
    if "" in labels:
        missing |= codes == labels[""]
    if missing.any():
        idx = np.flatnonzero(missing)
        codes[idx] = ids(debug[1])[debug[0][idx]]
        for k in idx[codes[idx] == -1]:  # rare: no debug string either
            i = int(debug_int[k])
            codes[k] = labels.setdefault(f"delegate_debug_id_{i}" if i != -1 else "<unnamed>",
                                         len(labels))
    return pd.Categorical.from_codes(codes, categories=list(labels)).remove_unused_categories()


def parse_etdump(buf: bytes, source: str = "<bytes>") -> pd.DataFrame:
    reader, root_pos = _root(buf, source)
    root = reader.table(root_pos)
    # The few RunData blocks are walked in Python; their (many) events are read vectorised.
    block_names, positions, block_of = [], [], []
    slots = len(buf) // 4  # each listed event takes a 4-byte slot of its own in the file
    for block, rd_pos in enumerate(reader.vector(root, _ETDUMP_RUN_DATA).tolist()):
        rd = reader.table(rd_pos)
        block_names.append(reader.string(rd, _RUNDATA_NAME) or "")
        evs = reader.vector(rd, _RUNDATA_EVENTS)
        slots -= len(evs)
        if slots < 0:  # blocks share one event list: a crafted file claiming endless events
            raise reader.fail("corrupt ETDump (its blocks list more events than the file "
                              "can hold)")
        positions.append(evs)
        block_of.append(np.full(len(evs), block, dtype=np.int64))
    ev = np.concatenate(positions) if positions else np.zeros(0, dtype=np.int64)
    ev_block = np.concatenate(block_of) if block_of else np.zeros(0, dtype=np.int64)

    g = _Gather(reader)
    (pe_off,) = g.field_offsets(ev, [_EVENT_PROFILE])
    keep = pe_off > 0  # allocation and debug events carry no timing
    ev, ev_block, pe_off = ev[keep], ev_block[keep], pe_off[keep]
    pe = ev + pe_off + g.u32(ev + pe_off)
    name_o, instr_o, dint_o, dstr_o, start_o, end_o = g.field_offsets(
        pe, [_PE_NAME, _PE_INSTRUCTION, _PE_DEBUG_INT, _PE_DEBUG_STR, _PE_START, _PE_END])

    def ints(off, read, default):
        out = np.full(pe.size, default, dtype=np.int64 if default < 0 else np.uint64)
        has = off > 0
        if has.any():
            out[has] = read(pe[has] + off[has])
        return out

    instruction = ints(instr_o, g.i32, -1)
    debug_int = ints(dint_o, g.i32, -1)
    start = ints(start_o, g.u64, 0)
    end = ints(end_o, g.u64, 0)
    delegated = (dstr_o > 0) | (debug_int != -1)
    name = _event_names(g.strings(pe + name_o, name_o > 0), g.strings(pe + dstr_o, dstr_o > 0),
                        debug_int)

    block_codes, block_labels = pd.factorize(np.array(block_names, dtype=object))
    block_name = pd.Categorical.from_codes(block_codes[ev_block] if ev.size else
                                           np.zeros(0, dtype=np.int64), categories=block_labels)
    is_run = np.array([n == "Execute" for n in block_names] + [False], dtype=bool)
    run_of_block = np.where(is_run[:-1], np.cumsum(is_run[:-1]) - 1, -1) if block_names else \
        np.zeros(0, dtype=np.int64)
    seq = (np.arange(ev.size) - np.searchsorted(ev_block, ev_block, side="left")
           if ev.size else np.zeros(0, dtype=np.int64))
    # Built once, in column order: no later insertion or reordering copies the frame.
    return pd.DataFrame({
        "block": ev_block.astype("int32"),
        "block_name": block_name,
        "run": (run_of_block[ev_block] if ev.size else np.zeros(0)).astype("int32"),
        "seq": seq.astype("int32"),
        "name": name,
        "instruction_id": instruction.astype("int32"),
        "delegate_debug_id": debug_int.astype("int32"),
        "delegated": delegated,
        "start": start,
        "end": end,
        "duration_ms": (end.astype(np.int64) - start.astype(np.int64)) / TICKS_PER_MS,
    }, columns=EVENT_COLUMNS)
