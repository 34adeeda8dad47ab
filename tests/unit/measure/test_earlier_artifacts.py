"""A session's report folder keeps its own artifacts only (issue 49, item 16: folders of an
earlier session's comparison blocks 0-39 stood beside this session's 0-9, and a user browsing
for an ETDump picked a stale one)."""

from __future__ import annotations

import os
import time
from dataclasses import replace

import pytest

import pytest_sme2.report.markdown.render as markdown
from pytest_sme2.measure.artifacts.earlier import remove_earlier_artifacts
from pytest_sme2.measure.config import Sme2Config
from pytest_sme2.measure.session import BenchSession
from pytest_sme2.report.outputs import write_reports
from pytest_sme2.results import load_results
from tests.fakes.results_docs import single_doc


def _file(path, age_s: float):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x")
    then = time.time() - age_s
    os.utime(path, (then, then))
    return path


def test_files_older_than_the_session_go_and_folders_they_empty_too(tmp_path):
    started = time.time()
    old = _file(tmp_path / "test_cmp_sme2_on_39" / "sme2_on-block39.etdump", 3600)
    mine = _file(tmp_path / "test_cmp_sme2_on_0" / "sme2_on-block0.etdump", 0)
    stale_beside = _file(tmp_path / "test_cmp_sme2_on_0" / "sme2_on.load2.etdump", 3600)
    assert remove_earlier_artifacts(tmp_path, started) == 2
    assert mine.is_file() and not old.exists() and not stale_beside.exists()
    assert not old.parent.exists() and mine.parent.is_dir()
    assert remove_earlier_artifacts(tmp_path / "none", started) == 0


def test_a_session_writing_its_report_removes_the_earlier_sessions_artifacts(tmp_path,
                                                                              monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    monkeypatch.setattr(markdown, "render_report", lambda doc, out: out / "report.md")
    cfg = Sme2Config()
    cfg = replace(cfg, settings=replace(cfg.settings, report_dir=tmp_path))
    earlier = _file(tmp_path / "artifacts" / "b.py_test_x" / "native.etdump", 600)
    session = BenchSession(cfg, results=load_results(single_doc()).benchmarks)
    ours = _file(tmp_path / "artifacts" / "b.py_test_y" / "native.etdump", 0)
    write_reports(session)
    assert ours.is_file() and not earlier.parent.exists()
    assert (tmp_path / "results.json").is_file()


@pytest.mark.parametrize("lag_s", [0.0, 0.2])
def test_a_file_written_as_the_session_starts_is_the_sessions(tmp_path, lag_s):
    """File times lag the clock by up to a tick: a file stamped just before the session's
    recorded start is still this session's."""
    path = _file(tmp_path / "f" / "native.etdump", lag_s)
    assert remove_earlier_artifacts(tmp_path, time.time()) == 0 and path.is_file()
