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


def test_benchmarks_on_an_sme1_only_cpu_run_the_sme_pair_and_say_why_sme2_does_not_apply(
        pytester, run_pytest, qemu_ready, export_cache):
    """Issue 47: `--device qemu:sme1` (SME without SME2, the 2026 Snapdragon flagship's class):
    the SME pair comes by itself, its evidence per side says which SME level ran, and the SME2
    test says that it does not apply, in the summary too."""
    for name in ("test_sme.py", "test_sme2.py"):
        shutil.copy(BENCHMARKS / name, pytester.path / name)
    res = run_pytest(
        "--device=qemu:sme1", f"--sme2-cache-dir={export_cache}", "--sme2-models=toy_cnn",
        "--sme2-dtypes=fp32", "--sme2-threads=1", "-k", "toy_cnn and fp32")
    res.assert_outcomes(passed=1, skipped=1)
    res.stdout.fnmatch_lines([
        "sme2: sme_on vs sme_off on toy_cnn fp32 t1: speed-up *outputs equal*"
        "?emulated CPU: timings say nothing about speed?",
        "sme2:   sme_off: SME: absent; SME2: absent",
        "sme2:   sme_on: SME: proven (SME1 kernels: kai_run_matmul_clamp_f32_*_sme_m*); "
        "SME2: absent",
        "sme2: 1 test does not apply here: device qemu-sme1 has SME but no SME2 (SME (no SME2) "
        "in its hwcaps): no SME2 kernel can run there; its SME pair (sme_on vs sme_off, "
        "benchmarks/test_sme.py) measures the SME it has",
        "*pytest-sme2 summary*",
        "test_sme_speedup?toy_cnn-fp32-t1?*sme_off*(base)*absent *",
        "test_sme_speedup?toy_cnn-fp32-t1?*sme_on*absent (SME proven)*",
    ])
    doc = json.loads((pytester.path / "sme2-report" / "results.json").read_text())
    for b in doc["benchmarks"]:
        assert b["device"]["spec"] == "qemu:sme1"
        assert (b["device"]["sme"], b["device"]["sme2"]) == (True, False)
    evidence = {side: [b["kernel_evidence"] for b in doc["benchmarks"] if b["runner"] == side]
                for side in ("sme_on", "sme_off")}
    for e in evidence["sme_on"]:            # SME1 kernels traced, no SME2 one
        assert e["sme"] == "proven" and e["sme2"] == "absent", e["sme_reason"]
        families = {k["isa_family"] for k in e["executed_kernels"]}
        assert "SME" in families and "SME2" not in families
        assert any(k["name"].endswith("_sme_mopa") for k in e["executed_kernels"])
    for e in evidence["sme_off"]:           # SME hidden too: no SME code at all
        assert (e["sme"], e["sme2"]) == ("absent", "absent") and e["kleidiai_ops"] == []
        assert e["streaming_sme_blocks"] == 0
    assert evidence["sme_on"] and evidence["sme_off"]
