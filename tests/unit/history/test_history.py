"""The history store on SQLite (the embedded default), its bad inputs, the change points and the
report. PostgreSQL and the page in Chromium: tests/integration/test_history_*.py."""

from __future__ import annotations

import json
import socket

import pytest

from tests.needs import missing

for _package in ("sqlalchemy", "ruptures"):
    try:
        __import__(_package)
    except ImportError:     # the [test] extra brings it; CI installs it, so there this fails
        missing(f"the Python package {_package!r}", "pip install -e '.[test]'")


from pytest_sme2.cli import main  # noqa: E402
from pytest_sme2.history import HistoryError, page, report  # noqa: E402
from pytest_sme2.history.importer import import_files, record_doc  # noqa: E402
from pytest_sme2.history.store import open_store  # noqa: E402
from pytest_sme2.results import load_results  # noqa: E402
from tests.fakes.history_docs import session_doc, write_series  # noqa: E402


def step(model, i):
    return 1.10 if model == "toy_cnn" and i >= 12 else 1.0


def test_import_twice_adds_once(tmp_path):
    paths = write_series(tmp_path / "r", 3, step)
    store = open_store(str(tmp_path / "h.sqlite"))
    first = import_files(store, paths)
    again = import_files(store, paths[:1])
    assert all("recorded 3 benchmark(s)" in line for line in first)
    assert len(again) == 1 and again[0].endswith("(same session); not added again")
    assert store.frame()["uid"].nunique() == 3


def test_results_without_a_commit_are_kept_with_one_line(tmp_path):
    store = open_store(str(tmp_path / "h.sqlite"))
    lines = record_doc(store, load_results(session_doc(0, commit=None)), "old.json")
    assert lines[0] == ("old.json: no commit recorded; kept, placed by its time and shown as "
                        "'unknown' in the history")
    frame = store.frame()
    assert len(frame) == 3 and frame["commit_sha"].isna().all()
    assert report.build(frame).commits[0].startswith("unknown@")


def test_a_newer_schema_is_refused_and_nothing_is_written(tmp_path):
    from sqlalchemy import update

    from pytest_sme2.history import schema

    url = str(tmp_path / "h.sqlite")
    store = open_store(url)
    record_doc(store, load_results(session_doc(0)))
    with store.engine.begin() as conn:
        conn.execute(update(schema.meta).values(value=str(schema.SCHEMA_VERSION + 1)))
    with pytest.raises(HistoryError, match="newer than this pytest-sme2 reads.*nothing was "
                                           "written"):
        open_store(url)
    assert len(store.frame()) == 3


def test_a_corrupt_sqlite_file_is_one_line_and_stays_as_it_was(tmp_path):
    path = tmp_path / "h.sqlite"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(HistoryError, match="cannot open: file is not a database") as e:
        open_store(str(path))
    assert "\n" not in str(e.value)
    assert path.read_bytes() == b"this is not a database" * 100


def test_an_unreachable_database_is_one_line():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]   # closed again: nobody listens there
    with pytest.raises(HistoryError, match=r"history store postgresql\+psycopg://u:\*\*\*@"
                                           r"127.0.0.1:\d+/db: cannot open"):
        open_store(f"postgresql://u:secret@127.0.0.1:{port}/db")


def test_a_step_is_found_at_its_commit_and_the_unchanged_model_has_none(tmp_path):
    store = open_store(str(tmp_path / "h.sqlite"))
    import_files(store, write_series(tmp_path / "r", 24, step))
    built = report.build(store.frame())
    changed = [c for c in built.change_points if c.series.startswith("toy_cnn")]
    assert changed and all(c.commit == f"{12:040x}" for c in changed)
    assert all(5 < c.change_pct < 15 and c.low_pct > 0 for c in changed)
    assert not [c for c in built.change_points if not c.series.startswith("toy_cnn")]
    assert f"pytest-sme2 bisect {11:040x} {12:040x} -k toy_cnn --device " in \
        built.bisect_commands()[0]
    assert built.bisect_commands()[0] in built.to_markdown()


def test_cli_report_writes_json_md_and_a_self_contained_page(tmp_path, capsys):
    paths = write_series(tmp_path / "r", 8, step)
    store = str(tmp_path / "h.sqlite")
    assert main(["history", "import", *map(str, paths), "--store", store]) == 0
    out = tmp_path / "out"
    assert main(["history", "report", "--store", store, "--model", "toy_cnn", "--html",
                 str(out / "p.html"), "--md", str(out / "r.md"), "--json",
                 str(out / "r.json")]) == 0
    doc = json.loads((out / "r.json").read_text())
    assert doc["filters"]["model"] == "toy_cnn" and {s["model"] for s in doc["series"]} == \
        {"toy_cnn"}
    html = (out / "p.html").read_text()
    assert "<svg" in html and "http://" not in html and "https://" not in html
    assert "# Benchmark history" in (out / "r.md").read_text()


def test_page_stays_small_for_many_series(tmp_path):
    import pandas as pd

    rows = []
    for k in range(5):
        for c in range(40):
            rows.append({"key_digest": f"k{k}", "key": {}, "device": "host", "model": f"m{k}",
                         "dtype": "fp32", "threads": 1, "runner": "native", "emulated": False,
                         "median_ms": 1.0 + (0.1 if c >= 20 and k == 0 else 0) + c % 3 * 0.001,
                         "block_medians_ms": [1.0], "runs_ms": [], "instructions": None,
                         "load_ms": None, "peak_rss_kb": None, "categories_ms": {},
                         "sme2": "absent", "export_key": "", "executorch": "1.5.1",
                         "uid": f"{k}-{c}", "commit_sha": f"{c:040x}", "branch": "main",
                         "time": f"2026-11-01T00:{c:02d}:00", "ci_run": None, "host": "h",
                         "versions": {}, "id": 0, "session_id": c})
    html = page.render(report.build(pd.DataFrame(rows)))
    assert html.count('class="series"') == 5 and len(html) < 200_000


def test_the_option_and_its_ini_twin(tmp_path):
    from pytest_sme2.measure.config import BaseDirs, config_from_options

    dirs = BaseDirs(invocation=tmp_path / "cwd", rootdir=tmp_path / "root")
    assert config_from_options({}, {}, dirs).history is None
    assert config_from_options({"sme2_history": "h.sqlite"}, {}, dirs).history == \
        str((tmp_path / "cwd" / "h.sqlite").resolve())
    assert config_from_options({}, {"sme2_history": "postgresql://ci@db/sme2"}, dirs
                               ).history == "postgresql://ci@db/sme2"


def test_a_session_end_records_or_says_in_one_line_why_not(tmp_path):
    from pytest_sme2.history.recording import record_session

    results = tmp_path / "sme2-report" / "results.json"
    results.parent.mkdir()
    results.write_text(json.dumps(session_doc(0)))
    line, ok = record_session(str(tmp_path / "h.sqlite"), results)
    assert ok and "recorded 3 benchmark(s)" in line

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    before = results.read_bytes()
    line, ok = record_session(f"postgresql://u@127.0.0.1:{port}/db", results)
    assert not ok and "\n" not in line
    assert line.startswith("sme2: history not recorded (history store postgresql")
    assert line.endswith(f"`pytest-sme2 history import {results}` adds it later")
    assert results.read_bytes() == before


def test_the_gate_reads_the_last_sessions_of_a_branch_from_the_store(tmp_path):
    from pytest_sme2.gate import rule as gate
    from pytest_sme2.baselines.store import load
    from pytest_sme2.history.baselines import baseline_dir_from_store

    store_path = str(tmp_path / "h.sqlite")
    import_files(open_store(store_path), write_series(tmp_path / "r", 8, step))
    folder, line = baseline_dir_from_store(store_path, "main:5", tmp_path / "report")
    assert line.startswith("sme2: gate baselines: the last 5 session(s) on main of 3 key(s)")
    files = sorted(folder.glob("*.json"))
    assert len(files) == 3 and all(len(load(f).sessions) == 5 for f in files)
    # A new session of the same keys is judged against them (not "no baseline").
    doc = load_results(session_doc(8, step))
    toy = [b for b in doc.benchmarks if b.runner_name == doc.benchmarks[0].runner_name]
    report = gate.evaluate(toy, folder)
    assert report.e2e.baseline_sessions == 5 and report.e2e.ratio is not None, report.e2e

    none, line = baseline_dir_from_store(f"{tmp_path}/h.sqlite", "nobranch", tmp_path / "r2")
    assert none is not None and "of 0 key(s)" in line
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"x" * 4096)
    none, line = baseline_dir_from_store(str(bad), "main", tmp_path / "r3")
    assert none is None and line.endswith("the gate reads --baseline-dir")


def test_setup_history_checks_first_and_says_what_to_install(monkeypatch):
    from pytest_sme2.provision import apt, history as setup

    out = []
    monkeypatch.setattr(setup, "missing_packages", lambda: [])
    assert setup.run_setup(False, out.append) == 0 and out[-1].startswith("history: already")
    monkeypatch.setattr(setup, "missing_packages", lambda: ["chromium"])
    monkeypatch.setattr(apt.os, "geteuid", lambda: 1000)
    assert setup.run_setup(False, out.append) == 2
    assert out[-1] == ("history: missing headless Chromium; run as root: apt-get update && "
                       "apt-get install -y chromium (elsewhere: install chromium), then "
                       "`pytest-sme2 setup history` again")
    assert setup.run_setup(True, out.append) == 0
    assert out[-1] == "history: would run: apt-get update && apt-get install -y chromium"


def test_an_llm_has_a_series_per_phase_and_a_prefill_step_is_found_there(tmp_path):
    from tests.fakes.history_docs import llm_session_doc

    store = open_store(str(tmp_path / "h.sqlite"))
    lines = []
    for i in range(24):
        doc = load_results(llm_session_doc(i, 1.2 if i >= 12 else 1.0))
        lines += record_doc(store, doc, f"s{i}.json")
    assert lines[0].endswith("recorded 2 benchmark(s) (+2 LLM phase series: prefill, TTFT) in "
                             + lines[0].split(" in ")[-1])
    built = report.build(store.frame())
    names = sorted(s.name for s in built.series)
    assert names == [f"tiny_llama 8da4w t1 native [{p}] @ vm" for p in
                     ("decode", "prefill", "ttft")] + ["toy_cnn fp32 t1 python @ vm"]
    changed = {c.series for c in built.change_points}
    assert changed == {"tiny_llama 8da4w t1 native [prefill] @ vm",
                       "tiny_llama 8da4w t1 native [ttft] @ vm"}
    assert all(c.commit == f"{12:040x}" and 10 < c.change_pct < 30
               for c in built.change_points)
    prefill = next(s for s in built.series if "[prefill]" in s.name)
    assert 15 < prefill.rows["median_ms"].iloc[0] < 17      # ms per generation


def test_gate_baselines_from_the_store_keep_an_llms_decode_key_only(tmp_path):
    from pytest_sme2.baselines.store import load
    from pytest_sme2.history.baselines import baseline_dir_from_store
    from tests.fakes.history_docs import llm_session_doc

    store_path = str(tmp_path / "h.sqlite")
    store = open_store(store_path)
    for i in range(3):
        record_doc(store, load_results(llm_session_doc(i)), f"s{i}.json")
    folder, line = baseline_dir_from_store(store_path, "main", tmp_path / "report")
    files = sorted(folder.glob("*.json"))
    assert len(files) == 2, line          # the forward pass, and the LLM's (decode) key
    llm = next(load(f) for f in files if "tiny_llama" in f.name)
    assert 0.9 < llm.sessions[0].blocks[0][0] < 1.1      # decode ms per token, not prefill


def test_an_llms_instruction_counts_follow_their_phase_series():
    """--sme2-measure instructions on an LLM: the decode point carries the count per decode
    token, the prefill point the count per prefill, the TTFT point none."""
    from pytest_sme2.history.records import PHASE_KEY, points
    from pytest_sme2.results import InstructionCount
    from tests.fakes.history_docs import llm_session_doc

    doc = load_results(llm_session_doc(0))
    blocks = [b for b in doc.benchmarks if b.generation is not None]
    for b in blocks:
        b.instructions = InstructionCount(
            per_execute=2_942_806.5, executions=64, method="callgrind", threads=1, hottest=[],
            per_library={}, deterministic_note="", prefill=18_260_002.0, prompt_tokens=64,
            new_tokens=32)
    by_phase = {p.key[PHASE_KEY]: p.instructions for p in points(blocks)}
    assert by_phase == {"decode": 2_942_806.5, "prefill": 18_260_002.0, "ttft": None}
