"""`pytest-sme2 run` on a real toy_cnn export with both built-in runners, and `analyze` on the
ETDump it wrote (the commands' argument errors and the rest: tests/unit/cli/test_cli.py)."""

from __future__ import annotations

import json
import re

import pytest

from pytest_sme2.cli import main


@pytest.mark.parametrize("runner", ["python", "native"])
def test_run_writes_an_etdump_that_analyze_reads(toy_export, tmp_path, runner, capsys):
    out = tmp_path / "out dir" / f"{runner}.etdump"
    assert main(["run", str(toy_export.pte), "--runner", runner, "--runs", "5", "--warmup", "2",
                 "--inputs", str(toy_export.inputs), "--etdump", str(out)]) == 0
    said = capsys.readouterr().out
    assert f"{out}: 7 runs (2 warm-up) with {runner} on host" in said
    # The cold start this one process had: its load, first inference and peak memory.
    assert re.search(r"; load \d+\.\d{3} ms, first inference \d+\.\d{3} ms, peak \d+\.\d MB$",
                     said.strip()), said
    doc = tmp_path / "a.json"
    assert main(["analyze", str(out), "--warmup", "2", "--etrecord", str(toy_export.etrecord),
                 "--json", str(doc)]) == 0
    parsed = json.loads(doc.read_text())
    assert parsed["runs"] == 7 and parsed["e2e"]["n"] == 5
    assert {op["backend"] for op in parsed["operators"] if op["delegated"]} == {"XnnpackBackend"}
