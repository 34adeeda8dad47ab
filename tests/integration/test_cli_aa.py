"""`pytest-sme2 aa` for real: the same program against itself by the gate's paired rule on this
host, and its bad input in one line."""

from __future__ import annotations

import json
import subprocess
import sys

CLI = [sys.executable, "-m", "pytest_sme2.cli"]


def test_a_few_aa_judgements_on_the_host(tmp_path, export_cache, toy_export):
    out = subprocess.run(CLI + ["aa", "toy_cnn", "--judgements", "2", "--runs", "10",
                                "--cache-dir", str(export_cache), "--out", str(tmp_path / "aa"),
                                "--json", str(tmp_path / "aa.json")],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("A/A on toy_cnn fp32 t1 native@host: 2 judgements of the program "
                               "against itself by the gate's paired rule (threshold 10%")
    assert len([x for x in lines if x.startswith("  ")]) == 2
    assert any(x.startswith("false alarms: ") and " of 2 judgements" in x for x in lines)
    assert any(x.startswith("smallest change this machine resolves") for x in lines)
    doc = json.loads((tmp_path / "aa.json").read_text())
    assert len(doc["judgements"]) == 2
    assert all(j["pairs"] >= 6 and j["status"] in ("no_change", "cannot_tell", "regression",
                                                   "improvement") for j in doc["judgements"])


def test_bad_input_is_one_line():
    out = subprocess.run(CLI + ["aa", "toy_cnn", "--judgements", "0"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 2 and out.stderr.strip().splitlines() == [
        "pytest-sme2: --judgements must be 1 or more, got 0"]
