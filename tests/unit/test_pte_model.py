"""A user's .pte as a model: seeded inputs from forward's metadata, a user's inputs file, the
content hash as key, the .etrecord beside it, one line for each input we cannot make."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_sme2.export import ExportError, export_model
from pytest_sme2.pte_model import ETRECORD_MISSING, import_pte, user_inputs_file
from pytest_sme2.tensorfile import read_tensors, write_tensors
from tests.fakes.pte_programs import write_program

IMAGE = ("tensor", 6, [1, 3, 8, 8])


def test_inputs_from_metadata_are_seeded(tmp_path):
    pte = write_program(tmp_path / "m.pte", {"forward": [IMAGE, ("tensor", 4, [1, 5]),
                                                         ("tensor", 11, [2])]})
    a = import_pte(pte, tmp_path / "cache")
    first = read_tensors(a.inputs)
    assert [(t.dtype.name, t.shape) for t in first] == [
        ("float32", (1, 3, 8, 8)), ("int64", (1, 5)), ("bool", (2,))]
    assert first[1].min() >= 0 and first[1].max() < 4
    (a.folder / "meta.json").unlink()          # made again: the same numbers
    again = read_tensors(import_pte(pte, tmp_path / "cache").inputs)
    assert all(np.array_equal(x, y) for x, y in zip(first, again))
    assert a.dtype == "pte" and a.pte == pte and a.meta["pte_sha256"].startswith(a.key)


def test_content_hash_is_the_key(tmp_path):
    pte = write_program(tmp_path / "m.pte", {"forward": [IMAGE]})
    before = import_pte(pte, tmp_path / "cache").key
    write_program(pte, {"forward": [("tensor", 6, [1, 3, 16, 16])]})
    after = import_pte(pte, tmp_path / "cache")
    assert after.key != before
    assert read_tensors(after.inputs)[0].shape == (1, 3, 16, 16)


def test_etrecord_beside_is_used_else_the_report_says_what_is_missing(tmp_path):
    pte = write_program(tmp_path / "m.pte", {"forward": [IMAGE]})
    bare = import_pte(pte, tmp_path / "cache")
    assert not bare.has_etrecord and bare.meta["etrecord_missing"] == ETRECORD_MISSING
    (tmp_path / "m.etrecord").write_bytes(b"zip")
    with_record = import_pte(pte, tmp_path / "cache")
    assert with_record.etrecord == tmp_path / "m.etrecord" and with_record.has_etrecord
    assert with_record.meta["etrecord_missing"] is None


def test_a_users_inputs_file_wins(tmp_path):
    pte = write_program(tmp_path / "m.pte", {"forward": [IMAGE]})
    import_pte(pte, tmp_path / "cache")
    mine = np.full((1, 3, 8, 8), 7, dtype=np.float32)
    write_tensors(user_inputs_file(pte), [mine])
    got = import_pte(pte, tmp_path / "cache")
    assert np.array_equal(read_tensors(got.inputs)[0], mine)
    assert got.meta["inputs_from"] == str(user_inputs_file(pte))


def test_export_model_takes_a_pte_as_it_is(tmp_path):
    pte = write_program(tmp_path / "m.pte", {"forward": [IMAGE]})
    got = export_model(str(pte), "fp16", tmp_path / "cache")
    assert got.pte == pte and got.dtype == "pte"


@pytest.mark.parametrize("methods, line", [
    ({"forward": [IMAGE, ("int", 3)]},
     r"cannot make forward's input 1 \(Int\): our runners pass tensors only; export forward "
     "with tensor inputs only"),
    ({"forward": [("tensor", 15, [4])]},
     r"cannot make forward's input 0 \(Tensor ScalarType 15 \[4\]\): its dtype has no "
     r"tensor-file form; pass your inputs as m.inputs.bin"),
    ({"encode": [IMAGE]}, r"no 'forward' method \(its methods: encode\)"),
])
def test_inputs_we_cannot_make_are_one_line(tmp_path, methods, line):
    pte = write_program(tmp_path / "m.pte", methods)
    with pytest.raises(ExportError, match=line) as e:
        import_pte(pte, tmp_path / "cache")
    assert "\n" not in str(e.value)


def test_missing_file_is_one_line(tmp_path):
    with pytest.raises(ExportError, match=r"gone.pte: no such .pte file$"):
        import_pte(tmp_path / "gone.pte", tmp_path / "cache")
