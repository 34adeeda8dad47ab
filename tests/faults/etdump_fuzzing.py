"""Fuzzing the ETDump reader, the harness: the promise for one input (``check``), the valid files
mutated (``make_bases``), the strategies, and ``fuzz``, which runs a planned number of inputs
and fails if fewer were tried. The tests: tests/faults/test_fuzz_etdump.py (the fast tier) and
tests/long/test_fuzz_etdump_long.py (the long runs)."""

from __future__ import annotations

import struct
from typing import Callable

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_sme2.analysis.summary import analyze
from pytest_sme2.errors import Sme2Error
from pytest_sme2.readers.etdump import EVENT_COLUMNS, ETDumpError, parse_etdump
from tests.fakes.etdumps import Ev, execute_run, make_etdump, program_run

SOURCE = "fuzz.etdump"
# Inputs each fuzz test tries, at least (hypothesis may stop early only when a strategy is
# exhausted, which none of these is; truncations and uniform buffers are exhaustive loops).
PLANNED = {"bit_flips": 1500, "truncations": 1000, "insertions": 600, "splices": 600,
           "uniform_buffers": 1200, "huge_fields": 1200, "random_bytes": 500,
           "crafted_programs": 150, "crafted_then_flipped": 150}

FUZZ = settings(deadline=5000, database=None, print_blob=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

OPS = [("Convolution (NHWC, F32) IGEMM #1", 5000), ("Transpose (ND, X32) #1", 2000)]
N_BASES = 5


def make_bases() -> list[bytes]:
    """Valid files of different shapes (the writer shells out to flatc: make them once)."""
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


def check(data: bytes) -> None:
    """The promise for one input."""
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


def fuzz(name: str, make: Callable[..., bytes], **strategies) -> int:
    """Hypothesis draws ``PLANNED[name]`` inputs from ``strategies``; ``make`` turns each draw
    into bytes that must keep the promise. Fails if fewer inputs were tried than planned;
    returns how many were."""
    tried = 0

    @settings(FUZZ, max_examples=PLANNED[name])
    @given(**strategies)
    def one(**drawn):
        nonlocal tried
        tried += 1
        check(make(**drawn))

    one()
    assert tried >= PLANNED[name], f"{name}: {tried} inputs tried, {PLANNED[name]} planned"
    return tried


def truncation_lengths(base: bytes) -> list[int]:
    """The prefixes of ``base`` tried: every one of the first 64 bytes, then ~400 steps."""
    step = max(1, len(base) // 400)
    return sorted(set(range(0, len(base), step)) | set(range(min(64, len(base)))))


UNIFORM_SIZES = range(200)
UNIFORM_FILLS = (b"\0", b"\xff")


def at(base: bytes, where: int) -> int:
    return where % max(len(base), 1)


def flipped(base: bytes, flips: list[tuple[int, int]]) -> bytearray:
    data = bytearray(base)
    for where, bit in flips:
        data[at(data, where)] ^= 1 << bit
    return data


base_index = st.integers(0, N_BASES - 1)
position = st.integers(0, 1 << 20)

HEADERS = {"none": lambda n: b"", "ident": lambda n: b"\0\0\0\0ED00",
           "prefixed": lambda n: struct.pack("<I", n) + b"\x08\0\0\0ED00"}
HUGE = [0xFFFFFFFF, 0xFFFFFFFE, 0x80000000, 0x7FFFFFFF, 0x40000000, 0x10000000, 1 << 20]
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
