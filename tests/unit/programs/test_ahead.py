"""Which exports go ahead, in what order, and the option (pytest_sme2.programs.ahead; real
exports in spawned processes: tests/integration/test_export_ahead.py)."""

from __future__ import annotations

import pytest

from pytest_sme2.errors import Sme2Error
from pytest_sme2.measure.option_values import Given, export_jobs
from pytest_sme2.programs import ahead
from pytest_sme2.programs.ahead import default_jobs, export_ahead, missing_points
from pytest_sme2.programs.registry import _REGISTRY, register_model


@pytest.fixture
def nothing_cached(monkeypatch):
    monkeypatch.setattr(ahead, "cached_export", lambda model, dtype, cache_dir: None)


def test_what_a_fresh_process_can_build_goes_ahead_longest_first(nothing_cached, tmp_path):
    register_model("made_here", lambda: None)        # a conftest's function: not ahead
    try:
        points = [("toy_cnn", "fp32"), ("toy_cnn", "int8"), ("tiny_llama", "8da8w"),
                  (str(tmp_path / "m.pte"), "as-exported"), ("made_here", "fp32"),
                  ("no_such_model", "fp32"), ("transformers:MobileViTModel", "fp16"),
                  ("toy_cnn", "fp32")]
        got = [(m, d) for m, d, _ in missing_points(points, tmp_path)]
    finally:
        _REGISTRY.pop("made_here", None)
    assert got == [("tiny_llama", "8da8w"), ("toy_cnn", "int8"), ("toy_cnn", "fp32"),
                   ("transformers:MobileViTModel", "fp16")]


def test_cached_points_stay_behind(monkeypatch, tmp_path):
    monkeypatch.setattr(ahead, "cached_export",
                        lambda model, dtype, cache_dir: object() if dtype == "fp32" else None)
    assert [(m, d) for m, d, _ in missing_points([("toy_cnn", "fp32"), ("toy_cnn", "fp16")],
                                                 tmp_path)] == [("toy_cnn", "fp16")]


def test_one_missing_export_or_one_job_is_left_to_the_tests(nothing_cached, monkeypatch,
                                                            tmp_path):
    monkeypatch.setattr(ahead, "ProcessPoolExecutor",
                        lambda *a, **k: pytest.fail("no pool for one export"))
    said: list[str] = []
    assert export_ahead([("toy_cnn", "fp32")], tmp_path, 2, said.append).jobs == 0
    assert export_ahead([("toy_cnn", "fp32"), ("toy_cnn", "fp16")], tmp_path, 1,
                        said.append).jobs == 0
    assert said == []


def test_default_jobs_are_the_cpus_memory_allows(monkeypatch):
    monkeypatch.setattr(ahead.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    monkeypatch.setattr(ahead, "_available_bytes", lambda: 64 << 30)
    assert default_jobs() == 4
    monkeypatch.setattr(ahead, "_available_bytes", lambda: 5 << 30)
    assert default_jobs() == 2
    monkeypatch.setattr(ahead, "_available_bytes", lambda: 1 << 30)
    assert default_jobs() == 1


@pytest.mark.parametrize("text, jobs", [("auto", None), (" AUTO ", None), ("1", 1), ("3", 3)])
def test_export_jobs_option(text, jobs):
    assert export_jobs(Given(text, "--sme2-export-jobs")) == jobs


@pytest.mark.parametrize("text", ["0", "-1", "two", "1.5", ""])
def test_export_jobs_option_refuses_in_one_line(text):
    with pytest.raises(Sme2Error, match=r"^--sme2-export-jobs must be auto or a number of "
                                        r"processes \(1 or more; 1: no exporting ahead\), got"):
        export_jobs(Given(text, "--sme2-export-jobs"))


def test_the_session_exports_ahead_unless_asked_not_to(monkeypatch):
    import pytest_sme2.measure.session as session_module
    from pytest_sme2.measure.config import Sme2Config
    from pytest_sme2.measure.session import BenchSession
    from pytest_sme2.measure.settings import BenchSettings

    calls = []
    monkeypatch.setattr(session_module, "export_ahead",
                        lambda points, cache, jobs, say: calls.append((list(points), jobs)))
    monkeypatch.setattr(session_module, "default_jobs", lambda: 2)
    point = [("toy_cnn", "fp32")]
    for config in (Sme2Config(), Sme2Config(export_jobs=3), Sme2Config(export_jobs=1),
                   Sme2Config(settings=BenchSettings(reexport=True))):
        session = BenchSession(config)
        try:
            session.export_ahead(point)
        finally:
            session.close()
    # not with 1 job, nor with --sme2-reexport; the machine-state probe's program with them
    with_probe = point + [("machine_probe", "fp32")]
    assert calls == [(with_probe, 2), (with_probe, 3)]
