"""Fuzzing the ETDump reader: whatever the bytes, ``parse_etdump`` either returns the events
frame or raises ``ETDumpError`` with one line starting with the source name; and the analysis
of whatever parses raises nothing but ``Sme2Error`` subclasses. No IndexError, ValueError,
MemoryError, no gigabyte allocations, no hangs.

Inputs are crafted programs (the reference writer, ``tests.fakes.etdumps``) and mutations of a
few valid files: bit flips, every truncation, insertions, splices of two files, uniform buffers,
huge length and offset fields, random bytes. A full run of this module tries 7,500+ inputs
(``test_inputs_tried`` checks the count and prints it with ``-s``).
"""

from __future__ import annotations

import struct
import time
import tracemalloc
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_sme2.analysis.summary import analyze
from pytest_sme2.errors import Sme2Error
from pytest_sme2.etdump import EVENT_COLUMNS, ETDumpError, parse_etdump
from tests.fakes.etdumps import Ev, execute_run, make_etdump, program_run

SOURCE = "fuzz.etdump"
TRIED: Counter[str] = Counter()        # inputs tried, per fuzz test
# Tests that feed TRIED, and the minimum each tries in a full run (hypothesis may stop early
# only when a strategy is exhausted, which none of these is).
EXPECTED = {"bit_flips": 1500, "truncations": 1000, "insertions": 600, "splices": 600,
            "uniform_buffers": 1200, "huge_fields": 1200, "random_bytes": 500,
            "crafted_programs": 150, "crafted_then_flipped": 150}

FUZZ = settings(deadline=5000, database=None, print_blob=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

OPS = [("Convolution (NHWC, F32) IGEMM #1", 5000), ("Transpose (ND, X32) #1", 2000)]
N_BASES = 5


@pytest.fixture(scope="module")
def bases() -> list[bytes]:
    """Valid files of different shapes, made once (the writer shells out to flatc)."""
    files = [
        make_etdump([execute_run(10_000 * i, OPS) for i in range(3)], extra_events=True),
        make_etdump([program_run(0, [("delegate", 0, [("Add (ND) #1", 100)]),
                                     ("portable", 1, [("add", 50)])])], size_prefixed=False),
        make_etdump([], init_block=True),                                     # zero runs
        make_etdump([[Ev(None, 0, 10), Ev("OPERATOR_CALL", 0, 20)]] * 2),    # no Method::execute
        make_etdump([execute_run(0, [("x" * 5000, 10)]), execute_run(100, [("y", 1)])]),
    ]
    assert len(files) == N_BASES
    for f in files:  # every base is valid: the mutations start from a file the reader accepts
        parse_etdump(f)
    return files


def check(data: bytes, test: str) -> None:
    """The promise for one input."""
    TRIED[test] += 1
    try:
        events = parse_etdump(bytes(data), source=SOURCE)
    except ETDumpError as e:
        msg = str(e)
        assert msg.startswith(SOURCE + ": ") and "\n" not in msg, msg
        return
    assert list(events.columns) == EVENT_COLUMNS
    try:
        analyze(events, warmup=0, source=SOURCE)
    except Sme2Error as e:
        assert str(e).startswith(SOURCE + ": ") and "\n" not in str(e), str(e)


def _at(base: bytes, where: int) -> int:
    return where % max(len(base), 1)


base_index = st.integers(0, N_BASES - 1)
position = st.integers(0, 1 << 20)


@pytest.mark.slow
@settings(FUZZ, max_examples=EXPECTED["bit_flips"])
@given(i=base_index, flips=st.lists(st.tuples(position, st.integers(0, 7)), min_size=1,
                                     max_size=16))
def test_bit_flips(bases, i, flips):
    data = bytearray(bases[i])
    for where, bit in flips:
        data[_at(data, where)] ^= 1 << bit
    check(data, "bit_flips")


def test_truncations(bases):
    """Every prefix of every base (exhaustive, not sampled)."""
    for base in bases:
        step = max(1, len(base) // 400)
        for n in sorted(set(range(0, len(base), step)) | set(range(min(64, len(base))))):
            check(base[:n], "truncations")


@settings(FUZZ, max_examples=EXPECTED["insertions"])
@given(i=base_index, where=position, blob=st.binary(min_size=1, max_size=64))
def test_insertions(bases, i, where, blob):
    data = bytearray(bases[i])
    p = where % (len(data) + 1)
    data[p:p] = blob
    check(data, "insertions")


@pytest.mark.slow
@settings(FUZZ, max_examples=EXPECTED["splices"])
@given(i=base_index, j=base_index, a=position, b=position)
def test_splices(bases, i, j, a, b):
    """The head of one valid file glued to the tail of another."""
    x, y = bases[i], bases[j]
    check(x[:_at(x, a)] + y[_at(y, b):], "splices")


HEADERS = {"none": lambda n: b"", "ident": lambda n: b"\0\0\0\0ED00",
           "prefixed": lambda n: struct.pack("<I", n) + b"\x08\0\0\0ED00"}


def test_uniform_buffers():
    """All-zero and all-0xFF buffers of many sizes, bare or behind an ETDump header."""
    for fill in (b"\0", b"\xff"):
        for head in HEADERS.values():
            for n in range(200):
                body = fill * n
                check(head(len(body) + 8) + body, "uniform_buffers")


HUGE = [0xFFFFFFFF, 0xFFFFFFFE, 0x80000000, 0x7FFFFFFF, 0x40000000, 0x10000000, 1 << 20]


@pytest.mark.slow
@settings(FUZZ, max_examples=EXPECTED["huge_fields"])
@given(i=base_index, where=position, value=st.sampled_from(HUGE) | st.integers(0, 1 << 32),
       width=st.sampled_from([2, 4, 8]), aligned=st.booleans())
def test_huge_fields(bases, i, where, value, width, aligned):
    """A length, offset or vtable size replaced by a huge (or any) number."""
    data = bytearray(bases[i])
    p = _at(data[: len(data) - width + 1], where)
    if aligned:
        p -= p % width
    fmt = {2: "<H", 4: "<I", 8: "<Q"}[width]
    struct.pack_into(fmt, data, p, value % (1 << (8 * width)))
    check(data, "huge_fields")


@settings(FUZZ, max_examples=EXPECTED["random_bytes"])
@given(head=st.sampled_from(sorted(HEADERS)), body=st.binary(max_size=1024))
def test_random_bytes(head, body):
    check(HEADERS[head](len(body) + 8) + body, "random_bytes")


NAMES = ["Convolution (NHWC, F32) IGEMM", "Fully Connected (NC, PF16)", "Add (ND)", "", "é ü",
         "x" * 300]
calls = st.lists(st.tuples(st.sampled_from(["delegate", "portable"]),
                           st.lists(st.tuples(st.sampled_from(NAMES), st.integers(0, 1 << 40)),
                                    min_size=1, max_size=3)), min_size=0, max_size=4)


@st.composite
def programs(draw) -> bytes:
    """A valid file of any shape the writer allows: 0-4 runs, odd names, huge times, runs
    without Method::execute, allocation events, either framing."""
    runs = []
    for _ in range(draw(st.integers(0, 4))):
        body = [(kind, k, ops if kind == "delegate" else ops[:1])
                for k, (kind, ops) in enumerate(draw(calls))]
        events = program_run(draw(st.integers(0, 1 << 50)), body,
                             framework_ns=draw(st.integers(0, 1000)))
        if draw(st.booleans()):
            events = [e for e in events if e.name != "Method::execute"]
        runs.append(events)
    return make_etdump(runs, init_block=draw(st.booleans()),
                       size_prefixed=draw(st.booleans()), extra_events=draw(st.booleans()))


@pytest.mark.slow
@settings(FUZZ, max_examples=EXPECTED["crafted_programs"])
@given(data=programs())
def test_crafted_programs(data):
    check(data, "crafted_programs")


@pytest.mark.slow
@settings(FUZZ, max_examples=EXPECTED["crafted_then_flipped"])
@given(data=programs(), flips=st.lists(st.tuples(position, st.integers(0, 7)), min_size=1,
                                        max_size=4))
def test_crafted_then_flipped(data, flips):
    data = bytearray(data)
    for where, bit in flips:
        data[_at(data, where)] ^= 1 << bit
    check(data, "crafted_then_flipped")


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


def _parse_measured(data: bytes):
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        return parse_etdump(data, source=SOURCE), time.perf_counter() - t0, \
            tracemalloc.get_traced_memory()[1]
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


def test_one_long_name_shared_by_every_event_stays_small():
    """Regression: 100,000 events pointing at one 4,000-byte name (a 400 KB file) built a
    100,000 x 4,000 names grid: 2.7 GB and 10 s. Now each string position is decoded once."""
    events, seconds, peak = _parse_measured(shared_tables(1, 100_000, 4000))
    assert len(events) == 100_000 and events["name"].iloc[-1] == "x" * 4000
    assert peak < 100 * 2 ** 20, f"peak {peak / 2 ** 20:.0f} MB"
    assert seconds < 5


def test_inputs_tried():
    """The fuzz tests above ran and tried at least their planned number of inputs: 7,500+ in
    a full run of this module (the exact count is printed with ``-s``)."""
    ran = {name for name in EXPECTED if TRIED[name]}
    if ran != set(EXPECTED):
        pytest.skip(f"only part of the fuzzing ran ({', '.join(sorted(ran)) or 'none'})")
    short = {name: TRIED[name] for name in EXPECTED if TRIED[name] < EXPECTED[name]}
    assert not short, f"fewer inputs than planned: {short}"
    total = sum(TRIED.values())
    print(f"\nETDump fuzzing: {total} inputs tried ({dict(TRIED)})")
    assert total >= 7500
