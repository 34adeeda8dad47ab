"""SME2 for real on the emulated Arm64 CPU: QEMU 11 user mode (-cpu max has SME2), our native
runner cross-built against the aarch64 ExecuTorch wheel (KleidiAI SME2 kernels inside), one
binary run with SME2 on, masked off, and SME-only — and the kernels that executed, proven from
QEMU's translated-code log. Needs `pytest-sme2 setup qemu` (CI runs it first); without it these
tests skip saying so, except in CI, where a missing piece fails."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from pytest_sme2.devices.qemu import QemuDevice
from pytest_sme2.measure.block import BenchmarkRun, run_benchmark
from pytest_sme2.measure.pairs import Interleaving, PairPlan, run_comparison
from pytest_sme2.runners import RunnerError
from pytest_sme2.runners.spec import masked_pair, sme_pair
from pytest_sme2.measure.settings import BenchSettings
from tests.needs import emulated_sme2, tool


SME_FAMILIES = {"SME", "SME2"}


@pytest.fixture(scope="module")
def qemu():
    return emulated_sme2()


@pytest.fixture(scope="module")
def runners(qemu):
    return {s.name: s.make(target=qemu.target) for s in masked_pair()}


@pytest.fixture(scope="module")
def settings(tmp_path_factory, export_cache):
    return BenchSettings(runs=2, warmup=1, cache_dir=export_cache,
                         report_dir=tmp_path_factory.mktemp("qemu-report"), timeout_s=300)


def test_facts_are_read_inside_the_guest(qemu):
    facts = qemu.facts()
    assert facts.kind == "qemu" and facts.abi == "arm64-v8a"
    assert facts.sme is True and facts.sme2 is True
    assert facts.emulated is True and facts.extra["qemu_cpu"] == "max"
    assert int(facts.extra["qemu_version"].split(".")[0]) >= 11
    assert facts.extra["sme_source"].startswith("auxv")
    # Emulated and real devices never share a baseline key.
    assert facts.kind == "qemu"


def test_a_cpu_model_without_sme_reports_none(qemu):
    facts = QemuDevice("qemu:max,sme=off").facts()
    assert (facts.sme, facts.sme2) == (False, False)
    assert facts.extra["qemu_cpu"] == "max,sme=off"


def test_one_binary_three_views_and_the_kernels_that_ran(qemu, runners, settings):
    """SME2 on: PF32 operators and SME2 micro-kernels executed (proven). Masked: the same
    binary picks non-KleidiAI operators and no SME code runs. SME-only: SME1 kernels, no SME2."""
    results = {name: run_benchmark(BenchmarkRun("toy_cnn", "fp32", 1, label=f"toy-{name}"),
                                   runner, qemu, settings)
               for name, runner in runners.items()}
    assert len({runner.binary for runner in runners.values()}) == 1      # one binary, 3 views
    assert {r.info.labels.get("machine") for r in runners.values()} == {"aarch64"}

    on = results["sme2_on"].kernel_evidence
    assert on.sme2 == "proven", on.reason
    assert {k.isa_family for k in on.executed_kernels} >= {"SME2"}
    assert any("sme2_mopa" in k.name for k in on.executed_kernels)
    assert any("PF32" in op for op in on.kleidiai_ops)

    off = results["sme2_off"].kernel_evidence
    assert off.sme2 == "absent", off.reason
    assert not any(k.isa_family in SME_FAMILIES for k in off.executed_kernels)
    assert off.streaming_sme_blocks == 0
    assert off.kleidiai_ops == []            # PF32 -> F32: not the KleidiAI path
    names = {o.name for o in results["sme2_off"].operators}
    assert any("(NHWC, F32)" in n for n in names), names

    sme1 = results["sme_only"].kernel_evidence
    assert sme1.sme2 == "absent", sme1.reason
    families = {k.isa_family for k in sme1.executed_kernels}
    assert "SME" in families and "SME2" not in families
    assert "SME (SME1) kernels executed" in sme1.reason

    # Load and memory under emulation: one cold load (its time says nothing), memory said to
    # be the QEMU process's.
    startup = results["sme2_on"].startup
    assert startup.loads == 1 and startup.load_ms > 0 and startup.first_inference_ms > 0
    assert startup.peak_rss_kb > 0 and "QEMU process" in startup.memory_source

    for r in results.values():
        assert r.device.emulated is True
        assert Path(r.context.kernel_trace).is_file()
        assert not list(Path(r.etdump).parent.glob("*.qemu-in_asm.log"))   # big log removed


@pytest.fixture(scope="module")
def sme1(qemu):
    """``--device qemu:sme1``: -cpu max with SME2 hidden from every process, SME kept."""
    return QemuDevice("qemu:sme1")


def test_the_sme1_class_reads_sme_without_sme2_inside_the_guest(sme1):
    """The probe runs with SME2 hidden, as every process of the device (its pair's kernels:
    tests/plugin/test_plugin_qemu.py)."""
    facts = sme1.facts()
    assert (facts.sme, facts.sme2, facts.sme_class) == (True, False, "SME (no SME2)")
    assert facts.serial == "qemu-sme1" and facts.extra["device_class"] == "sme1"
    assert facts.extra["qemu_cpu"] == "max" and "SME2 hidden from every process" in facts.model


class LeakyQemu(QemuDevice):
    """``qemu:sme1`` whose runs forget to hide SME2 while its facts (read once, with SME2
    hidden) say it is: a dispatch that does not ask the hwcaps (onnxruntime#26399), planted
    with the real emulator, runner and trace."""

    def run(self, runner, request):
        self.facts()                        # SME2 hidden, as the device says
        hidden, self.hidden = self.hidden, 0
        try:
            return super().run(runner, request)
        finally:
            self.hidden = hidden


def test_an_sme2_kernel_in_a_process_that_hides_sme2_fails_the_benchmark(settings, qemu):
    from pytest_sme2.analysis.kernels import DispatchBugError

    device = LeakyQemu("qemu:sme1")
    runner = sme_pair()[0].make(target=device.target)
    with pytest.raises(DispatchBugError) as e:
        run_benchmark(BenchmarkRun("toy_cnn", "fp32", 1, label="planted"), runner, device,
                      settings)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("dispatch bug: SME2 micro-kernel kai_run_")
    kernel = msg.split()[4]
    assert "_sme2_" in kernel and "executed (kernel trace)" in msg, msg


def test_sme2_on_and_off_outputs_agree_within_tolerance(qemu, runners, settings):
    cmp = run_comparison(BenchmarkRun("toy_cnn", "fp32", 1, label="toy-agree"),
                         runners["sme2_off"], runners["sme2_on"], qemu, settings,
                         Interleaving(PairPlan(first=2)))
    assert cmp.outputs is not None and cmp.outputs.equal, cmp.outputs
    assert cmp.emulated
    assert "timings say nothing about speed" in str(cmp)


def test_cli_run_writes_the_executed_kernels(qemu, toy_export, tmp_path):
    from pytest_sme2.cli import main
    from pytest_sme2.analysis.kernel_trace import read_kernel_trace_csv

    csv = tmp_path / "k.csv"
    rc = main(["run", str(toy_export.pte), "--device", "qemu", "--runner", "native,sme2=off",
               "--runs", "1", "--warmup", "0", "--etdump", str(tmp_path / "off.etdump"),
               "--kernel-trace", str(csv)])
    assert rc == 0
    trace = read_kernel_trace_csv(csv)
    assert not any(k.isa_family in SME_FAMILIES for k in trace.executed)
    assert trace.streaming_blocks == 0
    rc = main(["run", str(toy_export.pte), "--device", "qemu", "--runner", "native",
               "--runs", "1", "--warmup", "0", "--etdump", str(tmp_path / "on.etdump"),
               "--kernel-trace", str(tmp_path / "on.csv")])
    assert rc == 0
    rc = main(["analyze", str(tmp_path / "on.etdump"), "--kernel-trace",
               str(tmp_path / "on.csv"), "--json", str(tmp_path / "on.json")])
    assert rc == 0
    import json

    doc = json.loads((tmp_path / "on.json").read_text())
    assert doc["kernel_evidence"]["sme2"] == "proven"


# A folder and file names with what broke or could break a path on its way to the guest: a
# comma (QEMU splits -E at commas), a space, '=', both quotes and '%' (QEMU's -D is a format).
ODD_DIR = "out,a b=c'd\"e%d"


def test_output_paths_with_commas_spaces_quotes_work_under_qemu(qemu, toy_export, tmp_path):
    """Issue 32, item 4: `--etdump 'out/q.native,sme2=off.etdump'` failed with "maps.txt:
    cannot read the guest address map"; every odd character, both SME2 states."""
    from pytest_sme2.analysis.kernel_trace import read_kernel_trace_csv
    from pytest_sme2.cli import main

    folder = tmp_path / ODD_DIR
    for state in ("off", "on"):
        stem = folder / f"q.native,sme2={state} 'x'=\"%s\""
        rc = main(["run", str(toy_export.pte), "--device", "qemu", "--runner",
                   f"native,sme2={state}", "--runs", "1", "--warmup", "0",
                   "--etdump", f"{stem}.etdump", "--kernel-trace", f"{stem}.csv"])
        assert rc == 0
        assert Path(f"{stem}.maps.txt").is_file()
        sme2 = {k.isa_family for k in read_kernel_trace_csv(Path(f"{stem}.csv")).executed}
        assert ("SME2" in sme2) == (state == "on"), sme2
    # Nothing written under a name cut at a comma or formatted by QEMU.
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        f"q.native,sme2={state} 'x'=\"%s\"{ext}" for state in ("off", "on")
        for ext in (".etdump", ".etdump.runs.json", ".csv", ".maps.txt"))
    assert not list(tmp_path.glob("out,a b=c'd\"e[0-9]*"))


SMSTART = r"""
int main(void) {
    __asm__ volatile(".inst 0xd503477f");   /* smstart: SME, absent from a Cortex-A53 */
    return 0;
}
"""


def test_a_binary_killed_by_sigill_under_emulation_is_one_line(qemu, toy_export, tmp_path):
    from pytest_sme2.runners.base import RunRequest
    from pytest_sme2.runners.binary import BinaryRunner

    cc = tool("aarch64-linux-gnu-gcc", "run `pytest-sme2 setup qemu`")
    src, exe = tmp_path / "sme.c", tmp_path / "sme_runner"
    src.write_text(SMSTART)
    subprocess.run([cc, "-O1", "-o", str(exe), str(src)], check=True)
    device = QemuDevice("qemu:cortex-a53")
    with pytest.raises(RunnerError) as ei:
        device.run(BinaryRunner("sme", exe), RunRequest(pte=toy_export.pte,
                                                        etdump=tmp_path / "x.etdump"))
    msg = str(ei.value)
    assert "\n" not in msg
    assert "killed by SIGILL" in msg and "-cpu cortex-a53" in msg


def _linear_pte(path: Path, rows: int, outputs: int) -> Path:
    """A user's .pte: one fp32 Linear(256 -> outputs) on ``rows`` rows, lowered to XNNPACK."""
    import torch
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    torch.manual_seed(0)
    module, x = torch.nn.Linear(256, outputs).eval(), (torch.randn(rows, 256),)
    edge = to_edge_transform_and_lower(torch.export.export(module, x),
                                       partitioner=[XnnpackPartitioner()])
    path.write_bytes(edge.to_executorch().buffer)
    return path


def test_fp32_sme2_gemms_round_as_neon_ones_and_each_side_is_its_own_run(
        qemu, runners, settings, tmp_path):
    """Why fp32 MobileViT's SME2-on and -off outputs are bitwise equal: KleidiAI's fp32 SME2
    GEMM (FMOPA tiles) computes each output as the bias plus one fused multiply-add per k, in
    k order, the arithmetic of XNNPACK's NEON FMA GEMMs: no bit changes (MobileViT's GEMMs all
    have many rows). A 1-row, 10-column classifier (toy_cnn's head) does differ in the last
    bits: that NEON kernel sums its reduction in another order. The comparison reads each
    side's own output file, from its own process: the difference shows."""
    cases = {"gemm16": _linear_pte(tmp_path / "gemm16.pte", rows=16, outputs=48),
             "head": _linear_pte(tmp_path / "head.pte", rows=1, outputs=10)}
    got = {name: run_comparison(BenchmarkRun(str(pte), "pte", 1, label=f"order-{name}"),
                                runners["sme2_off"], runners["sme2_on"], qemu, settings,
                                Interleaving(PairPlan(first=2)))
           for name, pte in cases.items()}
    for name, kernel in (("gemm16", "sme2_mopa"), ("head", "1x16vl_sme2_mla")):
        cmp = got[name]
        on, off = cmp.candidate_blocks[0], cmp.base_blocks[0]
        assert on.kernel_evidence.sme2 == "proven", on.kernel_evidence.reason
        assert any(kernel in k.name for k in on.kernel_evidence.executed_kernels), name
        assert not any(k.isa_family in SME_FAMILIES for k in off.kernel_evidence.executed_kernels)
        assert on.context.outputs != off.context.outputs
        assert cmp.outputs is not None and cmp.outputs.equal, (name, cmp.outputs)
    assert got["gemm16"].outputs.max_abs_diff == 0.0, got["gemm16"].outputs
    assert 0.0 < got["head"].outputs.max_abs_diff < 1e-5, got["head"].outputs
