"""What an export's third-party code warns and prints is kept out of the way
(pytest_sme2.programs.export_output): recorded, shown under -v or with a failed export's error,
and a user's test is charged only with its own warnings."""

from __future__ import annotations

import copyreg
import os
import types
import warnings

import pytest

from pytest_sme2.plugin import collector
from pytest_sme2.programs import ahead, export
from pytest_sme2.programs.export_output import (ExportOutput, caught_warnings,
                                                captured_stderr, is_user_code, lines_only,
                                                warning_lines)
from pytest_sme2.programs.exported import ExportError


def _third_party_warning() -> None:
    """A FutureWarning that points at the standard library, as torch's treespec one does."""
    warnings.warn_explicit("`isinstance(treespec, LeafSpec)` is deprecated", FutureWarning,
                           copyreg.__file__, 105)


def test_third_party_warnings_are_kept_and_the_users_own_are_issued_again():
    with pytest.warns(UserWarning, match="the user's own") as issued:
        with caught_warnings() as caught:
            for _ in range(3):
                _third_party_warning()
            warnings.warn("the user's own", UserWarning, stacklevel=1)
    assert [str(w.message) for w in issued] == ["the user's own"]
    assert warning_lines(caught) == [
        f"{copyreg.__file__}:105: FutureWarning: `isinstance(treespec, LeafSpec)` is "
        "deprecated (x3)"]


def test_the_filters_in_force_still_apply():
    """The project's own suite turns warnings into errors: recording them does not hide one."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(FutureWarning), caught_warnings():
            _third_party_warning()


def test_user_code_is_what_is_neither_installed_nor_standard_nor_ours():
    assert is_user_code(__file__)
    assert not is_user_code(copyreg.__file__)
    assert not is_user_code(pytest.__file__)
    assert not is_user_code(export.__file__)
    assert not is_user_code("<frozen importlib._bootstrap>")


def test_native_stderr_is_captured_and_restored(capfd):
    with captured_stderr() as lines:
        os.write(2, b"[cpuinfo_utils.cpp:71] Reading file /sys/devices/soc0/image_version\n")
    os.write(2, b"after\n")
    assert lines == ["[cpuinfo_utils.cpp:71] Reading file /sys/devices/soc0/image_version"]
    assert capfd.readouterr().err == "after\n"


def test_an_export_output_names_its_export_and_is_none_without_lines():
    assert ExportOutput.of("toy_cnn", "int8", "what", []) is None
    out = ExportOutput.of("toy_cnn", "int8", "what", ["a", "b"])
    assert isinstance(out, ExportOutput) and out == "toy_cnn int8: what:\n  a\n  b"
    said: list[str] = []
    lines_only(said.append)(out)
    lines_only(said.append)("exported toy_cnn int8 in 1.0 s")
    assert said == ["exported toy_cnn int8 in 1.0 s"]


def _recipe_that_warns(fail: bool):
    def run(folder, model, dtype, key, say):
        _third_party_warning()
        os.write(2, b"native log line\n")
        if fail:
            raise ExportError(f"export of model {model!r} as {dtype} failed at stage 'lower'")
        say(f"exported {model} {dtype} in 1.0 s")
        return {}
    return run


# The project's suite makes warnings errors: these tests need the fake one to be a warning.
@pytest.mark.filterwarnings("default::FutureWarning")
def test_an_export_says_its_warnings_after_its_line_and_a_failure_carries_them(monkeypatch,
                                                                               tmp_path):
    monkeypatch.setattr(export, "_run_recipe", _recipe_that_warns(fail=False))
    said: list[str] = []
    export._export_into(tmp_path, "toy_cnn", "int8", "k", said.append)
    assert said[0] == "exported toy_cnn int8 in 1.0 s" and not isinstance(said[0], ExportOutput)
    assert isinstance(said[1], ExportOutput) and said[1].splitlines()[0] == \
        "toy_cnn int8: the export's third-party warnings:"
    monkeypatch.setattr(export, "_run_recipe", _recipe_that_warns(fail=True))
    with pytest.raises(ExportError) as e:
        export._export_into(tmp_path, "toy_cnn", "int8", "k", said.append)
    assert str(e.value).splitlines()[:2] == [
        "export of model 'toy_cnn' as int8 failed at stage 'lower'",
        "toy_cnn int8: the export's third-party warnings:"]
    assert "FutureWarning" in str(e.value)


@pytest.mark.filterwarnings("default::FutureWarning")
def test_an_export_process_gives_back_its_native_log_apart(monkeypatch, tmp_path):
    """In a pool process: the line, then the warnings and the native log as ExportOutputs;
    a failure's error carries both (the session says them with -v only)."""
    monkeypatch.setattr(export, "_run_recipe", _recipe_that_warns(fail=False))
    monkeypatch.setattr(export, "_load_hit", lambda *a: None)
    line, outputs = ahead._export_in_worker("toy_cnn", "fp32", None, tmp_path)
    assert line == "exported toy_cnn fp32 in 1.0 s"
    assert [o.splitlines()[0] for o in outputs] == [
        "toy_cnn fp32: the export's third-party warnings:",
        "toy_cnn fp32: the export process's native log (stderr):"]
    assert outputs[1].splitlines()[1:] == ["  native log line"]
    monkeypatch.setattr(export, "_run_recipe", _recipe_that_warns(fail=True))
    with pytest.raises(ExportError) as e:
        ahead._export_in_worker("toy_cnn", "fp32", None, tmp_path)
    assert str(e.value).splitlines()[0] == \
        "export of model 'toy_cnn' as fp32 failed at stage 'lower'"
    assert "  native log line" in str(e.value).splitlines()
    assert ahead._outputs_of(e.value)[0].startswith("toy_cnn fp32: the export's third-party")


@pytest.mark.parametrize("verbose, shown", [(0, ["sme2: exported x"]),
                                            (1, ["sme2: exported x", "sme2: x fp32: w:\n  a"])])
def test_pytest_shows_an_export_output_under_v_only(monkeypatch, verbose, shown):
    written: list[str] = []
    monkeypatch.setattr(collector, "write_live", lambda config, line: written.append(line))
    say = collector.live_progress(types.SimpleNamespace(option=types.SimpleNamespace(
        verbose=verbose)))
    say("exported x")
    say(ExportOutput.of("x", "fp32", "w", ["a"]))
    assert written == shown
