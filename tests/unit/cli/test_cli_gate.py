"""`pytest-sme2 gate RESULTS.json`: the gate's entry point outside pytest, as cli.py runs it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pytest_sme2.baselines.key import BaselineKey
from pytest_sme2.baselines.store import save
from pytest_sme2.results import BlockResult
from tests.unit.gate.test_gate import _history, _steady_past
from tests.fakes.baselines import bench_result, under_test_result


# -- pytest-sme2 gate RESULTS.json (the same entry point, outside pytest) ---------------------


def _results_json(tmp_path: Path, blocks: list[BlockResult], session_id: str = "") -> Path:
    from pytest_sme2.results import results_document

    path = tmp_path / "results.json"
    session = {"baseline_session_id": session_id} if session_id else {}
    path.write_text(json.dumps(results_document(blocks, (), session)))
    return path


def _gate_cli(capsys, *args) -> tuple[int, list[str], str]:
    from pytest_sme2.cli import main

    code = main(["gate", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def test_gate_command_judges_each_benchmark_and_exits_1_on_a_regression(tmp_path, capsys):
    folder = _steady_past(tmp_path)
    slow, same = (1.6, 1.61, 1.59), (1.0, 1.01, 0.99)
    doc = _results_json(tmp_path, [under_test_result(slow, model_source="bbbb", program="qqqq"),
                                   under_test_result(slow), bench_result(same, threads=2)])
    code, lines, err = _gate_cli(capsys, doc, "--baseline-dir", folder)
    assert code == 1 and err == ""
    assert len(lines) == 2           # one per benchmark: its two blocks are judged together
    assert re.fullmatch(r"toy_cnn fp32 t1 python: regression 1\.5\dx \[\d\.\d\d, \d\.\d\d\] vs "
                        r"baseline; changed since baseline: .*", lines[0])
    assert lines[1].startswith("toy_cnn fp32 t2 python: not compared: no baseline "
                               "toy_cnn-fp32-t2-python-")
    assert _gate_cli(capsys, doc, "--baseline-dir", folder, "--fail-on-regression", "200")[0] == 0


def test_gate_command_passes_the_same_code_and_never_judges_a_session_by_itself(tmp_path,
                                                                              capsys):
    folder = _steady_past(tmp_path)
    code, lines, _ = _gate_cli(capsys, _results_json(tmp_path, [bench_result((1.0, 1.01, 0.99))]),
                               "--baseline-dir", folder)
    assert code == 0 and re.fullmatch(r"toy_cnn fp32 t1 python: no change \d\.\d\dx .* vs baseline",
                                      lines[0])
    # A session saved with --save-baseline names its baseline session in results.json, and is
    # judged against the sessions before it: 5x slower is a regression against those three,
    # while with itself among them the noise floor would swallow it.
    save([bench_result((5.0,))], folder, session_id="this-one", commit=None)
    assert _gate_cli(capsys, _results_json(tmp_path, [bench_result((5.0,))], "this-one"),
                     "--baseline-dir", folder)[0] == 1
    assert _gate_cli(capsys, _results_json(tmp_path, [bench_result((5.0,))]),
                     "--baseline-dir", folder)[0] == 0


def test_gate_command_fails_on_a_foreign_baseline_unless_allowed(tmp_path, capsys):
    folder = _steady_past(tmp_path)
    doc = _results_json(tmp_path, [bench_result(device={"cpu": "Intel Xeon"})])
    code, lines, _ = _gate_cli(capsys, doc, "--baseline-dir", folder)
    assert code == 1 and lines[0].startswith(
        "toy_cnn fp32 t1 python: not compared: baseline recorded in another environment")
    code, lines, _ = _gate_cli(capsys, doc, "--baseline-dir", folder, "--allow-foreign-baseline")
    assert code == 0 and " vs baseline" in lines[0]


def test_gate_command_judges_categories_when_asked(tmp_path, capsys):
    folder = _history(tmp_path, {"GEMM": 0.5, "Convolution": 0.4})
    doc = _results_json(tmp_path, [bench_result((1.0, 1.01, 0.99), extra={
        "categories_ms": {"GEMM": 1.0, "Convolution": 0.4}})])
    assert _gate_cli(capsys, doc, "--baseline-dir", folder)[0] == 0
    code, lines, _ = _gate_cli(capsys, doc, "--baseline-dir", folder, "--categories", "all")
    assert code == 1 and re.fullmatch(r"toy_cnn fp32 t1 python: no change .* vs baseline; GEMM "
                                      r"regression 2\.\d\dx .* vs baseline", lines[0])


@pytest.mark.parametrize("setup,args,message", [
    (lambda d: None, ["--baseline-dir", "{bl}"], "results.json: no such results file"),
    (lambda d: d.write_text("{}"), ["--baseline-dir", "{bl}"],
     "not a pytest-sme2 results document"),
    (lambda d: d.write_text('{"schema": "pytest-sme2/results/1", "benchmarks": []}'),
     ["--baseline-dir", "{bl}"], "no benchmarks to judge"),
    (lambda d: d.write_text('{"schema": "pytest-sme2/results/1", "benchmarks": [{}]}'),
     ["--baseline-dir", "{bl}"], "a results document this version cannot read"),
    (lambda d: d.write_text(json.dumps({"schema": "pytest-sme2/results/1", "benchmarks": [
        bench_result().to_json()]})), ["--baseline-dir", "{bl}/missing"], "no such folder"),
    (lambda d: d.write_text(json.dumps({"schema": "pytest-sme2/results/1", "benchmarks": [
        bench_result().to_json()]})), ["--baseline-dir", "{bl}", "--fail-on-regression", "-1"],
     "--fail-on-regression must be a percentage of 0 or more"),
    (lambda d: d.write_text(json.dumps({"schema": "pytest-sme2/results/1", "benchmarks": [
        bench_result().to_json()]})), ["--baseline-dir", "{bl}", "--categories", "Embedding"],
     "--categories: unknown category 'Embedding'"),
])
def test_gate_command_bad_input_exits_2_with_one_line(tmp_path, capsys, setup, args, message):
    doc = tmp_path / "results.json"
    setup(doc)
    (tmp_path / "bl").mkdir()
    code, lines, err = _gate_cli(capsys, doc, *[a.format(bl=tmp_path / "bl") for a in args])
    assert code == 2 and lines == [] and message in err and len(err.splitlines()) == 1


def test_gate_command_a_corrupt_baseline_is_bad_input_never_a_pass(tmp_path, capsys):
    (tmp_path / "bl").mkdir()
    (tmp_path / "bl" / BaselineKey.from_result(bench_result()).filename).write_text("{trunc")
    code, _, err = _gate_cli(capsys, _results_json(tmp_path, [bench_result()]), "--baseline-dir",
                             tmp_path / "bl")
    assert code == 2 and "is corrupt or truncated" in err
