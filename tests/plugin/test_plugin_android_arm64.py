"""`pytest --device android:SERIAL` with a real Arm64 binary: the real adb server, a fake phone
that runs pushed aarch64 programs under QEMU -cpu max (SME2), the native runner cross-built for
the phone's target, SME2 on and masked from that one binary. Needs `pytest-sme2 setup qemu`
(skips without it, fails in CI)."""

import json
from pathlib import Path

import pytest

from pytest_sme2.device_programs.build import PRELOAD_LIB
from pytest_sme2.device_programs.hwcaps import SME2_FAMILY
from tests.fakes.android import arm64_phone_config, connect_phone, release_phone

pytestmark = pytest.mark.usefixtures("inner_session_env")

BENCH = """
def test_on_and_masked(sme2_bench, sme2_compare, sme2_on, sme2_off, sme2_capable_device,
                       sme2_emulated):
    assert sme2_emulated
    on = sme2_bench("toy_cnn", dtype="fp32", threads=1, runner=sme2_on)
    off = sme2_bench("toy_cnn", dtype="fp32", threads=1, runner=sme2_off)
    on_ops = {o.name for o in on.operators}
    off_ops = {o.name for o in off.operators}
    assert any("PF32" in n for n in on_ops), on_ops
    assert any("(NHWC, F32)" in n for n in off_ops) and not any("PF32" in n for n in off_ops)
    # Nothing traces on a phone: the SME2 side is proven by its evidence process's samples.
    ev_on, ev_off = on.kernel_evidence, off.kernel_evidence
    assert ev_on.sme2 == "proven" and ev_on.reason.startswith("sampling: "), ev_on.reason
    assert any(k.isa_family == "SME2" for k in ev_on.sampled_kernels)
    assert ev_off.samples_total > 0 and ev_off.sme2 == "absent"
    assert not any(k.isa_family in ("SME", "SME2") for k in ev_off.sampled_kernels)
    cmp = sme2_compare(sme2_off, sme2_on, "toy_cnn", dtype="fp32", threads=1)
    assert cmp.outputs.equal, cmp.outputs
    assert cmp.emulated       # timings say nothing about speed: no speed-up asserted
"""


PAIR_BY_ITSELF = """
def test_pair(sme2_on, sme2_off, sme2_capable_device):
    assert (sme2_on, sme2_off) == ("sme2_on", "sme2_off")
"""


def test_the_sme2_pair_comes_by_itself_on_an_sme2_phone(pytester, run_pytest, arm64_phone,
                                                        adb_server, monkeypatch):
    """No --runner, no NDK: an arm64 phone reporting SME2 offers the one-binary pair."""
    for key, value in adb_server.env.items():
        monkeypatch.setenv(key, value)
    pytester.makepyfile(test_p=PAIR_BY_ITSELF)
    run_pytest(f"--device=android:{arm64_phone.serial}").assert_outcomes(passed=1)


def test_sme2_on_and_masked_on_an_arm64_phone(pytester, run_pytest, arm64_phone, adb_server,
                                               monkeypatch, export_cache):
    for key, value in adb_server.env.items():
        monkeypatch.setenv(key, value)
    pytester.makepyfile(test_a=BENCH)
    res = run_pytest(
        f"--device=android:{arm64_phone.serial}",
        f"--sme2-cache-dir={export_cache}", "--runs=2", "--warmup=1", "--sme2-blocks=2",
        "--sme2-confirm-blocks=0",
        "--runner", "sme2_on=native,sme2=on", "--runner", "sme2_off=native,sme2=off")
    res.assert_outcomes(passed=1)
    res.stdout.fnmatch_lines([
        "sme2: sme2_on vs sme2_off on toy_cnn fp32 t1: speed-up *outputs equal*"
        "?emulated CPU: timings say nothing about speed?"])
    doc = json.loads((pytester.path / "sme2-report" / "results.json").read_text())
    benches = doc["benchmarks"]
    assert {b["runner"] for b in benches} == {"sme2_on", "sme2_off"}
    for b in benches:
        device = b["device"]
        assert device["kind"] == "android" and device["serial"] == arm64_phone.serial
        assert device["sme2"] is True and device["extra"]["emulated"] is True
        assert device["extra"]["target"] == "aarch64-linux-gnu"
        assert b["runner_info"]["labels"]["machine"] == "aarch64"
        assert Path(b["etdump"]).is_file()          # pulled from the phone
    off = [b for b in benches if b["runner"] == "sme2_off"]
    assert all(b["runner_info"]["labels"]["made_by"].startswith("hwcaps masked to no SME")
               for b in off)
    sent = {Path(p).name for p in arm64_phone.device.sends}
    assert {"sme2_runner", "libexecutorch_backend_xnnpack.so", "ld-linux-aarch64.so.1",
            PRELOAD_LIB} <= sent
    # Every run started through the bundled loader with the preload library; only the masked
    # side cleared bits.
    runs = [c for c in arm64_phone.device.commands if "sme2_runner" in c and "timeout" in c]
    assert runs and all("--preload " in c and PRELOAD_LIB in c for c in runs)
    assert {c.count("PYTEST_SME2_HWCAP2_CLEAR=0x0 ") for c in runs} == {0, 1}


SME1_PHONE = """
def test_sme_pair(sme2_compare, sme_on, sme_off, sme2_device, sme2_emulated):
    facts = sme2_device.facts()
    assert (facts.sme, facts.sme2, facts.sme_class) == (True, False, "SME (no SME2)")
    assert sme2_emulated and (sme_on, sme_off) == ("sme_on", "sme_off")
    cmp = sme2_compare(sme_off, sme_on, "toy_cnn", dtype="fp32", threads=1)
    assert cmp.outputs.equal, cmp.outputs
    on = cmp.candidate_blocks[0].kernel_evidence
    off = cmp.base_blocks[0].kernel_evidence
    # Nothing traces on a phone: the SME level is proven by the evidence process's samples,
    # SME2 absent by the hwcaps the phone's kernel reports.
    assert (on.sme, on.sme2) == ("proven", "absent"), on.levels
    assert on.sme_reason.startswith("sampling: ") and on.samples_total > 0
    assert not any(k.isa_family == "SME2" for k in on.sampled_kernels)
    assert off.sme == "absent" and off.samples_total > 0
    assert not any(k.isa_family in ("SME", "SME2") for k in off.sampled_kernels)


def test_sme2_pair(sme2_on, sme2_off):
    raise AssertionError("an SME2 pair on a phone without SME2")
"""


def test_an_sme1_only_phone_runs_the_sme_pair_proven_by_sampling(pytester, run_pytest,
                                                                  adb_server, tmp_path,
                                                                  monkeypatch, export_cache):
    """Issue 47: the fake phone as the Snapdragon 8 Elite Gen 5 (SME, no SME2: its kernel hides
    SME2 from every program, auxv and cpuinfo included) over the real adb server."""
    phone = connect_phone(adb_server, tmp_path / "phone",
                          arm64_phone_config(hidden_hwcap2=SME2_FAMILY))
    try:
        for key, value in adb_server.env.items():
            monkeypatch.setenv(key, value)
        pytester.makepyfile(test_s=SME1_PHONE)
        res = run_pytest(f"--device=android:{phone.serial}", f"--sme2-cache-dir={export_cache}",
                         "--runs=2", "--warmup=1", "--sme2-blocks=2",
                         "--sme2-confirm-blocks=0")
        res.assert_outcomes(passed=1, skipped=1)
        res.stdout.fnmatch_lines([
            "sme2:   sme_on: SME: proven (SME1 kernels: *); SME2: absent",
            f"sme2: 1 test does not apply here: device {phone.serial} has SME but no SME2 *"])
        cpuinfo = (phone.root / "proc/cpuinfo").read_text()
        assert " sme " in cpuinfo and "sme2" not in cpuinfo
        # Every run of the phone's runner had SME2 hidden; the SME-off side SME too.
        runs = [c for c in phone.device.commands if "sme2_runner" in c and "timeout" in c]
        assert runs and all("--preload " in c for c in runs)
    finally:
        release_phone(phone)
