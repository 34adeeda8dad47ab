"""Fuzzing the ETDump reader: whatever the bytes, ``parse_etdump`` either returns the events
frame or raises ``ETDumpError`` with one line starting with the source name; and the analysis
of whatever parses raises nothing but ``Sme2Error`` subclasses. No IndexError, ValueError,
MemoryError, no gigabyte allocations, no hangs.

Inputs are crafted programs (the reference writer, ``tests.fakes.etdumps``) and mutations of a
few valid files: every truncation, insertions, uniform buffers and random bytes here; bit flips,
splices, huge length and offset fields and crafted programs in tests/long/ (the harness:
``etdump_fuzzing``). Each fuzz test fails if it tried fewer inputs than planned; the plan adds up
to 7,500+ (``test_inputs_tried`` checks it and prints the count with ``-s``).
"""

from __future__ import annotations

import struct
import tracemalloc

import pytest
from hypothesis import strategies as st

from pytest_sme2.readers import etdump
from pytest_sme2.readers.etdump import ETDumpError, parse_etdump
from tests.faults.etdump_fuzzing import (HEADERS, PLANNED, SOURCE, UNIFORM_FILLS, UNIFORM_SIZES,
                                         base_index, check, fuzz, make_bases, position,
                                         truncation_lengths)


@pytest.fixture(scope="module")
def bases() -> list[bytes]:
    return make_bases()


def test_truncations(bases):
    """Every prefix of every base (exhaustive, not sampled)."""
    tried = 0
    for base in bases:
        for n in truncation_lengths(base):
            check(base[:n])
            tried += 1
    assert tried >= PLANNED["truncations"]


def test_insertions(bases):
    def inserted(i, where, blob):
        data = bytearray(bases[i])
        p = where % (len(data) + 1)
        data[p:p] = blob
        return data

    fuzz("insertions", inserted, i=base_index, where=position,
         blob=st.binary(min_size=1, max_size=64))


def test_uniform_buffers():
    """All-zero and all-0xFF buffers of many sizes, bare or behind an ETDump header."""
    tried = 0
    for fill in UNIFORM_FILLS:
        for head in HEADERS.values():
            for n in UNIFORM_SIZES:
                body = fill * n
                check(head(len(body) + 8) + body)
                tried += 1
    assert tried >= PLANNED["uniform_buffers"]


def test_random_bytes():
    fuzz("random_bytes", lambda head, body: HEADERS[head](len(body) + 8) + body,
         head=st.sampled_from(sorted(HEADERS)), body=st.binary(max_size=1024))


# -- regressions: inputs the fuzzing found or pointed at -------------------------------------------

def shared_tables(n_blocks: int, n_events: int, name_len: int = 8) -> bytes:
    """A hand-built ETDump (no size prefix) whose run_data vector lists ONE RunData n_blocks
    times and whose events vector lists ONE Event n_events times, named ``"x" * name_len``:
    a few kilobytes claiming n_blocks * n_events events. No writer makes such a file."""
    b = bytearray(b"\0\0\0\0ED00")

    def pad(align: int) -> None:
        b.extend(bytes(-len(b) % align))

    def offset_to_here(field: int) -> None:       # uoffset field -> the next object
        struct.pack_into("<I", b, field, len(b) - field)

    vt_root = len(b)
    b += struct.pack("<4H", 8, 8, 0, 4)                          # field 1: run_data
    root = len(b)
    struct.pack_into("<I", b, 0, root)
    b += struct.pack("<iI", root - vt_root, 0)
    offset_to_here(root + 4)
    b += struct.pack("<I", n_blocks)
    block_slots = [len(b) + 4 * k for k in range(n_blocks)]
    b += bytes(4 * n_blocks)
    vt_run = len(b)
    b += struct.pack("<6H", 12, 8, 0, 0, 0, 4)                   # field 3: events
    run = len(b)
    b += struct.pack("<iI", run - vt_run, 0)
    for s in block_slots:
        struct.pack_into("<I", b, s, run - s)
    offset_to_here(run + 4)
    b += struct.pack("<I", n_events)
    event_slots = [len(b) + 4 * k for k in range(n_events)]
    b += bytes(4 * n_events)
    vt_event = len(b)
    b += struct.pack("<3H", 6, 8, 4)                             # field 0: profile_event
    pad(4)
    event = len(b)
    b += struct.pack("<iI", event - vt_event, 0)
    for s in event_slots:
        struct.pack_into("<I", b, s, event - s)
    vt_profile = len(b)
    b += struct.pack("<10H", 24, 24, 4, 0, 0, 0, 0, 0, 8, 16)    # name, start_time, end_time
    pad(8)
    profile = len(b)
    offset_to_here(event + 4)
    b += struct.pack("<iIQQ", profile - vt_profile, 0, 100, 200)
    offset_to_here(profile + 4)
    b += struct.pack("<I", name_len) + b"x" * name_len + b"\0"
    pad(4)
    return bytes(b)


def _parse_measured(data: bytes, monkeypatch) -> tuple:
    """The events, the peak memory of parsing them, and the length of every string decoded."""
    decoded: list[int] = []
    decode = etdump._Gather._decode
    monkeypatch.setattr(etdump._Gather, "_decode",
                        lambda self, raw: decoded.append(len(raw)) or decode(self, raw))
    tracemalloc.start()
    try:
        return parse_etdump(data, source=SOURCE), tracemalloc.get_traced_memory()[1], decoded
    finally:
        tracemalloc.stop()


def test_shared_tables_helper_builds_a_valid_file():
    events = parse_etdump(shared_tables(2, 3, 5))
    assert len(events) == 6 and set(events["name"]) == {"xxxxx"}
    assert events["duration_ms"].tolist() == [0.0001] * 6


def test_blocks_sharing_one_event_list_are_refused_not_multiplied():
    """Regression: a 24 KB file listing one RunData 3,000 times, each with the same 3,000
    events, made 9 million rows (2 GB, 5 s); a 400 KB one would exhaust memory."""
    data = shared_tables(3000, 3000)
    with pytest.raises(ETDumpError) as ei:
        parse_etdump(data, source=SOURCE)
    assert str(ei.value) == (f"{SOURCE}: corrupt ETDump (its blocks list more events than the "
                             "file can hold)")


def test_one_long_name_shared_by_every_event_stays_small(monkeypatch):
    """Regression: 100,000 events pointing at one 4,000-byte name (a 400 KB file) built a
    100,000 x 4,000 names grid: 2.7 GB and 10 s. Now each string position is decoded once."""
    events, peak, decoded = _parse_measured(shared_tables(1, 100_000, 4000), monkeypatch)
    assert len(events) == 100_000 and events["name"].iloc[-1] == "x" * 4000
    assert peak < 100 * 2 ** 20, f"peak {peak / 2 ** 20:.0f} MB"
    assert decoded == [4000]          # once, not once per event


def test_inputs_tried(bases):
    """The plan: the fuzz tests, each failing if it tried fewer inputs than planned, together
    try 7,500+ (the exact count is printed with ``-s``). Needs no other test to have run."""
    plan = {**PLANNED, "truncations": sum(len(truncation_lengths(b)) for b in bases),
            "uniform_buffers": len(UNIFORM_FILLS) * len(HEADERS) * len(UNIFORM_SIZES)}
    assert plan["truncations"] >= PLANNED["truncations"]
    assert plan["uniform_buffers"] >= PLANNED["uniform_buffers"]
    total = sum(plan.values())
    print(f"\nETDump fuzzing: {total} inputs planned ({plan})")
    assert total >= 7500
