"""A program with its weights in a ``.ptd`` (``toy_cnn?weights=ptd``): exported as a small
``model.pte`` and its ``model.ptd``, run by the Python and native runners on the host, by the
cross-built runner under QEMU and on the fake arm64 phone (pushed with its data file, once per
content), with the same outputs as the program that keeps its weights inside. Without its
``.ptd``, or with another program's, each runner says so in one line. QEMU and the phone need
`pytest-sme2 setup qemu` (they skip without it, fail in CI)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from pytest_sme2.devices.android import device as android
from pytest_sme2.devices.android import open_android
from pytest_sme2.devices.host import HostDevice
from pytest_sme2.errors import Sme2Error
from pytest_sme2.programs.export import export_model
from pytest_sme2.readers.tensorfile import read_tensors
from pytest_sme2.runners import RunnerError, RunRequest
from pytest_sme2.runners.python import PythonRunner
from pytest_sme2.runners.spec import parse_runner_spec
from tests.needs import emulated_sme2

MISSING = "its weights live in a separate .ptd data file and none was found"


# What this module's fixtures export: ahead, with the session's (tests/conftest.py).
FIXTURE_EXPORTS = {"ptd_export": (("toy_cnn?weights=ptd", "fp32"),)}


@pytest.fixture(scope="module")
def ptd_export(export_cache):
    return export_model("toy_cnn?weights=ptd", "fp32", export_cache)


@pytest.fixture(scope="module")
def host_runners():
    return {"python": PythonRunner(), "native": parse_runner_spec("native").make(target="host")}


def _request(pte: Path, data: Path | None, inputs: Path, out: Path) -> RunRequest:
    out.mkdir(parents=True, exist_ok=True)
    return RunRequest(pte=pte, data=data, etdump=out / "run.etdump", inputs=inputs,
                      outputs=out / "out.bin", runs=2, warmup=1, timeout_s=300)


def _one_line(excinfo: pytest.ExceptionInfo) -> str:
    msg = str(excinfo.value)
    assert "\n" not in msg
    return msg


def test_the_export_keeps_its_weights_in_model_ptd(ptd_export, toy_export):
    assert ptd_export.ptd == ptd_export.folder / "model.ptd" and ptd_export.ptd.is_file()
    assert ptd_export.pte.stat().st_size < toy_export.pte.stat().st_size
    assert ptd_export.meta["ptd_sha256"] and ptd_export.meta["program_sha256"] not in (
        ptd_export.meta["pte_sha256"], ptd_export.meta["ptd_sha256"])
    assert ptd_export.key != toy_export.key and toy_export.ptd is None


def test_both_host_runners_run_it_as_the_program_with_weights_inside(
        ptd_export, toy_export, host_runners, tmp_path):
    for name, runner in host_runners.items():
        inside = _request(toy_export.pte, None, toy_export.inputs, tmp_path / name / "inside")
        apart = _request(ptd_export.pte, ptd_export.ptd, ptd_export.inputs,
                         tmp_path / name / "apart")
        for req in (inside, apart):
            HostDevice().run(runner, req)
        np.testing.assert_allclose(read_tensors(apart.outputs)[0],
                                   read_tensors(inside.outputs)[0], rtol=1e-5, atol=1e-6)


@pytest.mark.exports(("toy_cnn?weights=ptd", "fp16"))
def test_a_missing_or_wrong_ptd_is_one_line_on_each_runner(ptd_export, export_cache,
                                                           host_runners, tmp_path):
    other = export_model("toy_cnn?weights=ptd", "fp16", export_cache)   # other weight keys
    alone = tmp_path / "alone" / "m.pte"
    alone.parent.mkdir()
    shutil.copy(ptd_export.pte, alone)
    for name, runner in host_runners.items():
        out = tmp_path / name
        with pytest.raises(RunnerError) as e:
            HostDevice().run(runner, _request(alone, None, ptd_export.inputs, out))
        assert f"{alone}: {MISSING}; put the .ptd exported with it beside it as m.ptd or " \
               "model.ptd" in _one_line(e), name
        with pytest.raises(RunnerError) as e:
            HostDevice().run(runner, _request(ptd_export.pte, other.ptd, ptd_export.inputs, out))
        assert f"{other.ptd} is not the data file of model.pte: it lacks the weight '" in \
            _one_line(e), name
        assert "a delegate or operator may be missing" not in _one_line(e)


def test_a_user_pte_finds_its_ptd_beside_it_and_its_key_covers_both(ptd_export, tmp_path,
                                                                    export_cache):
    folder = tmp_path / "user"
    folder.mkdir()
    pte = folder / "m.pte"
    shutil.copy(ptd_export.pte, pte)
    shutil.copy(ptd_export.ptd, folder / "model.ptd")          # the shared name
    shared = export_model(str(pte), cache_dir=export_cache)
    assert shared.ptd == folder / "model.ptd"
    shutil.copy(ptd_export.ptd, folder / "m.ptd")              # its own name comes first
    own = export_model(str(pte), cache_dir=export_cache)
    assert own.ptd == folder / "m.ptd" and own.key == shared.key   # same bytes, same program
    (folder / "m.ptd").write_bytes(b"\0" * 64)
    with pytest.raises(Sme2Error) as e:
        export_model(str(pte), cache_dir=export_cache)
    assert _one_line(e) == (f"{folder / 'm.ptd'}: not an ExecuTorch data file (no 'FT01' "
                            "identifier in its header); put the .ptd exported with m.pte "
                            "beside it")


def test_qemu_runs_it_with_its_data_file(ptd_export, tmp_path):
    device = emulated_sme2()
    runner = parse_runner_spec("native").make(target=device.target)
    req = _request(ptd_export.pte, ptd_export.ptd, ptd_export.inputs, tmp_path)
    out = device.run(runner, req)
    assert req.etdump.is_file() and out.kernel_trace is not None


def test_the_fake_phone_gets_the_ptd_pushed_once(fake_arm64_android, ptd_export, tmp_path,
                                                 monkeypatch):
    monkeypatch.setattr(android, "LOCK_DIR", tmp_path)
    phone = fake_arm64_android
    dev = open_android(f"android:{phone.serial}", session_id="ptd1")
    runner = parse_runner_spec("native").make(target=dev.target)
    first = dev.run(runner, _request(ptd_export.pte, ptd_export.ptd, ptd_export.inputs,
                                     tmp_path / "a"))
    sent = [Path(p).name for p in phone.device.sends]
    assert "model.ptd" in sent and "model.pte" in sent
    again = dev.run(runner, _request(ptd_export.pte, ptd_export.ptd, ptd_export.inputs,
                                     tmp_path / "b"))
    assert again.pushed[0] == 0 and first.pushed[0] > again.pushed[0]
    assert [Path(p).name for p in phone.device.sends].count("model.ptd") == 1


@pytest.mark.exports(("tiny_llama", "8da8w"), ("tiny_llama?weights=ptd", "8da8w"))
def test_an_llm_with_its_weights_in_a_ptd_reads_what_it_reads_in_one_file(tiny_llama_exports):
    """The same LLM exported whole and with ``?weights=ptd``: a decode step reads one row of the
    embedding table either way (issue 49, item 5: with the .ptd the whole fp32 table, 131,072
    bytes, was counted). The .ptd's own header and alignment are the only difference."""
    from pytest_sme2.readers.pte_traffic import decode_bytes  # readers.pte_traffic: this test's

    whole = export_model("tiny_llama", "8da8w", tiny_llama_exports)
    split = export_model("tiny_llama?weights=ptd", "8da8w", tiny_llama_exports)
    one = decode_bytes(whole.pte, None, 128)
    two = decode_bytes(split.pte, split.ptd, 128)
    assert one.embedding_bytes == two.embedding_bytes == 512 * 64 * 4
    assert abs(two.weight_bytes - one.weight_bytes) < 0.02 * one.weight_bytes, (one, two)
    # tiny_llama is the custom-SDPA form (issue 45): attention up to the step's position.
    assert one.kv_bytes_per_position == two.kv_bytes_per_position
    assert one.reads_whole_cache is two.reads_whole_cache is False
