"""Read an ETDump flatbuffer straight into a pandas DataFrame.

The schema (``etdump_schema_flatcc.fbs`` in the executorch package) is small and stable, so we
walk the flatbuffer ourselves with ``struct``: no torch, no executorch, no flatc round trip.
ExecuTorch's Inspector takes seconds per thousand runs; this takes a fraction of that.

One row per profiling event occurrence. Columns (the one events schema the analysis reads):

=================  ===========================================================================
``block``          index of the RunData block in the file
``block_name``     its name: ``Default`` (load/init) or ``Execute`` (one per ``forward()``)
``run``            index among ``Execute`` blocks (0-based), -1 for other blocks
``seq``            order of the event within its block
``name``           event name; for delegate events the delegate's debug id string (XNNPACK
                   puts the operator name there and leaves ``name`` empty)
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

_U16 = struct.Struct("<H").unpack_from
_I32 = struct.Struct("<i").unpack_from
_U32 = struct.Struct("<I").unpack_from
_U64 = struct.Struct("<Q").unpack_from


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

    def sub_table(self, t: _Table, i: int) -> _Table | None:
        p = self.ref(t, i)
        return None if p < 0 else self.table(p)

    def vector(self, t: _Table, i: int) -> list[int]:
        """Positions of the tables in a vector-of-tables field."""
        p = self.ref(t, i)
        if p < 0:
            return []
        self._check(p, 4)
        n = _U32(self.buf, p)[0]
        self._check(p + 4, 4 * n)
        elems = struct.unpack_from(f"<{n}I", self.buf, p + 4)
        return [p + 4 + 4 * k + off for k, off in enumerate(elems)]

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

    def int_field(self, t: _Table, i: int, fmt: struct.Struct, default: int) -> int:
        p = self._field_pos(t, i)
        if p < 0:
            return default
        self._check(p, fmt.size)
        return fmt.unpack_from(self.buf, p)[0]


_I32S = struct.Struct("<i")
_U64S = struct.Struct("<Q")

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


def parse_etdump(buf: bytes, source: str = "<bytes>") -> pd.DataFrame:
    reader, root_pos = _root(buf, source)
    root = reader.table(root_pos)
    cols: dict[str, list] = {c: [] for c in EVENT_COLUMNS if c != "duration_ms"}
    run = 0
    for block, rd_pos in enumerate(reader.vector(root, _ETDUMP_RUN_DATA)):
        rd = reader.table(rd_pos)
        block_name = reader.string(rd, _RUNDATA_NAME) or ""
        is_run = block_name == "Execute"
        seq = 0
        for ev_pos in reader.vector(rd, _RUNDATA_EVENTS):
            pe = reader.sub_table(reader.table(ev_pos), _EVENT_PROFILE)
            if pe is None:  # allocation or debug event: not timing
                continue
            debug_str = reader.string(pe, _PE_DEBUG_STR)
            debug_int = reader.int_field(pe, _PE_DEBUG_INT, _I32S, -1)
            name = reader.string(pe, _PE_NAME)
            delegated = debug_str is not None or debug_int != -1
            if not name:
                name = debug_str if debug_str is not None else (
                    f"delegate_debug_id_{debug_int}" if debug_int != -1 else "<unnamed>")
            cols["block"].append(block)
            cols["block_name"].append(block_name)
            cols["run"].append(run if is_run else -1)
            cols["seq"].append(seq)
            cols["name"].append(name)
            cols["instruction_id"].append(reader.int_field(pe, _PE_INSTRUCTION, _I32S, -1))
            cols["delegate_debug_id"].append(debug_int)
            cols["delegated"].append(delegated)
            cols["start"].append(reader.int_field(pe, _PE_START, _U64S, 0))
            cols["end"].append(reader.int_field(pe, _PE_END, _U64S, 0))
            seq += 1
        if is_run:
            run += 1
    df = pd.DataFrame(cols)
    df = df.astype({"block": "int32", "run": "int32", "seq": "int32", "instruction_id": "int32",
                    "delegate_debug_id": "int32", "delegated": "bool",
                    "start": "uint64", "end": "uint64"})
    df["duration_ms"] = (df["end"].astype("int64") - df["start"].astype("int64")) / TICKS_PER_MS
    return df[EVENT_COLUMNS]
