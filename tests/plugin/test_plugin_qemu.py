"""`pytest benchmarks --device qemu -k toy_cnn`, as a user runs it: the project's own benchmark
files on the emulated Arm64 CPU with SME2. The SME2 comparison runs (the masked native runner is
the SME2-off side, no --runner needed) and passes on kernel evidence and outputs; timings are
marked as emulated and no speed-up is asserted."""

import json
import shutil
from pathlib import Path

import pytest
from tests.needs import missing

pytestmark = pytest.mark.usefixtures("inner_session_env")

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
# A report folder with a comma, a space, '=' and quotes: every trace path of the session is
# under it, and QEMU splits -E at commas (issue 32, item 4: "maps.txt not found").
REPORT = "out,qemu 'run'=1"


@pytest.fixture
def qemu_ready(provisioned_qemu):
    if not provisioned_qemu:
        missing("QEMU", "run `pytest-sme2 setup qemu`")


def test_benchmarks_on_the_emulated_sme2_cpu(pytester, run_pytest, qemu_ready, export_cache):
    for name in ("test_latency.py", "test_sme2.py"):
        shutil.copy(BENCHMARKS / name, pytester.path / name)
    res = run_pytest(
        "--device=qemu", f"--sme2-cache-dir={export_cache}",
        "--sme2-models=toy_cnn", "--sme2-dtypes=fp32,int8", "--sme2-threads=1",
        f"--report-dir={REPORT}", "-k", "toy_cnn")
    res.assert_outcomes(passed=4)
    # fnmatch: '?' stands for the brackets, which would be character classes.
    res.stdout.fnmatch_lines([
        "sme2: toy_cnn fp32 t1 native: Method::execute median * ms*; SME2 proven "
        "| load * ms (1 cold), first inference * ms, peak * MB "
        "?emulated CPU: timings say nothing about speed?",
        "sme2: sme2_on vs sme2_off on toy_cnn fp32 t1: speed-up *outputs equal*"
        "?emulated CPU: timings say nothing about speed?",
        "*pytest-sme2 summary*",
        "test_sme2_speedup?toy_cnn-fp32-t1?*sme2_off*(base)*absent*",
        "test_sme2_speedup?toy_cnn-fp32-t1?*sme2_on*x ?*? emulated*proven*",
        "emulated: measured on an emulated CPU (QEMU)*",
    ])
    doc = json.loads((pytester.path / REPORT / "results.json").read_text())
    on = [b for b in doc["benchmarks"] if b["runner"] == "sme2_on"]
    off = [b for b in doc["benchmarks"] if b["runner"] == "sme2_off"]
    assert on and off
    assert {b["runner_info"]["labels"]["made_by"].split(";")[0] for b in on + off} == \
        {"one binary"}
    assert all(b["device"]["kind"] == "qemu" and b["device"]["extra"]["emulated"] for b in on)
    assert all(b["kernel_evidence"]["sme2"] == "proven" for b in on)
    assert all(b["kernel_evidence"]["sme2"] == "absent" for b in off)
    assert all(Path(b["kernel_trace"]).is_file() for b in on + off)
    assert not any(k["isa_family"] in ("SME", "SME2")
                   for b in off for k in b["kernel_evidence"]["executed_kernels"])
    report = (pytester.path / REPORT / "report.md").read_text()
    assert "Measured on an emulated CPU (QEMU" in report
    assert "SME/SME2), kernel trace" in report          # Kernel Evidence: a row per runner
    # each comparison's page (linked from report.md) has the executed kernels and how the
    # SME2-off runner was made
    (page,) = (pytester.path / REPORT / "details").glob("toy_cnn-fp32-t1-sme2_off-vs-sme2_on.md")
    assert f"](details/{page.name})" in report
    detail = page.read_text()
    assert "Measured on an emulated CPU (QEMU" in detail
    assert "Micro-kernels executed (kernel trace):" in detail
    assert "hwcaps masked to no SME, no SME2" in detail
    for c in doc["comparisons"]:
        assert c["emulated"] is True and c["outputs"]["equal"] is True
    # No advice from emulated times, and the kernels file's kit columns read from the kernels'
    # own names where no log names them (issue 49, item 13).
    advice = report.split("## Actionable Recommendations", 1)[1]
    assert "typically 3-15x" not in advice and "is slower than" not in advice
    assert "get no advice from their times" in advice
    import pandas as pd  # pandas: this check's alone

    kernels = pd.read_csv(Path(on[0]["etdump"]).with_name("kernels.csv"), keep_default_na=False)
    kai = kernels[kernels["kernel_name"].str.startswith("kai_")]
    assert len(kai) and (kai[["category", "xnn_op", "arch_chain"]] != "").all().all(), kai
