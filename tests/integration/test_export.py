"""Real exports through the cache (toy_cnn fp32 is shared by the session's tests)."""

import json
import subprocess
import sys
import textwrap
import time

import pytest

from pytest_sme2.readers.tensorfile import read_tensors

from pytest_sme2_models import register_model
from pytest_sme2.programs.registry import _REGISTRY
from pytest_sme2.programs import recipes
from pytest_sme2.programs.export import ExportError, export_model


def test_export_writes_pte_etrecord_inputs_and_meta(toy_export):
    for p in (toy_export.pte, toy_export.etrecord, toy_export.inputs):
        assert p.is_file() and p.stat().st_size > 0
    meta = json.loads((toy_export.folder / "meta.json").read_text())
    assert meta["model"] == "toy_cnn" and meta["dtype"] == "fp32"
    assert meta["versions"]["executorch"] == "1.5.1"
    assert meta["delegates"] == 2  # the portable pool splits the graph in two
    assert meta["portable_ops"] == {"aten._adaptive_avg_pool2d.default": 1}
    assert meta["max_abs_error"] < 1e-4
    assert toy_export.pte.read_bytes()[4:8] == b"ET12"


def test_cache_hit_is_fast_and_exports_nothing(toy_export, export_cache, monkeypatch):
    def no_export(*a, **k):
        raise AssertionError("a cache hit must not export")

    monkeypatch.setattr(recipes, "export", no_export)
    t0 = time.perf_counter()
    again = export_model("toy_cnn", "fp32", export_cache)
    assert time.perf_counter() - t0 < 0.5
    assert again.folder == toy_export.folder and again.key == toy_export.key


def test_unknown_dtype_lists_choices(export_cache):
    with pytest.raises(ExportError, match="unknown dtype 'int4'; choose one of fp32, fp16, int8"):
        export_model("toy_cnn", "int4", export_cache)


@pytest.fixture
def bad_model():
    import torch

    class DataDependent(torch.nn.Module):
        def forward(self, x):
            return x if x.sum() > 0 else -x  # torch.export cannot trace this

    def build():
        from pytest_sme2_models import ModelDef
        return ModelDef(DataDependent(), (torch.ones(2),))

    register_model("data_dependent", build)
    yield "data_dependent"
    _REGISTRY.pop("data_dependent", None)


def test_export_failure_is_one_line_naming_model_dtype_and_stage(bad_model, tmp_path):
    with pytest.raises(ExportError) as ei:
        export_model(bad_model, "fp32", tmp_path)
    msg = str(ei.value)
    assert msg.startswith("export of model 'data_dependent' as fp32 failed at stage "
                          "'torch.export': ")
    assert "\n" not in msg
    assert not any(p.name.startswith(".tmp") for p in (tmp_path / bad_model).iterdir())


def test_two_processes_export_once(tmp_path):
    """Two workers asking for the same export at once: one exports, the other waits for it."""
    (tmp_path / "tinymodel.py").write_text(textwrap.dedent("""
        import torch
        from pytest_sme2_models import ModelDef
        def build():
            torch.manual_seed(0)
            return ModelDef(torch.nn.Sequential(torch.nn.Linear(8, 4)).eval(), (torch.ones(1, 8),))
    """))
    script = textwrap.dedent(f"""
        import sys; sys.path.insert(0, {str(tmp_path)!r})
        from pytest_sme2_models import register_model
        from pytest_sme2.programs.export import export_model
        register_model("tiny", "tinymodel:build")
        e = export_model("tiny", "fp32", {str(tmp_path / 'cache')!r},
                         progress=lambda m: print("PROGRESS", m, flush=True))
        print("FOLDER", e.folder)
    """)
    procs = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    assert sum(o.count("PROGRESS exporting") for o in outs) == 1
    folders = {line.split(" ", 1)[1] for o in outs for line in o.splitlines()
               if line.startswith("FOLDER")}
    assert len(folders) == 1


def test_cli_export_copies_and_reuses(toy_export, export_cache, tmp_path, capsys, monkeypatch):
    from pytest_sme2.cli import main

    monkeypatch.setattr(recipes, "export", lambda *a, **k: pytest.fail("re-exported"))
    out = tmp_path / "exported"
    assert main(["export", "toy_cnn", "--dtype", "fp32", "--cache-dir", str(export_cache),
                 "--out", str(out)]) == 0
    printed = capsys.readouterr().out.split()
    assert printed == [str(out / "toy_cnn-fp32.pte"), str(out / "toy_cnn-fp32.etrecord"),
                       str(out / "toy_cnn-fp32.inputs.bin"), str(out / "toy_cnn-fp32.meta.json")]
    assert (out / "toy_cnn-fp32.pte").read_bytes() == toy_export.pte.read_bytes()
    assert read_tensors(out / "toy_cnn-fp32.inputs.bin")        # the sidecar came along


def test_cli_export_unknown_model_is_one_line(capsys, tmp_path):
    from pytest_sme2.cli import main

    assert main(["export", "nope", "--cache-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pytest-sme2: unknown model 'nope'; registered models: ")
    assert err.count("\n") == 1


def test_damaged_cache_entry_is_exported_again(tmp_path):
    first = export_model("toy_cnn", "fp32", tmp_path)
    good = first.pte.read_bytes()
    first.pte.write_bytes(b"\0" * 100)          # damaged on disk after the export
    messages = []
    again = export_model("toy_cnn", "fp32", tmp_path, progress=messages.append)
    assert again.pte.read_bytes() == good
    assert messages[0] == f"cache entry {first.folder} is incomplete or damaged; exporting again"
