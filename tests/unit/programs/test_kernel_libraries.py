"""Which of the executorch wheel's operator libraries a program needs, read from its operator
table; how each runner gets them; the one line where a device cannot (issue 45)."""

from __future__ import annotations

import ctypes
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_sme2.devices.base import check_operators
from pytest_sme2.programs import kernel_libraries as kl
from pytest_sme2.readers.pte_program import read_signatures
from pytest_sme2.runners.base import RunnerError, RunRequest
from pytest_sme2.runners.native.runner import NativeRunner
from pytest_sme2.runners.python import PythonRunner
from pytest_sme2.runners.binary import BinaryRunner
from tests.fakes.pte_programs import write_program

CUSTOM_SDPA_OPS = ["aten::embedding.out", "llama::update_cache.out", "llama::custom_sdpa.out",
                   "quantized_decomposed::embedding_byte.out"]


def _program(tmp_path: Path, ops: list[str], name: str = "m.pte") -> Path:
    return write_program(tmp_path / name, {"forward": [("tensor", 4, [1, 127], True)]},
                         {"use_kv_cache": True, "get_max_seq_len": 128}, operators=ops)


def test_the_operator_table_is_read_from_the_flatbuffer(tmp_path):
    pte = _program(tmp_path, CUSTOM_SDPA_OPS)
    assert read_signatures(pte)["forward"].operators == tuple(CUSTOM_SDPA_OPS)
    assert read_signatures(pte)["use_kv_cache"].operators == ()
    assert kl.program_operators(pte) == tuple(CUSTOM_SDPA_OPS)


def test_a_custom_sdpa_program_needs_the_llm_custom_ops_and_the_quantized_ops(tmp_path):
    pte = _program(tmp_path, CUSTOM_SDPA_OPS)
    assert [lib.name for lib in kl.program_libraries(pte)] == ["custom_ops", "quantized_ops"]
    plain = _program(tmp_path, ["aten::embedding.out", "aten::index_put.out"], "plain.pte")
    assert kl.program_libraries(plain) == ()
    # The request says so once, from the host's file; a device's copy keeps it.
    request = RunRequest(pte=pte, etdump=tmp_path / "x.etdump")
    assert request.kernel_libraries == ("custom_ops", "quantized_ops")
    moved = replace(request, pte=Path("/data/local/tmp/model.pte"))
    assert moved.kernel_libraries == ("custom_ops", "quantized_ops")
    assert RunRequest(pte=tmp_path / "missing.pte", etdump=tmp_path / "e").kernel_libraries == ()


def test_the_wheel_holds_the_libraries_the_table_names():
    root = kl.executorch_dir()
    for lib in kl.KERNEL_LIBRARIES:
        assert (root / lib.path).is_file(), lib.path
        assert lib.module.startswith("executorch.")


def test_the_native_runner_on_the_host_loads_libpython_then_the_custom_ops(tmp_path):
    pte = _program(tmp_path, CUSTOM_SDPA_OPS)
    runner = NativeRunner(tmp_path / "sme2_runner")
    argv = runner.command(RunRequest(pte=pte, etdump=tmp_path / "e.etdump"))
    libs = [argv[i + 1] for i, a in enumerate(argv) if a == "--kernel_lib"]
    # libpython first: the wheel's library needs CPython's symbols outside Python; the
    # quantized operators are linked into our runner already.
    assert len(libs) == 2
    assert Path(libs[0]).name.startswith("libpython3")
    assert libs[1].endswith("extension/llm/custom_ops/libcustom_ops_aot_lib.so")
    ctypes.CDLL(libs[0])          # the file is this Python's own shared library
    plain = _program(tmp_path, ["aten::add.out"], "plain.pte")
    assert "--kernel_lib" not in runner.command(RunRequest(pte=plain, etdump=tmp_path / "p"))


def test_a_python_without_a_shared_libpython_is_one_line(monkeypatch):
    monkeypatch.setattr(kl.sysconfig, "get_config_var",
                        lambda name: 0 if name == "Py_ENABLE_SHARED" else "x")
    with pytest.raises(kl.KernelLibraryError, match=r"no shared libpython .*\(--runner python\)"):
        kl.host_load_order(kl.KERNEL_LIBRARIES)


@pytest.mark.parametrize("where", ["--device qemu", "device 127.0.0.1:5555"])
def test_a_device_that_cannot_have_the_libraries_refuses_before_any_process(tmp_path, where):
    pte = _program(tmp_path, CUSTOM_SDPA_OPS)
    request = RunRequest(pte=pte, etdump=tmp_path / "e.etdump")
    cross = NativeRunner(tmp_path / "sme2_runner", target="aarch64-linux-gnu")
    with pytest.raises(RunnerError) as e:
        check_operators(cross, request, where)
    line = str(e.value)
    assert "\n" not in line
    assert "llama::update_cache.out, llama::custom_sdpa.out" in line
    assert f"on {where}" in line and "libcustom_ops_aot_lib.so" in line
    assert "tiny_llama_plain" in line and "attention=plain" in line
    # It says what the wheel has, never that the wheel lacks it.
    assert "registers from" in line and "does not register" not in line
    # A plain program runs there; a user's runner brings its own build of the operators.
    check_operators(cross, RunRequest(pte=_program(tmp_path, ["aten::add.out"], "p.pte"),
                                      etdump=tmp_path / "p"), where)
    user = tmp_path / "llama_main"
    user.write_text("#!/bin/sh\n")
    user.chmod(0o755)
    check_operators(BinaryRunner("llama_main", user), request, where)
    # The quantized operators alone: our runner links them on every target.
    quantized = _program(tmp_path, ["quantized_decomposed::embedding_byte.out"], "q.pte")
    check_operators(cross, RunRequest(pte=quantized, etdump=tmp_path / "q"), where)


def test_our_runners_take_the_operators_from_the_wheel(tmp_path):
    assert not NativeRunner(Path("x")).brings_own_operators
    assert not PythonRunner(fork=False).brings_own_operators
    user = tmp_path / "runner"
    user.write_text("#!/bin/sh\n")
    user.chmod(0o755)
    assert BinaryRunner("b", user).brings_own_operators
