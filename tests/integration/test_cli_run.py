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


def test_output_paths_with_commas_spaces_quotes_work_on_the_host(toy_export, tmp_path, capsys):
    """Issue 32, item 4, on the host: both runners, and the preload library's sampling, whose
    address map and samples are named after the output."""
    folder = tmp_path / "out,a b=c'd\"e%d"
    for runner in ("python", "native"):
        out = folder / f"q.{runner},sme2=off '%s'.etdump"
        assert main(["run", str(toy_export.pte), "--runner", runner, "--runs", "2",
                     "--warmup", "0", "--etdump", str(out)]) == 0
        assert f"{out}: 2 runs (0 warm-up) with {runner} on host" in capsys.readouterr().out
    sampled = folder / "s,x=y 'z'.csv"
    # Enough CPU time for the sampler's timer (the toy model runs ~0.1 ms).
    assert main(["run", str(toy_export.pte), "--runner", "native", "--runs", "3000",
                 "--warmup", "0", "--etdump", str(folder / "s,x=y 'z'.etdump"),
                 "--kernel-sample", str(sampled)]) == 0
    assert sampled.is_file() and (folder / "s,x=y 'z'.maps.txt").is_file()
