"""A program's weights in a .ptd: which file beside a .pte is its data file, the header check,
the one-line wordings of the runtime's refusals, the ``?weights=ptd`` export choice, the
identity that covers both files, and each runner's data-file argument."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_sme2.errors import Sme2Error
from pytest_sme2.programs.export import cache_key
from pytest_sme2.programs.pte import content_hash
from pytest_sme2.programs.registry import get_model
from pytest_sme2.programs.spec import split_weights
from pytest_sme2._util.fsutil import file_sha256
from pytest_sme2.readers.pte_data import (DataFileError, check_data_file, data_file_beside,
                                          data_problem, program_digest)
from pytest_sme2.runners.base import RunRequest
from pytest_sme2.runners.binary import BinaryRunner
from pytest_sme2.runners.native.runner import NativeRunner
from pytest_sme2.runners.python import PythonRunner

FLAT_TENSOR = b"\x44\0\0\0FT01FH01" + b"\0" * 32


def _pair(tmp_path: Path, *names: str) -> Path:
    pte = tmp_path / "m.pte"
    pte.write_bytes(b"\0\0\0\0ET12")
    for name in names:
        (tmp_path / name).write_bytes(FLAT_TENSOR + name.encode())
    return pte


def test_its_own_ptd_comes_before_the_shared_model_ptd(tmp_path):
    assert data_file_beside(_pair(tmp_path)) is None
    assert data_file_beside(_pair(tmp_path, "model.ptd")) == tmp_path / "model.ptd"
    assert data_file_beside(_pair(tmp_path, "m.ptd")) == tmp_path / "m.ptd"


def test_a_file_without_the_flat_tensor_identifier_is_one_line(tmp_path):
    pte = _pair(tmp_path, "m.ptd")
    check_data_file(tmp_path / "m.ptd", pte)
    (tmp_path / "m.ptd").write_bytes(b"\0\0\0\0ET12 a program, not data")
    with pytest.raises(DataFileError) as e:
        check_data_file(tmp_path / "m.ptd", pte)
    assert str(e.value) == (f"{tmp_path / 'm.ptd'}: not an ExecuTorch data file (no 'FT01' "
                            "identifier in its header); put the .ptd exported with m.pte "
                            "beside it")


def test_the_runtime_refusals_read_as_what_to_do():
    missing = data_problem("/x/m.pte", None, "[method.cpp:353] external_data_map is null\n")
    assert missing == ("/x/m.pte: its weights live in a separate .ptd data file and none was "
                       "found; put the .ptd exported with it beside it as m.ptd or model.ptd")
    assert "as model.ptd;" not in data_problem("/x/model.pte", None, "external_data_map is null")
    assert data_problem("/x/model.pte", None, "external_data_map is null").endswith(
        "beside it as model.ptd")
    for log in ("[method.cpp:398] Failed to get metadata for key stem.1.w\n",
                "[XNNCompiler.cpp:258] Failed to get constant data for key stem.1.w from "
                "named_data_map. Error code: 32"):
        assert data_problem("/x/m.pte", "/y/o.ptd", log) == (
            "/y/o.ptd is not the data file of m.pte: it lacks the weight 'stem.1.w' the "
            "program needs; put the .ptd exported with m.pte beside it")
    assert "not an ExecuTorch data file" in data_problem(
        "/x/m.pte", "/y/o.ptd", "Failed to parse FlatTensor header with error code 32")
    assert data_problem("/x/m.pte", "/y/o.ptd", "Missing operator: [0] aten::foo") is None


def test_weights_ptd_is_the_exports_choice_not_the_models():
    assert split_weights("toy_cnn") == ("toy_cnn", "pte")
    assert split_weights("toy_cnn?weights=ptd") == ("toy_cnn", "ptd")
    assert split_weights("transformers:X?a=1&weights=ptd&b=2") == ("transformers:X?a=1&b=2",
                                                                  "ptd")
    assert split_weights("m.pte") == ("m.pte", "pte")
    with pytest.raises(Sme2Error) as e:
        split_weights("toy_cnn?weights=bin")
    assert "weights= takes one of pte" in str(e.value) and "\n" not in str(e.value)
    assert get_model("toy_cnn?weights=ptd") is get_model("toy_cnn")
    assert cache_key("toy_cnn?weights=ptd", "fp32") != cache_key("toy_cnn", "fp32")
    assert cache_key("toy_cnn?weights=pte", "fp32") == cache_key("toy_cnn", "fp32")


def test_a_pte_s_identity_covers_its_ptd(tmp_path):
    pte = _pair(tmp_path)
    alone = content_hash(pte)
    assert alone == file_sha256(pte)
    _pair(tmp_path, "m.ptd")
    with_data = content_hash(pte)
    assert with_data == program_digest(file_sha256(pte), file_sha256(tmp_path / "m.ptd"))
    (tmp_path / "m.ptd").write_bytes(FLAT_TENSOR + b"other weights")
    assert content_hash(pte) not in (alone, with_data)


def test_every_runner_passes_the_data_file(tmp_path):
    exe = tmp_path / "r"
    exe.write_text("#!/bin/sh\n")
    os.chmod(exe, 0o755)
    req = RunRequest(Path("/d/m.pte"), Path("/d/o.etdump"), data=Path("/d/m.ptd"))
    for argv, flag in ((PythonRunner(fork=False).child_args(req), "--data"),
                       (NativeRunner(exe).command(req), "--data_path"),
                       (BinaryRunner("up", Path("/bin/true")).command(req), "--data_path")):
        assert argv[argv.index(flag) + 1] == "/d/m.ptd"
    bare = RunRequest(Path("/d/m.pte"), Path("/d/o.etdump"))
    assert "--data" not in PythonRunner(fork=False).child_args(bare)
    assert "--data_path" not in NativeRunner(exe).command(bare)
