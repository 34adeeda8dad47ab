"""Fuzzing the ETDump reader, the long runs (the promise and the fast runs:
tests/faults/test_fuzz_etdump.py; the harness: tests/faults/etdump_fuzzing.py): bit flips,
splices of two valid files, huge length/offset/vtable fields, crafted programs plain and
bit-flipped. Each fails if it tried fewer inputs than planned."""

from __future__ import annotations

import struct

import pytest
from hypothesis import strategies as st

from tests.faults.etdump_fuzzing import (HUGE, at, base_index, flipped, fuzz, make_bases,
                                         position, programs)


@pytest.fixture(scope="module")
def bases() -> list[bytes]:
    return make_bases()


def test_bit_flips(bases):
    fuzz("bit_flips", lambda i, flips: flipped(bases[i], flips), i=base_index,
         flips=st.lists(st.tuples(position, st.integers(0, 7)), min_size=1, max_size=16))


def test_splices(bases):
    """The head of one valid file glued to the tail of another."""
    def spliced(i, j, a, b):
        x, y = bases[i], bases[j]
        return x[:at(x, a)] + y[at(y, b):]

    fuzz("splices", spliced, i=base_index, j=base_index, a=position, b=position)


def test_huge_fields(bases):
    """A length, offset or vtable size replaced by a huge (or any) number."""
    def huge(i, where, value, width, aligned):
        data = bytearray(bases[i])
        p = at(data[: len(data) - width + 1], where)
        if aligned:
            p -= p % width
        fmt = {2: "<H", 4: "<I", 8: "<Q"}[width]
        struct.pack_into(fmt, data, p, value % (1 << (8 * width)))
        return data

    fuzz("huge_fields", huge, i=base_index, where=position,
         value=st.sampled_from(HUGE) | st.integers(0, 1 << 32),
         width=st.sampled_from([2, 4, 8]), aligned=st.booleans())


def test_crafted_programs():
    fuzz("crafted_programs", lambda data: data, data=programs())


def test_crafted_then_flipped():
    fuzz("crafted_then_flipped", flipped, base=programs(),
         flips=st.lists(st.tuples(position, st.integers(0, 7)), min_size=1, max_size=4))
