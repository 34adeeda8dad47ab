"""The session costs of tests/unit/measure/test_session_overheads.py that need a real export or a
fresh interpreter importing the ExecuTorch runtime."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from pytest_sme2.readers.etrecord import read_etrecord


# exports toy_cnn
def test_an_etrecord_is_read_once_per_version(tmp_path, toy_export):
    copy = tmp_path / "model.etrecord"
    copy.write_bytes(toy_export.etrecord.read_bytes())
    first = read_etrecord(copy)
    assert read_etrecord(copy) is first
    copy.write_bytes(toy_export.etrecord.read_bytes())
    os.utime(copy, ns=(time.time_ns(), time.time_ns() + 10**9))   # a new version
    again = read_etrecord(copy)
    assert again is not first and again == first


# a fresh interpreter imports the ExecuTorch runtime
def test_the_runtime_import_leaves_exir_and_torchao_out():
    code = ("import sys; from pytest_sme2.runners.python_child import import_runtime; "
            "rt = import_runtime(); assert hasattr(rt, '_load_for_executorch'); "
            "print(sorted(m for m in ('torchao', 'executorch.exir') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=300)
    assert out.stdout.strip() == "[]"
    assert "Failed to load" not in out.stderr


def test_the_export_recipes_silence_torchao_import_noise():
    code = ("import pytest_sme2.programs.recipes; "
            "from torchao.quantization.pt2e.quantize_pt2e import prepare_pt2e")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=300)
    assert "Failed to load" not in out.stderr
    assert "KernelPreference" not in out.stderr
