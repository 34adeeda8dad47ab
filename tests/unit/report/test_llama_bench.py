"""--sme2-llama-bench: the session's generations as llama-bench rows, a test per phase, in each
format the extension names, with the columns, SQL types and non-null join keys llama.cpp's
scripts/compare-llama-bench.py reads; two sessions at two commits in one file join row for
row on its key properties (the script itself is not vendored: the real run is recorded in
docs/outputs.md)."""

from __future__ import annotations

import csv
import json
import sqlite3
import subprocess
from dataclasses import replace
from datetime import datetime, timezone

import pytest

import pytest_sme2.report.markdown.render as markdown
from pytest_sme2.errors import Sme2Error
from pytest_sme2.measure.config import BaseDirs, Sme2Config, config_from_options
from pytest_sme2.measure.session import BenchSession
from pytest_sme2.report.outputs import write_reports
from pytest_sme2.report.llama_bench import (FIELDS, SAMPLES, TABLE, build_info,
                                            llama_bench_rows, write_llama_bench)
from pytest_sme2.results import load_results
from pytest_sme2.report.view import SessionView
from tests.fakes.results_docs import llm_doc

# What compare-llama-bench.py joins two commits' rows on (LLAMA_BENCH_KEY_PROPERTIES; the last
# three since late 2025), and the other keys it requires of every row; none may be null.
JOIN_KEYS = ("cpu_info gpu_info backends n_gpu_layers tensor_buft_overrides model_filename "
             "model_type n_batch n_ubatch embeddings cpu_mask cpu_strict poll n_threads type_k "
             "type_v use_mmap no_kv_offload split_mode main_gpu tensor_split flash_attn "
             "n_prompt n_gen n_depth n_cpu_moe fit_target fit_min_ctx").split()
REQUIRED = (*JOIN_KEYS, "build_commit", "test_time", "avg_ts")
NOW = datetime(2026, 11, 27, 20, 0, tzinfo=timezone.utc)


def _rows(commit: str):
    doc = load_results(llm_doc())
    return llama_bench_rows(doc, (commit, 7), now=NOW)


def test_a_row_per_phase_with_llama_bench_fields_and_types():
    rows = _rows("abc1234")
    assert [(r["model_type"], r["n_prompt"], r["n_gen"]) for r in rows] == [
        ("tiny_llama 8da4w (native runner)", 64, 0), ("tiny_llama 8da4w (native runner)", 0, 32),
        ("tiny_llama 8da8w (native runner)", 64, 0), ("tiny_llama 8da8w (native runner)", 0, 32)]
    sql_types = {"TEXT": str, "INTEGER": int, "REAL": float}
    for r in rows:
        assert list(r) == [*FIELDS, *SAMPLES] or set(r) == {*FIELDS, *SAMPLES}
        for name, kind in FIELDS.items():
            assert isinstance(r[name], sql_types[kind]), (name, r[name])
        assert all(r[k] is not None for k in REQUIRED)
        assert r["build_commit"] == "abc1234" and r["test_time"] == "2026-11-27T20:00:00Z"
        assert len(r["samples_ns"]) == len(r["samples_ts"]) > 0
    decode = rows[1]      # 8da4w: 1.0 ms per token, 32 tokens, per generation
    assert decode["avg_ns"] == pytest.approx(32e6, rel=0.01)
    assert decode["avg_ts"] == pytest.approx(1000, rel=0.01)
    prefill = rows[2]     # 8da8w: 8 ms for 64 tokens, one sample per timed generation
    assert prefill["avg_ns"] == pytest.approx(8e6, rel=1e-6)
    assert prefill["avg_ts"] == pytest.approx(8000, rel=0.01) and prefill["stddev_ts"] > 0


def test_samples_are_one_per_timed_generation_as_llama_bench_takes_one_per_repetition():
    """Issue 49, item 6: tg rows carried one sample per decode step times N (960 for 30
    generations, a 4.5 ms step read as 145 ms), pp rows one sample and stddev_ns 0."""
    doc = llm_doc()
    block = doc["benchmarks"][-1]                   # 8da8w: 10 timed generations
    steps = [0.5] * 10 * 32
    steps[5] = 4.5                                  # one slow step in the first generation
    block["e2e_ms"] = steps
    decode_samples = [16.0] * 10
    decode_samples[0] = 20.0
    block["generation"]["decode"]["samples_ms"] = decode_samples
    rows = llama_bench_rows(SessionView.of(load_results(doc).benchmarks, []), ("c", 1), now=NOW)
    pp, tg = rows[2], rows[3]
    assert len(pp["samples_ns"]) == len(tg["samples_ns"]) == 10
    assert tg["samples_ns"] == [round(ms * 1e6) for ms in decode_samples]
    assert pp["stddev_ns"] > 0 and tg["stddev_ns"] > 0
    # A document written before the samples were kept: decode from its steps, N per
    # generation, summed (not each step times N); prefill one per block.
    for phase in ("prefill", "decode"):
        del block["generation"][phase]["samples_ms"]
    rows = llama_bench_rows(SessionView.of(load_results(doc).benchmarks, []), ("c", 1), now=NOW)
    assert rows[3]["samples_ns"] == [round(20e6)] + [round(16e6)] * 9
    assert len(rows[2]["samples_ns"]) == 1


def test_the_model_fields_mean_what_llama_benchs_do(tmp_path):
    """model_filename is the model as named (llama-bench's -m, the same at every commit),
    model_n_params what our export recorded, cpu_mask llama-bench's hex text (issue 49)."""
    folder = tmp_path / "tiny_llama" / "8da8w-0123"
    folder.mkdir(parents=True)
    (folder / "model.pte").write_bytes(b"")
    (folder / "meta.json").write_text(json.dumps({"parameters": 215360}))
    doc = llm_doc()
    pinned, plain = doc["benchmarks"][-2:]
    pinned["pte"], pinned["cpu_mask"] = str(folder / "model.pte"), "f0"
    rows = llama_bench_rows(SessionView.of(load_results(doc).benchmarks, []), ("c", 1), now=NOW)
    assert {r["model_filename"] for r in rows} == {"tiny_llama"}
    assert [r["model_n_params"] for r in rows] == [215360, 215360, 0, 0]   # 0: not ours
    assert [r["cpu_mask"] for r in rows] == ["0xf0", "0xf0", "0x0", "0x0"]


@pytest.mark.parametrize("ext", [".sqlite", ".jsonl"])
def test_two_sessions_at_two_commits_join_on_the_scripts_keys(tmp_path, ext):
    path = tmp_path / f"bench{ext}"
    write_llama_bench(path, _rows("aaaaaaa"))
    write_llama_bench(path, _rows("bbbbbbb"))     # appended, as llama-bench's rows are
    db = sqlite3.connect(tmp_path / "read.db") if ext == ".jsonl" else sqlite3.connect(path)
    if ext == ".jsonl":      # read as the script reads JSONL: into a table of llama-bench's
        db.execute(f"CREATE TABLE {TABLE} ("
                   + ", ".join(f"{k} {t}" for k, t in FIELDS.items()) + ")")
        for line in path.read_text().splitlines():
            row = {k: v for k, v in json.loads(line).items() if k in FIELDS}
            db.execute(f"INSERT INTO {TABLE} ({', '.join(row)}) VALUES "
                       f"({', '.join('?' * len(row))})", tuple(row.values()))
    columns = [c[1] for c in db.execute(f"PRAGMA table_info({TABLE})")]
    assert set(REQUIRED) <= set(columns)
    on = " AND ".join(f"tb.{k} = tc.{k}" for k in JOIN_KEYS)
    joined = db.execute(f"SELECT tb.n_prompt, tb.n_gen, tb.avg_ts, tc.avg_ts FROM {TABLE} tb "
                        f"JOIN {TABLE} tc ON {on} AND tb.build_commit = 'aaaaaaa' AND "
                        "tc.build_commit = 'bbbbbbb'").fetchall()
    assert len(joined) == 4 and all(a == b for _, _, a, b in joined)


def test_csv_has_llama_bench_header_and_json_is_a_list(tmp_path):
    write_llama_bench(tmp_path / "b.csv", _rows("c0ffee1"))
    with open(tmp_path / "b.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == list(FIELDS) and len(rows) == 4
    write_llama_bench(tmp_path / "b.json", _rows("c0ffee1"))
    assert len(json.loads((tmp_path / "b.json").read_text())) == 4
    with pytest.raises(Sme2Error) as e:
        write_llama_bench(tmp_path / "b.txt", [])
    assert ".json, .jsonl, .csv, .sqlite" in str(e.value)


def test_build_commit_is_the_users_repository_commit(tmp_path):
    assert build_info(tmp_path) == ("unknown", 0)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(tmp_path)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "one"], check=True)
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], check=True,
                          capture_output=True, text=True).stdout.strip()
    assert build_info(tmp_path) == (head, 1)


def test_the_option_its_ini_twin_and_the_session_writes_it(tmp_path, monkeypatch):
    dirs = BaseDirs(invocation=tmp_path / "cwd", rootdir=tmp_path / "root")
    assert config_from_options({}, {}, dirs).llama_bench is None
    cfg = config_from_options({}, {"sme2_llama_bench": "out/lb.sqlite"}, dirs)
    assert cfg.llama_bench == (tmp_path / "root" / "out" / "lb.sqlite").resolve()
    assert cfg.rootdir == tmp_path / "root"
    for bad in ("lb.txt", str(tmp_path)):
        with pytest.raises(Sme2Error) as e:
            config_from_options({"sme2_llama_bench": bad}, {}, dirs)
        assert "--sme2-llama-bench: " in str(e.value) and ".json, .jsonl, .csv, .sqlite" in \
            str(e.value) and "\n" not in str(e.value)

    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    monkeypatch.setattr(markdown, "render_report", lambda doc, out: out / "report.md")
    doc = load_results(llm_doc())
    cfg = Sme2Config(llama_bench=tmp_path / "lb.jsonl", rootdir=tmp_path)
    cfg = replace(cfg, settings=replace(cfg.settings, report_dir=tmp_path / "r"))
    assert tmp_path / "lb.jsonl" in write_reports(BenchSession(cfg, results=doc.benchmarks))
    rows = [json.loads(line) for line in (tmp_path / "lb.jsonl").read_text().splitlines()]
    assert len(rows) == 4 and {r["build_commit"] for r in rows} == {"unknown"}
