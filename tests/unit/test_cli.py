import json
import random
import subprocess
import sys

import pytest

from pytest_sme2.cli import main
from tests.fakes.etdumps import execute_run, make_etdump


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    p = tmp_path_factory.mktemp("cli") / "t.etdump"
    p.write_bytes(make_etdump([execute_run(i * 100_000, [("Add (ND) #1", 1000 * (i + 1))])
                               for i in range(5)]))
    return p


def test_analyze_json(trace, tmp_path, capsys):
    out = tmp_path / "a.json"
    assert main(["analyze", str(trace), "--warmup", "2", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["schema"] == "pytest-sme2/analysis/1"
    assert doc["runs"] == 5 and doc["warmup"] == 2
    assert doc["e2e_ms"] == pytest.approx([0.0012, 0.0022, 0.0032, 0.0042, 0.0052])
    assert doc["e2e"]["n"] == 3 and doc["e2e"]["median_ms"] == pytest.approx(0.0042)
    assert "Method::execute: median 0.004 ms" in capsys.readouterr().out


@pytest.mark.parametrize("content,msg", [
    (None, "no such ETDump file"),
    (b"", "empty file"),
    (bytes(random.Random(0).randrange(256) for _ in range(500)), "not an ETDump"),
])
def test_bad_input_exit_2_one_line(tmp_path, content, msg):
    p = tmp_path / "bad file.etdump"
    if content is not None:
        p.write_bytes(content)
    proc = subprocess.run([sys.executable, "-m", "pytest_sme2.cli", "analyze", str(p)],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert str(p) in proc.stderr and msg in proc.stderr


def test_warmup_covering_all_runs_is_an_error(trace, capsys):
    assert main(["analyze", str(trace), "--warmup", "5"]) == 2
    assert "leaves no timed runs" in capsys.readouterr().err


def test_analyze_does_not_import_torch(trace):
    code = ("import sys; from pytest_sme2.cli import main; main(['analyze', sys.argv[1]]); "
            "assert 'torch' not in sys.modules and 'executorch' not in sys.modules")
    subprocess.run([sys.executable, "-c", code, str(trace)], check=True, capture_output=True)


@pytest.mark.parametrize("args,msg", [
    (["run", "/nope.pte", "--etdump", "x.etdump"], "/nope.pte: no such .pte file"),
    (["run", "{pte}", "--runner", "/bin/nope", "--etdump", "x.etdump"],
     "runner 'nope': /bin/nope does not exist"),
    (["run", "{pte}", "--runs", "0", "--etdump", "x.etdump"], "--runs must be 1 or more"),
    (["run", "{pte}", "--device", "toaster", "--etdump", "x.etdump"],
     "unknown device kind 'toaster'"),
    (["report", "/nope.json"], "/nope.json: no such results file"),
])
def test_cli_errors_exit_2_with_one_line(tmp_path, args, msg, capsys):
    pte = tmp_path / "m.pte"
    pte.write_bytes(b"x")
    assert main([a.format(pte=pte) for a in args]) == 2
    err = capsys.readouterr().err
    assert msg in err and err.count("\n") == 1


def test_report_rejects_other_json(tmp_path, capsys):
    p = tmp_path / "r.json"
    p.write_text('{"schema": "something/else"}')
    assert main(["report", str(p)]) == 2
    assert "not a pytest-sme2 results document" in capsys.readouterr().err


def test_report_of_a_hand_edited_document_is_one_line(tmp_path, capsys):
    p = tmp_path / "r.json"
    p.write_text('{"schema": "pytest-sme2/results/1", "benchmarks": [{"model": "m"}]}')
    assert main(["report", str(p), "--no-charts"]) == 2
    err = capsys.readouterr().err
    assert f"{p}: a results document this version cannot read" in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_analyze_with_a_kernel_trace_proves_sme2(tmp_path, capsys):
    import pandas as pd

    from pytest_sme2.analysis.kernel_trace import (TRACE_COLUMNS, UNATTRIBUTED_COLUMNS,
                                                   KernelTrace, write_kernel_trace_csv)

    mopa = "kai_run_matmul_clamp_f32_f32p2vlx1_f32p2vlx1biasf32_sme2_mopa"
    et = tmp_path / "on.etdump"
    et.write_bytes(make_etdump([execute_run(i * 100_000, [("Convolution (NHWC, PF32) #1", 900)])
                                for i in range(3)]))
    kernels = pd.DataFrame([(mopa, "SME2", "sme2_mopa", "kleidiai", "libx.so", 20, 6)],
                           columns=TRACE_COLUMNS)
    csv = write_kernel_trace_csv(KernelTrace("log", kernels, pd.DataFrame(
        columns=UNATTRIBUTED_COLUMNS), 100, 6), tmp_path / "on.kernels.csv")
    out = tmp_path / "a.json"
    assert main(["analyze", str(et), "--kernel-trace", str(csv), "--json", str(out)]) == 0
    ev = json.loads(out.read_text())["kernel_evidence"]
    assert ev["sme2"] == "proven"
    assert ev["reason"] == f"kernel trace: 1 SME2 micro-kernel executed ({mopa})"
    assert ev["executed_kernels"] == [{"name": mopa, "isa_family": "SME2", "kind": "kleidiai",
                                       "library": "libx.so", "blocks": 20}]
    assert ev["kernel_trace_source"] == str(csv) and ev["streaming_sme_blocks"] == 6
    assert [op["kernel_hint"] for op in json.loads(out.read_text())["operators"]] == [mopa]
    assert "SME2: proven" in capsys.readouterr().out
    assert main(["analyze", str(et), "--kernel-trace", str(tmp_path / "nope.csv")]) == 2
    assert "no such kernel-trace CSV" in capsys.readouterr().err

