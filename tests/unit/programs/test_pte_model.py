"""A user's .pte as a model: seeded inputs from forward's metadata, a user's inputs file, the
content hash as key, the .etrecord beside it, one line for each input we cannot make."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_sme2.programs.export import ExportError, export_model
from pytest_sme2.programs.pte import (ETRECORD_MISSING, import_pte, user_inputs_file,
                                   user_inputs_hook)
from pytest_sme2.readers.tensorfile import read_tensors, write_tensors
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


HOOK = """
import numpy as np

def make_inputs(signature):
    item = signature.inputs[0]
    return [np.full(item.shape, {value}, dtype=item.dtype)]
"""


def test_a_users_inputs_hook_makes_the_inputs(tmp_path):
    pte = write_program(tmp_path / "m.pte", {"forward": [IMAGE]})
    generated = read_tensors(import_pte(pte, tmp_path / "cache").inputs)[0]
    user_inputs_hook(pte).write_text(HOOK.format(value=3))
    got = import_pte(pte, tmp_path / "cache")
    assert np.array_equal(read_tensors(got.inputs)[0], np.full((1, 3, 8, 8), 3, np.float32))
    assert not np.array_equal(generated, read_tensors(got.inputs)[0])
    assert got.meta["inputs_from"] == f"{user_inputs_hook(pte)}:make_inputs"
    # A changed hook makes them again; a removed one gives the generated inputs back.
    user_inputs_hook(pte).write_text(HOOK.format(value=5))
    assert read_tensors(import_pte(pte, tmp_path / "cache").inputs)[0].max() == 5
    user_inputs_hook(pte).unlink()
    assert np.array_equal(read_tensors(import_pte(pte, tmp_path / "cache").inputs)[0], generated)


def test_a_hook_may_return_torch_tensors_and_import_its_neighbours(tmp_path):
    pte = write_program(tmp_path / "m.pte", {"forward": [IMAGE, ("tensor", 4, [1, 5])]})
    (tmp_path / "my_inputs_lib.py").write_text("SCALE = 2.0\n")
    user_inputs_hook(pte).write_text(
        "import torch\nfrom my_inputs_lib import SCALE\n\n"
        "def make_inputs(signature):\n"
        "    return (torch.ones(1, 3, 8, 8) * SCALE, torch.arange(5).reshape(1, 5))\n")
    image, ids = read_tensors(import_pte(pte, tmp_path / "cache").inputs)
    assert image.dtype == np.float32 and float(image.max()) == 2.0
    assert ids.dtype == np.int64 and ids.tolist() == [[0, 1, 2, 3, 4]]


@pytest.mark.parametrize("body, line", [
    ("def make_inputs(signature):\n    return [np.zeros((1, 3, 8, 8), np.float64)]",
     r"m.inputs.py:make_inputs: input 0 is float64 \[1, 3, 8, 8\]; forward expects float32 "
     r"\[1, 3, 8, 8\]$"),
    ("def make_inputs(signature):\n    return [np.zeros((1, 3, 4, 4), np.float32)]",
     r"m.inputs.py:make_inputs: input 0 is float32 \[1, 3, 4, 4\]; forward expects float32 "
     r"\[1, 3, 8, 8\]$"),
    ("def make_inputs(signature):\n    return []",
     r"m.inputs.py:make_inputs: gives 0 input\(s\), forward takes 1: input 0 \(Tensor float32 "
     r"\[1, 3, 8, 8\]\)$"),
    ("def make_inputs(signature):\n    return [[1.0, 2.0]]",
     r"m.inputs.py:make_inputs: input 0 is a list; return numpy arrays or torch tensors"),
    ("def make_inputs(signature):\n    raise ValueError('no camera')",
     r"m.inputs.py:make_inputs failed: ValueError: no camera$"),
    ("def make_input(signature):\n    return []",
     r"m.inputs.py: defines no make_inputs\(signature\) function$"),
    ("import not_a_module_anywhere",
     r"m.inputs.py:make_inputs failed: ModuleNotFoundError: No module named "
     r"'not_a_module_anywhere'$"),
])
def test_a_wrong_hook_is_one_line_naming_the_file_input_and_expectation(tmp_path, body, line):
    pte = write_program(tmp_path / "m.pte", {"forward": [IMAGE]})
    user_inputs_hook(pte).write_text("import numpy as np\n\n" + body + "\n")
    with pytest.raises(ExportError, match=line) as e:
        import_pte(pte, tmp_path / "cache")
    assert "\n" not in str(e.value) and str(user_inputs_hook(pte)) in str(e.value)


def test_a_users_inputs_file_is_checked_against_forward_too(tmp_path):
    pte = write_program(tmp_path / "m.pte", {"forward": [IMAGE]})
    write_tensors(user_inputs_file(pte), [np.zeros((1, 3, 8, 8), np.float16)])
    with pytest.raises(ExportError, match=r"m.inputs.bin: input 0 is float16 \[1, 3, 8, 8\]; "
                                          r"forward expects float32 \[1, 3, 8, 8\]$"):
        import_pte(pte, tmp_path / "cache")


def test_an_inputs_file_and_a_hook_together_are_one_line(tmp_path):
    pte = write_program(tmp_path / "m.pte", {"forward": [IMAGE]})
    write_tensors(user_inputs_file(pte), [np.zeros((1, 3, 8, 8), np.float32)])
    user_inputs_hook(pte).write_text(HOOK.format(value=1))
    with pytest.raises(ExportError, match=r"both m.inputs.bin and m.inputs.py lie beside it; "
                                          r"keep one"):
        import_pte(pte, tmp_path / "cache")


def test_dynamic_inputs_take_sizes_up_to_their_bounds():
    from pytest_sme2.programs.pte import check_inputs
    from pytest_sme2.readers.pte_program import MethodInput, MethodSignature

    sig = MethodSignature("forward", (MethodInput(0, "Tensor", "float32", 6, (1, 128), True),))
    check_inputs([np.zeros((1, 64), np.float32)], sig, "hook")     # within the bound: fine
    with pytest.raises(ExportError, match=r"hook: input 0 is float32 \[1, 200\]; forward "
                                          r"expects float32 \[1, 128\] \(dynamic: sizes up to"):
        check_inputs([np.zeros((1, 200), np.float32)], sig, "hook")


def test_an_input_of_a_dtype_numpy_lacks_is_left_to_the_runtime_but_its_shape_is_checked():
    from pytest_sme2.programs.pte import check_inputs
    from pytest_sme2.readers.pte_program import MethodInput, MethodSignature

    sig = MethodSignature("forward", (MethodInput(0, "Tensor", None, 15, (4,)),))   # bfloat16
    check_inputs([np.zeros(4, np.uint16)], sig, "m.inputs.bin")
    with pytest.raises(ExportError, match=r"input 0 is uint16 \[5\]; forward expects "
                                          r"ScalarType 15 \[4\]$"):
        check_inputs([np.zeros(5, np.uint16)], sig, "m.inputs.bin")
