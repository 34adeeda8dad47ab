"""--sme2-benchmark-json: our results in pytest-benchmark's JSON format, checked with
pytest-benchmark's own statistics, loader and ``compare`` command (a test tool, not a
dependency)."""

from __future__ import annotations

import importlib.util
import json
import math
import statistics
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_sme2.report.outputs import write_reports
from pytest_sme2.measure.config import BaseDirs, Sme2Config, config_from_options
from pytest_sme2.errors import Sme2Error
from pytest_sme2.report.benchmark_json import benchmark_stats, write_benchmark_json
from pytest_sme2.results import load_results
from pytest_sme2.measure.session import BenchSession
from pytest_sme2.report.view import SessionView
from tests.fakes.results_docs import single_doc, sme2_doc
from tests.needs import missing

if importlib.util.find_spec("pytest_benchmark") is None:
    # the tool users read our file with: these tests check it reads it unchanged
    missing("pytest-benchmark", 'install the test extra: pip install -e ".[test]"')


def _doc():
    doc = load_results(sme2_doc())
    single = load_results(single_doc())
    doc.benchmarks += single.benchmarks
    return doc


def _compare_command() -> list[str]:
    script = Path(sys.executable).parent / "pytest-benchmark"
    return [str(script)] if script.exists() else [sys.executable, "-m", "pytest_benchmark"]


@pytest.mark.parametrize("samples", [[1.0], [2.0, 1.0], [3.0, 1.0, 2.0], [1, 2, 3, 4, 50],
                                     [0.1 * (i % 7) + 1 for i in range(30)],
                                     [1, 1, 1, 1, 9, 1, 1, 2, 1]])
def test_stats_are_pytest_benchmarks_own(samples):
    from pytest_benchmark.stats import Stats

    theirs = Stats()
    for x in samples:
        theirs.update(x)
    ours = benchmark_stats(samples)
    for key, value in theirs.as_dict().items():
        assert ours[key] == (value if isinstance(value, str) else
                             pytest.approx(value, rel=1e-12, abs=0)), key
    assert ours["iterations"] == 1 and ours["data"] == samples


def test_the_file_holds_one_entry_per_benchmark_with_all_its_timed_runs(tmp_path):
    doc = _doc()
    path = write_benchmark_json(tmp_path / "bench.json", doc,
                                cwd=tmp_path)
    data = json.loads(path.read_text())
    assert set(data) >= {"machine_info", "commit_info", "benchmarks", "datetime", "version"}
    names = [b["name"] for b in data["benchmarks"]]
    assert names == ["test_latency[toy_cnn-fp32-t1-python]",
                     "test_sme2[mobilenet_v3_small-fp16-t1-sme2_off]",
                     "test_sme2[mobilenet_v3_small-fp16-t1-sme2_on]"]
    on = data["benchmarks"][2]
    blocks = [b for b in doc.benchmarks if b.runner_name == "sme2_on"]
    runs = [ms / 1000 for b in blocks for ms in b.e2e_ms]       # every block's runs, in seconds
    assert on["stats"]["rounds"] == len(runs) == 100 and on["stats"]["data"] == runs
    assert on["stats"]["median"] == pytest.approx(statistics.median(runs))
    assert on["group"] == "mobilenet_v3_small fp16 t1"
    assert on["params"] == {"model": "mobilenet_v3_small", "dtype": "fp16", "threads": 1,
                            "runner": "sme2_on"}
    assert on["fullname"] == "bench.py::test_sme2[mobilenet_v3_small-fp16-t1-sme2_on]"
    assert on["extra_info"]["speedup"]["point"] == 2.5
    assert data["machine_info"]["processor"] == "Test SoC (Cortex-X925)"
    assert data["machine_info"]["cpu"]["flags"] == ["sme", "sme2"]
    # Not a git work tree: pytest-benchmark's "unversioned" commit.
    assert data["commit_info"]["id"] == "unversioned"


def test_pytest_benchmark_loads_and_compares_our_file(tmp_path):
    from pytest_benchmark.logger import Logger
    from pytest_benchmark.storage.file import FileStorage

    doc = _doc()
    path = write_benchmark_json(tmp_path / "0001_sme2.json", doc)
    # Its loader (which only warns on a file it cannot read): every benchmark comes back.
    storage = FileStorage(str(tmp_path), default_machine_id="x", logger=Logger(Logger.QUIET))
    loaded = list(storage.load_benchmarks(str(path)))
    assert len(loaded) == 3 and all(math.isfinite(b["ops"]) for b in loaded)

    proc = subprocess.run([*_compare_command(), "compare", str(path)], capture_output=True,
                          text=True, cwd=tmp_path, timeout=120)
    print(proc.stdout, proc.stderr)
    assert proc.returncode == 0, proc.stderr
    assert "Failed to load" not in proc.stdout + proc.stderr
    for b in json.loads(path.read_text())["benchmarks"]:
        assert b["name"] in proc.stdout
    # Medians in pytest-benchmark's unit choice (ms here: us for a 2 ms model is 2,000.0000).
    proc = subprocess.run([*_compare_command(), "compare", "--columns=median",
                           "--time-unit=ms", str(path)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    for b in json.loads(path.read_text())["benchmarks"]:
        assert f"{b['stats']['median'] * 1000:.4f}" in proc.stdout, proc.stdout


def test_the_option_and_its_ini_twin(tmp_path):
    dirs = BaseDirs(invocation=tmp_path / "cwd", rootdir=tmp_path / "root")
    assert config_from_options({}, {}, dirs).benchmark_json is None
    assert config_from_options({"sme2_benchmark_json": "b.json"}, {}, dirs).benchmark_json == \
        (tmp_path / "cwd" / "b.json").resolve()
    assert config_from_options({}, {"sme2_benchmark_json": "out/b.json"}, dirs
                               ).benchmark_json == (tmp_path / "root" / "out" / "b.json").resolve()
    with pytest.raises(Sme2Error, match="--sme2-benchmark-json: .* is a folder"):
        config_from_options({"sme2_benchmark_json": str(tmp_path)}, {}, dirs)


def test_the_session_writes_it_at_the_end(tmp_path, monkeypatch):
    import pytest_sme2.report.markdown.render as markdown

    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    monkeypatch.setattr(markdown, "render_report", lambda doc, out: out / "report.md")
    doc = load_results(single_doc())
    cfg = Sme2Config(benchmark_json=tmp_path / "b.json")
    cfg = replace(cfg, settings=replace(cfg.settings, report_dir=tmp_path / "r"))
    session = BenchSession(cfg, results=doc.benchmarks)
    written = write_reports(session)
    assert tmp_path / "b.json" in written
    assert json.loads((tmp_path / "b.json").read_text())["benchmarks"][0]["stats"]["rounds"] == 20
    # Not asked for: not written.
    session = BenchSession(replace(cfg, benchmark_json=None), results=doc.benchmarks)
    assert not any(p.name == "b.json" for p in write_reports(session)[2:])


def test_unwritable_ci_files_are_one_line_after_the_report(tmp_path, monkeypatch):
    import pytest_sme2.report.markdown.render as markdown

    rendered = []
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "no" / "such" / "summary.md"))
    monkeypatch.setattr(markdown, "render_report",
                        lambda doc, out: rendered.append(out) or out / "report.md")
    doc = load_results(single_doc())
    (tmp_path / "a-file").write_text("")
    cfg = Sme2Config(benchmark_json=tmp_path / "a-file" / "b.json")   # its folder is a file
    cfg = replace(cfg, settings=replace(cfg.settings, report_dir=tmp_path / "r"))
    with pytest.raises(Sme2Error) as e:
        write_reports(BenchSession(cfg, results=doc.benchmarks))
    msg = str(e.value)
    assert "\n" not in msg and rendered                  # report.md was still rendered
    assert f"--sme2-benchmark-json {tmp_path / 'a-file' / 'b.json'}: cannot write it" in msg
    assert "GITHUB_STEP_SUMMARY=" in msg and "cannot append the summary" in msg


def test_load_and_memory_ride_along_in_extra_info(tmp_path):
    from pytest_sme2.results import ProcessStartup, Startup

    doc = _doc()
    for b in doc.benchmarks:
        b.startup = Startup(pte_bytes=2048, processes=[
            ProcessStartup(load_ms=5.0, first_inference_ms=2.0, peak_rss_kb=1000)])
    path = write_benchmark_json(tmp_path / "bench.json", doc,
                                cwd=tmp_path)
    on = json.loads(path.read_text())["benchmarks"][2]
    blocks = sum(1 for b in doc.benchmarks if b.runner_name == "sme2_on")
    assert {k: on["extra_info"][k] for k in ("load_ms", "first_inference_ms", "peak_rss_kb",
                                             "pte_bytes", "cold_loads")} == \
        {"load_ms": 5.0, "first_inference_ms": 2.0, "peak_rss_kb": 1000.0, "pte_bytes": 2048,
         "cold_loads": blocks}


def test_a_generation_is_one_entry_per_phase_that_pytest_benchmark_compares(tmp_path):
    """An LLM: ``...[prefill]`` (the blocks' prefill medians per generation) and ``...[decode]``
    (each timed generation's decode time per token), in seconds, grouped by phase."""
    from pytest_benchmark.logger import Logger
    from pytest_benchmark.storage.file import FileStorage
    from tests.fakes.results_docs import generation_block, llm_doc

    d = llm_doc()
    d["benchmarks"].append(generation_block("8da4w", prefill_ms=20.0, block=1))
    doc = load_results(d)
    path = write_benchmark_json(tmp_path / "0001_llm.json", SessionView.of(doc.benchmarks))
    entries = {b["name"]: b for b in json.loads(path.read_text())["benchmarks"]}
    assert list(entries) == ["test_latency[toy_cnn-fp32-t1-python]",
                             "test_llm[tiny_llama-8da4w-t1-native][prefill]",
                             "test_llm[tiny_llama-8da4w-t1-native][decode]",
                             "test_llm[tiny_llama-8da8w-t1-native][prefill]",
                             "test_llm[tiny_llama-8da8w-t1-native][decode]"]
    pre = entries["test_llm[tiny_llama-8da4w-t1-native][prefill]"]
    dec = entries["test_llm[tiny_llama-8da4w-t1-native][decode]"]
    assert pre["stats"]["data"] == [0.016, 0.020] and pre["stats"]["rounds"] == 2
    assert pre["group"] == "tiny_llama 8da4w t1 prefill" and pre["params"]["phase"] == "prefill"
    assert pre["fullname"] == \
        "benchmarks/test_llm.py::test_llm[tiny_llama-8da4w-t1-native][prefill]"
    assert pre["extra_info"]["tokens_per_s"] == 3600.0     # the median of 4,000 and 3,200
    assert pre["extra_info"]["sme2"] == "absent" and pre["extra_info"]["ttft_ms"] == 18.05
    assert dec["stats"]["rounds"] == 20 and dec["stats"]["median"] == pytest.approx(0.001)
    assert dec["extra_info"]["token_p90_ms"] == pytest.approx(1.2)
    assert entries["test_llm[tiny_llama-8da8w-t1-native][decode]"]["extra_info"]["sme2"] == \
        "proven"
    storage = FileStorage(str(tmp_path), default_machine_id="x", logger=Logger(Logger.QUIET))
    loaded = list(storage.load_benchmarks(str(path)))
    assert len(loaded) == 5 and all(math.isfinite(b["ops"]) for b in loaded)
    proc = subprocess.run([*_compare_command(), "compare", "--group-by=group", str(path)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "[decode]" in proc.stdout and "[prefill]" in proc.stdout


def test_the_timer_says_whether_the_runs_were_timed_untraced():
    from pytest_sme2.report.benchmark_json import TIMER, UNTRACED_TIMER, benchmark_document

    doc = single_doc()
    traced = benchmark_document(
        SessionView.of(load_results(doc).benchmarks))["benchmarks"][0]["options"]
    doc["benchmarks"][0]["timing"] = {"mode": "untraced", "source": "the runner's clock"}
    untraced = benchmark_document(
        SessionView.of(load_results(doc).benchmarks))["benchmarks"][0]["options"]
    traced, untraced = traced["timer"], untraced["timer"]
    assert (traced, untraced) == (TIMER, UNTRACED_TIMER)
