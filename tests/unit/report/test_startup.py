"""Load time, first inference, memory and .pte size: the runner's summary line, the figures
taken from an ETDump, the record in results.json and baselines, the gate's verdicts on them,
and where they show (terminal, report)."""

from __future__ import annotations

import json
from pathlib import Path
from dataclasses import replace

import pandas as pd
import pytest
from tests.fakes.baselines import bench_result as _result

from pytest_sme2.analysis.startup import (load_source, memory_source, process_startup,
                                          traced_method_load_ms)
from pytest_sme2.baselines.store import load, save
from pytest_sme2.measure.config import BaseDirs, config_from_options
from pytest_sme2.gate.policy import GatePolicy
from pytest_sme2.errors import Sme2Error
from pytest_sme2.gate.rule import NO_CHANGE, LOAD, MEMORY, NOT_COMPARED, REGRESSION, evaluate
from pytest_sme2.report.markdown.render import render_markdown
from pytest_sme2.report.terminal import benchmark_line, startup_cells, summary_table
from pytest_sme2.results import (BlockResult, ProcessStartup, Startup, load_results,
                                 pool_startup, results_document)
from pytest_sme2.analysis.runner_summary import RunnerSummary, parse_summary
from pytest_sme2.report.view import SessionView

NATIVE_LINE = ('{"threads": 1, "executions": 33, "program_load_ms": 0.5, '
               '"method_load_ms": 16.25, "rss_before_load_kb": 4000, '
               '"rss_after_load_kb": 17000, "peak_rss_kb": 26868}')


def _events(load_ms: float | None = 16.0, first_ms: float = 3.8) -> pd.DataFrame:
    rows = []
    if load_ms is not None:
        rows += [{"run": -1, "name": "Method::init", "duration_ms": load_ms - 0.1},
                 {"run": -1, "name": "Program::load_method", "duration_ms": load_ms}]
    rows += [{"run": 0, "name": "Method::execute", "duration_ms": first_ms},
             {"run": 1, "name": "Method::execute", "duration_ms": 1.0}]
    return pd.DataFrame(rows)


# -- the runner's summary line ---------------------------------------------------------------

def test_summary_is_the_last_json_line_of_stdout():
    out = f"Iteration 1 of 1: 3.0 ms\n{{not json}}\n{NATIVE_LINE}\n"
    s = parse_summary(out)
    assert (s.threads, s.executions, s.program_load_ms, s.method_load_ms) == (1, 33, 0.5, 16.25)
    assert (s.peak_rss_kb, s.load_rss_kb) == (26868, 13000)


def test_a_user_executor_runner_prints_no_summary():
    s = parse_summary("I 00:00 executorch: Model executed successfully 30 time(s)\n")
    assert s == RunnerSummary() and s.load_rss_kb is None


def test_null_memory_where_the_runner_has_no_proc_status():
    s = parse_summary('{"threads": 1, "executions": 2, "program_load_ms": 0.1, '
                      '"method_load_ms": 1.0, "rss_before_load_kb": null, '
                      '"rss_after_load_kb": null, "peak_rss_kb": null}')
    assert s.peak_rss_kb is None and s.load_rss_kb is None and s.method_load_ms == 1.0


def test_wrong_types_are_dropped_not_trusted():
    s = parse_summary('{"threads": "two", "peak_rss_kb": true, "program_load_ms": [1]}')
    assert s.threads is None and s.peak_rss_kb is None and s.program_load_ms is None


# -- one process from its ETDump and summary -------------------------------------------------

def test_method_load_comes_from_the_runtime_event_program_load_from_the_runner():
    events = _events(load_ms=16.0)
    summary = parse_summary(NATIVE_LINE)
    p = process_startup(events, pd.Series([3.8, 1.0]), summary)
    # The ETDump's Program::load_method wins over the runner's own timer (16.25).
    assert (p.method_load_ms, p.program_load_ms, p.load_ms) == (16.0, 0.5, 16.5)
    assert p.first_inference_ms == 3.8           # run 0, warm-up or not
    assert (p.peak_rss_kb, p.load_rss_kb) == (26868, 13000)
    assert load_source(events, summary) == \
        "Program::load_method (ETDump) + Module::load (runner's timer)"
    assert memory_source(summary) == "VmHWM / VmRSS of the runner process"


def test_without_a_load_event_the_runner_timer_is_used_and_said():
    events = _events(load_ms=None)
    summary = parse_summary(NATIVE_LINE)
    assert traced_method_load_ms(events) is None
    p = process_startup(events, pd.Series([3.8, 1.0]), summary)
    assert p.method_load_ms == 16.25 and p.load_ms == 16.75
    assert load_source(events, summary) == \
        "method load (runner's timer) + Module::load (runner's timer)"


def test_a_user_executor_runner_gets_the_traced_method_load_only():
    events, summary = _events(load_ms=12.0), RunnerSummary()
    p = process_startup(events, pd.Series([3.8, 1.0]), summary)
    assert (p.load_ms, p.program_load_ms, p.peak_rss_kb) == (12.0, None, None)
    assert load_source(events, summary) == \
        "Program::load_method (ETDump); program load not timed by this runner"
    assert memory_source(summary).startswith("not reported by this runner")
    assert load_source(_events(load_ms=None), summary).startswith("not measured")


def test_memory_under_emulation_and_of_the_python_runtime_is_said_for_what_it_is():
    python = RunnerSummary(peak_rss_kb=180000, rss_after_load_includes="first run",
                           peak_includes="the Python interpreter, torch and the runtime "
                                         "extension")
    assert memory_source(python) == (
        "VmHWM / VmRSS of the runner process (it holds the Python interpreter, torch and the "
        "runtime extension); load memory includes the first run")
    assert "QEMU process" in memory_source(RunnerSummary(peak_rss_kb=1), emulated=True)


# -- the record --------------------------------------------------------------------------------

def _startup(loads=(16.5, 10.0, 12.0), peaks=(26868, 26792, 26900), first=(3.8, 3.6, 4.0),
             pte=10_199_968) -> Startup:
    return Startup(pte_bytes=pte, processes=[
        ProcessStartup(load_ms=lo, method_load_ms=lo - 0.5, program_load_ms=0.5,
                       first_inference_ms=f, peak_rss_kb=pk, load_rss_kb=13000)
        for lo, pk, f in zip(loads, peaks, first)],
        load_source="Program::load_method (ETDump) + Module::load (runner's timer)",
        memory_source="VmHWM / VmRSS of the runner process")


def test_medians_are_over_cold_processes():
    s = _startup()
    assert (s.load_ms, s.first_inference_ms, s.peak_rss_kb, s.loads) == (12.0, 3.8, 26868, 3)
    assert Startup().load_ms is None and Startup().loads == 0


def test_results_json_round_trips_byte_for_byte_and_old_documents_have_none():
    r = _result()
    r.startup = _startup()
    doc = results_document([r], ())
    text = json.dumps(doc)
    again = load_results(json.loads(text))
    assert again.benchmarks[0].startup == r.startup
    assert json.dumps(results_document(again.benchmarks, (), doc["session"])) == text
    old = BlockResult.from_json({k: v for k, v in r.to_json().items() if k != "startup"})
    assert old.startup is None and "startup" not in old.to_json() and old.extra == {}


def test_a_comparison_side_pools_the_processes_of_its_blocks():
    a, b = _result(), _result()
    a.startup, b.startup = _startup(loads=(10.0,)), _startup(loads=(14.0,))
    pooled = pool_startup([a, b])
    assert pooled.loads == 2 and pooled.load_ms == 12.0
    assert pool_startup([_result()]) is None


# -- where it shows ----------------------------------------------------------------------------

def test_terminal_line_and_table_cells():
    r = _result()
    r.startup = _startup()
    assert benchmark_line(r).endswith(
        " | load 12.0 ms (3 cold), first inference 3.80 ms, peak 26.2 MB")
    assert startup_cells(r.startup) == ("12.0, 3.80", "26.2, 9.73")
    assert startup_cells(None) == ("-", "-")
    header, _, row = summary_table(SessionView.of([r]))
    assert "load, 1st ms" in header and "peak, pte MB" in header
    assert "12.0, 3.80" in row and "26.2, 9.73" in row


def test_report_has_a_load_and_memory_section_with_both_sides_of_a_comparison():
    from tests.fakes.results_docs import sme2_doc

    doc = load_results(sme2_doc())
    for b in doc.benchmarks:   # the SME2 side loads slower (packing) and holds more
        on = b.runner_name == doc.comparisons[0].candidate
        b.startup = _startup(loads=(30.0 if on else 20.0,), peaks=(40960 if on else 30720,),
                             first=(2.0,), pte=2 ** 20)
    md = render_markdown(doc)
    section = md.split("## Load and Memory", 1)[1].split("\n## ", 1)[0]
    rows = [ln for ln in section.splitlines() if ln.startswith("| mobilenet")]
    assert len(rows) == 2
    assert "| 1.0 |" in rows[0] and "| 20.000 |" in rows[0] and rows[0].endswith("| base |")
    assert rows[1].endswith("| load 1.50x, peak 1.33x |")
    assert "Load time (" in section and "Program::load_method (ETDump)" in section


def test_report_without_startup_figures_has_no_section():
    from tests.fakes.results_docs import sme2_doc

    assert "## Load and Memory" not in render_markdown(sme2_doc())


# -- the gate ----------------------------------------------------------------------------------

def _measured(loads, peaks, samples=(1.0, 1.01, 0.99)):
    r = _result(samples)
    r.startup = _startup(loads=loads, peaks=peaks, first=[1.0] * len(loads))
    return r


def _record(folder, sessions):
    for i, (loads, peaks) in enumerate(sessions):
        save([_measured(loads, peaks)], folder, session_id=f"s{i}", commit=False)


STEADY = [((10.0, 10.2, 9.9), (26000, 26010, 25990))] * 3


def test_baselines_keep_one_load_and_peak_per_cold_process(tmp_path):
    _record(tmp_path, STEADY[:1])
    (path,) = tmp_path.glob("*.json")
    session = load(path).sessions[0]
    assert session.load_ms == [10.0, 10.2, 9.9] and session.peak_rss_kb == [26000, 26010, 25990]
    text = path.read_text()
    assert '"load_ms": [10.0, 10.2, 9.9]' in text     # one line, for git diff
    # A file from before these fields loads with none.
    doc = json.loads(text)
    for s in doc["sessions"]:
        del s["load_ms"], s["peak_rss_kb"]
    path.write_text(json.dumps(doc))
    assert load(path).sessions[0].load_ms == []


def test_a_corrupt_load_list_names_the_file(tmp_path):
    _record(tmp_path, STEADY[:1])
    (path,) = tmp_path.glob("*.json")
    doc = json.loads(path.read_text())
    doc["sessions"][0]["peak_rss_kb"] = [-1]
    path.write_text(json.dumps(doc))
    with pytest.raises(Sme2Error, match=rf"{path.name}: malformed \(session 0 'peak_rss_kb'"):
        load(path)


def test_more_memory_fails_an_enforced_gate_with_its_own_threshold(tmp_path):
    _record(tmp_path, STEADY)
    report = evaluate([_measured((10.1, 10.0, 9.8), (39000, 39010, 38990))], tmp_path,
                      GatePolicy(fail_on_regression=10))
    judged = report.startup
    assert judged[LOAD].status == NO_CHANGE and judged[MEMORY].status == REGRESSION
    assert judged[MEMORY].reason.startswith("peak memory 50.0% more: median 3.9e+04 kB")
    assert "its point passes half the threshold 10%" in judged[MEMORY].reason
    assert report.failure(GatePolicy(fail_on_regression=10)).startswith(
        "regression against the baseline: peak memory 50.0% more")
    r = _measured((10.0,), (39000,))
    report.record_on(r)
    assert r.startup_judgements["memory"].status == REGRESSION
    assert r.startup_judgements["memory"].measure == MEMORY
    assert "peak memory REGRESSION 1.50x" in summary_table(SessionView.of([r]))[2]


def test_slower_loads_fail_with_the_load_threshold_and_off_only_reports(tmp_path):
    _record(tmp_path, STEADY)
    slow = [_measured((15.0, 15.2, 14.9), (26000, 26000, 26000))]
    at_25 = GatePolicy(fail_on_regression=10, load_threshold_pct=25)
    assert evaluate(slow, tmp_path, at_25).startup[LOAD].status == REGRESSION
    assert "load time 50.0% slower" in evaluate(slow, tmp_path, at_25).failure(at_25)
    at_150 = replace(at_25, load_threshold_pct=150)   # 50% is a third of the change to detect
    assert evaluate(slow, tmp_path, at_150).startup[LOAD].status == NO_CHANGE
    off = replace(at_25, load_threshold_pct=None)
    report = evaluate(slow, tmp_path, off)
    assert report.startup[LOAD].status == REGRESSION and not report.startup[LOAD].enforced
    assert report.failure(off) is None
    assert report.startup[LOAD].to_dict()["enforced"] is False


def test_a_baseline_without_load_times_says_so(tmp_path):
    save([_result((1.0, 1.01, 0.99))], tmp_path, commit=False)
    judged = evaluate([_measured((10.0,), (26000,))], tmp_path).startup
    assert judged[LOAD].status == NOT_COMPARED
    assert "baseline records no load time; record it again" in judged[LOAD].reason


def test_no_startup_figures_no_startup_judgements(tmp_path):
    _record(tmp_path, STEADY)
    assert evaluate([_result((1.0, 1.01, 0.99))], tmp_path).startup == {}


# -- options -----------------------------------------------------------------------------------

def _cfg(**values):
    return config_from_options(values, {}, BaseDirs(Path("."), Path(".")))


def test_loads_and_thresholds_options():
    cfg = _cfg(sme2_loads="5", sme2_load_threshold="off", sme2_memory_threshold="3")
    assert cfg.settings.loads == 5
    assert cfg.gate.load_threshold_pct is None and cfg.gate.memory_threshold_pct == 3.0
    assert _cfg().settings.loads == 3 and _cfg().gate.load_threshold_pct == 25.0
    with pytest.raises(Sme2Error, match="--sme2-loads must be 1 or more, got 0"):
        _cfg(sme2_loads="0")
    with pytest.raises(Sme2Error, match="--sme2-memory-threshold must be a percentage of 0 or "
                                        "more or 'off', got 'lots'"):
        _cfg(sme2_memory_threshold="lots")


def test_gate_command_names_a_memory_regression_and_its_threshold(tmp_path, capsys):
    from pytest_sme2.cli import main

    folder = tmp_path / "bl"
    _record(folder, STEADY)
    doc = tmp_path / "results.json"
    doc.write_text(json.dumps(results_document(
        [_measured((10.0, 10.1, 9.9), (39000, 39010, 38990))], ())))
    assert main(["gate", str(doc), "--baseline-dir", str(folder)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("toy_cnn fp32 t1 python: no change 1.00x ")
    assert "; peak memory regression 1.50x [" in out
    assert main(["gate", str(doc), "--baseline-dir", str(folder),
                 "--memory-threshold", "off"]) == 0
    assert main(["gate", str(doc), "--baseline-dir", str(folder),
                 "--memory-threshold", "150"]) == 0
    capsys.readouterr()
    assert main(["gate", str(doc), "--baseline-dir", str(folder),
                 "--memory-threshold", "x"]) == 2
    assert "--memory-threshold must be a percentage of 0 or more or 'off', got 'x'" in \
        capsys.readouterr().err


def test_each_benchmark_page_has_its_load_and_memory(tmp_path):
    from pytest_sme2.report.markdown.render import render_report
    from tests.fakes.results_docs import sme2_doc

    doc = load_results(sme2_doc())
    for b in doc.benchmarks:
        b.startup = _startup(loads=(20.0,), peaks=(30720,), first=(2.0,), pte=2 ** 20)
    render_report(doc, tmp_path, charts=False)
    (page,) = (tmp_path / "details").glob("*.md")
    section = page.read_text().split("## Load and Memory", 1)[1].split("\n## ", 1)[0]
    assert "| 20.000 |" in section and "| base |" in section and "Memory (" in section


def test_emulated_load_times_are_said_to_be_no_speed():
    from pytest_sme2.report.markdown.sections import startup_notes

    rows = [{"runner": "sme2_on", "load_source": "x", "memory_source": "y", "emulated": True}]
    notes = startup_notes(rows)
    assert notes[-1].startswith("Emulated CPU (sme2_on): load and first-inference times say "
                                "nothing about a real device's")
    assert not any("Emulated" in n for n in startup_notes([{**rows[0], "emulated": False}]))


def test_a_side_missing_cold_loads_is_said_in_the_report():
    from pytest_sme2.report.markdown.sections import startup_notes

    row = {"point": "toy_cnn fp32 t1", "runner": "native", "load_source": "x",
           "memory_source": "y", "emulated": False, "problem": "load-only process 1 of 2 "
                                                               "failed: gone"}
    assert "toy_cnn fp32 t1 native: fewer cold loads than asked, load-only process 1 of 2 " \
           "failed: gone." in startup_notes([row])
    a, b = _result(), _result()
    a.startup, b.startup = _startup(loads=(1.0,)), replace(_startup(loads=(2.0,)), problem="p")
    assert pool_startup([a, b]).problem == "p"
