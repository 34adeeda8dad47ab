"""What a benchmark session costs beside its runs, through the session and pytest: .etrecord
files read once per version, a runtime import that leaves torchao (and its noise) out, the
frozen objects given back. Each measure alone: test_session_cost.py."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import time

import pytest

from pytest_sme2.etrecord import read_etrecord


@pytest.mark.slow    # exports toy_cnn
def test_an_etrecord_is_read_once_per_version(tmp_path, toy_export):
    copy = tmp_path / "model.etrecord"
    copy.write_bytes(toy_export.etrecord.read_bytes())
    first = read_etrecord(copy)
    assert read_etrecord(copy) is first
    copy.write_bytes(toy_export.etrecord.read_bytes())
    os.utime(copy, ns=(time.time_ns(), time.time_ns() + 10**9))   # a new version
    again = read_etrecord(copy)
    assert again is not first and again == first


@pytest.mark.slow    # a fresh interpreter imports the ExecuTorch runtime
def test_the_runtime_import_leaves_exir_and_torchao_out():
    code = ("import sys; from pytest_sme2.runners.python_child import import_runtime; "
            "rt = import_runtime(); assert hasattr(rt, '_load_for_executorch'); "
            "print(sorted(m for m in ('torchao', 'executorch.exir') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=300)
    assert out.stdout.strip() == "[]"
    assert "Failed to load" not in out.stderr


@pytest.mark.slow
def test_the_export_recipes_silence_torchao_import_noise():
    code = ("import pytest_sme2._recipes; "
            "from torchao.quantization.pt2e.quantize_pt2e import prepare_pt2e")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=300)
    assert "Failed to load" not in out.stderr
    assert "KernelPreference" not in out.stderr


def test_a_session_freezes_what_its_imports_made_once_and_gives_it_back():
    from pytest_sme2.config import Sme2Config
    from pytest_sme2.session import BenchSession

    assert gc.get_freeze_count() == 0 and gc.isenabled()
    session = BenchSession(Sme2Config(devices=("host",)))
    try:
        session.prepare()
        frozen = gc.get_freeze_count()
        assert frozen > 0 and gc.isenabled()   # the collector runs again, on new objects
        session.prepare()
        assert gc.get_freeze_count() <= frozen  # once per session, not per block
    finally:
        session.release()
    assert gc.get_freeze_count() == 0
    session.release()   # twice: nothing more to give back


def test_a_session_leaves_objects_someone_else_froze_alone():
    from pytest_sme2.config import Sme2Config
    from pytest_sme2.session import BenchSession

    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        session = BenchSession(Sme2Config(devices=("host",)))
        session.prepare()
        session.release()
        assert gc.get_freeze_count() >= frozen - 100   # still theirs, not unfrozen by us
    finally:
        gc.unfreeze()


def test_pytest_run_from_python_gets_the_frozen_objects_back_after_its_collections(pytester):
    """The session freezes what exists before its first measurement; a process that goes on
    after pytest.main() must collect the session's garbage as usual."""
    pytester.makepyfile(test_q="""
        import gc
        from pytest_sme2.plugin import SESSION_KEY

        def test_quiet(request):
            request.config.stash[SESSION_KEY].prepare()
            assert gc.get_freeze_count() > 0
    """)
    assert gc.get_freeze_count() == 0
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert gc.get_freeze_count() == 0
