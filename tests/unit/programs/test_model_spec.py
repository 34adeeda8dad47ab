"""Model names: .pte files, library specs and registered names; the matrix and its ids."""

from __future__ import annotations

import pytest

from pytest_sme2.errors import Sme2Error
from pytest_sme2.measure.matrix import Case, build_matrix
from pytest_sme2.programs.spec import LibrarySpec, is_library, is_pte, matrix_models, model_label


def test_kinds_by_shape():
    assert is_pte("a/b/m.pte") and is_pte("M.PTE") and not is_pte("toy_cnn")
    assert is_library("transformers:MobileViTModel") and not is_library("toy_cnn")
    assert model_label("/x/y/m.pte") == "m.pte" and model_label("toy_cnn") == "toy_cnn"


def test_library_spec_overrides():
    spec = LibrarySpec.parse("transformers:MobileViTModel?image_size=128&num_channels=3")
    assert spec == LibrarySpec("transformers", "MobileViTModel",
                               (("image_size", "128"), ("num_channels", "3")))


@pytest.mark.parametrize("text, line", [
    ("transformers:", "write library:ClassName"),
    ("transformers:X?image_size", "override 'image_size' is not key=value"),
])
def test_bad_library_spec_is_one_line(text, line):
    with pytest.raises(Sme2Error, match=line):
        LibrarySpec.parse(text)


def test_a_pte_has_no_dtype_axis_and_a_short_id(tmp_path):
    cases = build_matrix([str(tmp_path / "m.pte"), "toy_cnn"], ["fp32", "int8"], (1,))
    assert [c.id for c in cases] == ["m.pte-t1", "toy_cnn-fp32-t1", "toy_cnn-int8-t1"]
    assert Case("transformers:MobileViTModel", "fp16", 2).id == \
        "transformers:MobileViTModel-fp16-t2"


def test_missing_pte_is_not_checked_at_collection(tmp_path):
    # Its own benchmarks fail with one line; the others go on.
    assert build_matrix([str(tmp_path / "gone.pte")], ["fp32"], (1,))[0].model.endswith("gone.pte")


def test_matrix_models_resolve_paths_and_globs(tmp_path):
    (tmp_path / "exported").mkdir()
    for name in ("b.pte", "a.pte", "notes.txt"):
        (tmp_path / "exported" / name).write_bytes(b"")
    got = matrix_models(["toy_cnn", "exported/a.pte"], ["exported/*.pte"], tmp_path, tmp_path)
    assert got == ("toy_cnn", str(tmp_path / "exported/a.pte"), str(tmp_path / "exported/b.pte"))


def test_a_glob_matching_nothing_is_one_line(tmp_path):
    with pytest.raises(Sme2Error, match=r"--sme2-pte: 'none/\*.pte' matches no file"):
        matrix_models([], ["none/*.pte"], tmp_path, tmp_path)


def test_a_list_override_keeps_its_commas_in_a_model_list():
    from pytest_sme2._util.text import split_list

    spec = "transformers:MobileViTModel?image_size=64&hidden_sizes=[32,32,32]"
    assert split_list(f"toy_cnn, {spec},\nm.pte") == ["toy_cnn", spec, "m.pte"]
    assert LibrarySpec.parse(split_list(spec)[0]).overrides == (
        ("image_size", "64"), ("hidden_sizes", "[32,32,32]"))
    assert split_list("1,2") == ["1", "2"] and split_list("a],b") == ["a]", "b"]
