"""The .pte metadata reader (no torch): methods, input kinds, dtypes and shapes; one line for a
file that is missing, not a program, or without forward."""

from __future__ import annotations

import pytest

from pytest_sme2.readers.pte_program import PteProgramError, forward_signature, read_signatures
from tests.fakes.pte_programs import write_program


def test_reads_tensor_and_scalar_inputs(tmp_path):
    pte = write_program(tmp_path / "m.pte", {"forward": [("tensor", 6, [1, 3, 8, 8]),
                                                         ("tensor", 4, [1, 7]), ("int", 5)]})
    sig = forward_signature(pte)
    assert [(i.kind, i.dtype, i.shape) for i in sig.inputs] == [
        ("Tensor", "float32", (1, 3, 8, 8)), ("Tensor", "int64", (1, 7)), ("Int", None, ())]
    assert sig.inputs[2].value == 5


def test_several_methods(tmp_path):
    pte = write_program(tmp_path / "m.pte", {"encode": [], "forward": [("tensor", 5, [2])]})
    assert sorted(read_signatures(pte)) == ["encode", "forward"]
    assert forward_signature(pte).inputs[0].dtype == "float16"


def test_no_forward_is_one_line(tmp_path):
    pte = write_program(tmp_path / "m.pte", {"encode": [("tensor", 6, [1])]})
    with pytest.raises(PteProgramError, match=r"no 'forward' method \(its methods: encode\)"):
        forward_signature(pte)


def test_not_a_program(tmp_path):
    (tmp_path / "x.pte").write_bytes(b"hello world, not flatbuffers")
    with pytest.raises(PteProgramError, match="not an ExecuTorch program"):
        read_signatures(tmp_path / "x.pte")


def test_missing_file(tmp_path):
    with pytest.raises(PteProgramError, match="no such file"):
        read_signatures(tmp_path / "gone.pte")
