"""The adb path with a real Arm64 binary: a fake phone (tests/fakes/adb_device.py, arch
"aarch64") that runs pushed aarch64 programs under QEMU 11 -cpu max (SME2), reached through the
real adb server. The cross-built native runner, its aarch64 ExecuTorch libraries and the hwcap
mask library are pushed over adb; SME2 facts come from the emulated CPU; one binary runs with
SME2 on and masked; real ETDumps come back. Needs `pytest-sme2 setup qemu` (skips without it,
fails in CI)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pytest_sme2.runners.base import RunnerBase
from pytest_sme2.analysis.kernel_trace import executed_kernels
from pytest_sme2.measure.comparison import check_outputs
from pytest_sme2.devices.android import device as android
from pytest_sme2.devices.android import open_android
from pytest_sme2.readers.etdump import read_etdump
from pytest_sme2.device_programs.hwcaps import HWCAP2_CLEAR_ENV, mask_bits
from pytest_sme2.runners import RunnerError, RunnerInfo, RunRequest
from pytest_sme2.runners.spec import parse_runner_spec
from pytest_sme2.device_programs.build import PRELOAD_LIB
from pytest_sme2.readers.tensorfile import read_tensors
from tests.fakes.adb_device import FakeAndroidConfig
from tests.fakes.android import connect_phone, release_phone


SME_FAMILIES = {"SME", "SME2"}


@pytest.fixture(autouse=True)
def _private_lock_dir(tmp_path_factory, monkeypatch):
    monkeypatch.setattr(android, "LOCK_DIR", tmp_path_factory.getbasetemp())


@dataclass
class ScriptRunner(RunnerBase):
    """A host script as a runner: enough to be refused before anything is pushed."""
    script: Path
    hwcap_mask: str | None = None
    info: RunnerInfo = field(default_factory=lambda: RunnerInfo("masked", "test"))

    def command(self, request: RunRequest) -> list[str]:
        return [str(self.script)]

    def device_files(self) -> list[Path]:
        return [self.script]


def _msg(excinfo: pytest.ExceptionInfo) -> str:
    msg = str(excinfo.value)
    assert "\n" not in msg
    return msg


def test_facts_come_from_the_emulated_cpu(fake_arm64_android):
    from pytest_sme2.emulation.tools import find_qemu
    from pytest_sme2.device_programs import parse_probe
    from pytest_sme2.device_programs.build import build_target_helpers
    import subprocess

    dev = open_android(f"android:{fake_arm64_android.serial}", session_id="f1")
    facts = dev.facts()
    assert (facts.kind, facts.abi, facts.sme, facts.sme2) == ("android", "arm64-v8a", True, True)
    assert facts.extra["sme_source"] == "auxv"
    # The phone's AT_HWCAP2 is the one a program sees under the same QEMU.
    q = find_qemu()
    probe = parse_probe(subprocess.run(q.command([str(build_target_helpers().probe)]),
                                       capture_output=True, text=True, check=True).stdout)
    assert facts.extra["hwcap2"] == hex(probe["hwcap2"])
    assert facts.emulated is True and facts.to_dict()["extra"]["emulated"] is True
    assert facts.extra["emulator"].startswith(f"QEMU {q.version} user mode, -cpu max")
    assert dev.target == facts.target == "aarch64-linux-gnu"
    assert (facts.kind, facts.cpu, facts.abi, facts.sme2) == (
        "android", "QEMU max", "arm64-v8a", True)
    cpuinfo = (fake_arm64_android.root / "proc/cpuinfo").read_text()
    assert {"sme", "sme2", "sve2"} <= set(re.search(r"Features\t: (.*)", cpuinfo).group(1).split())


def test_one_binary_sme2_on_and_masked_through_adb(fake_arm64_android, tmp_path, toy_export):
    """Pushes the cross-built runner, its aarch64 libraries and the mask library; SME2 on gives
    KleidiAI PF32 operators and SME2 kernels executed, masked gives F32 operators and no SME
    code; the outputs agree within the fp32 tolerance."""
    phone = fake_arm64_android
    dev = open_android(f"android:{phone.serial}", session_id="a1")
    runners = {name: parse_runner_spec(f"{name}=native,sme2={state}").make(target=dev.target)
               for name, state in (("sme2_on", "on"), ("sme2_off", "off"))}
    on, off = runners["sme2_on"], runners["sme2_off"]
    assert on.binary == off.binary and on.info.labels["machine"] == "aarch64"
    assert (on.hwcap_mask, off.hwcap_mask) == (None, "sme")
    assert off.info.labels["made_by"].startswith("hwcaps masked to no SME, no SME2")

    results = {}
    for name, runner in runners.items():
        before = set((tmp_path / "qemu-trace").glob("*.maps"))
        req = RunRequest(pte=toy_export.pte, etdump=tmp_path / name / "run.etdump",
                         inputs=toy_export.inputs, outputs=tmp_path / name / "out.bin",
                         runs=2, warmup=1, threads=1, timeout_s=300)
        out = dev.run(runner, req)
        assert "ld.so" not in out.stderr        # no host tool tried to preload the aarch64 lib
        (maps,) = [m for m in set((tmp_path / "qemu-trace").glob("*.maps")) - before
                   if "sme2_runner" in m.read_text()]
        results[name] = req, maps

    # What went over adb: the runner, its aarch64 libraries, the glibc loader and libraries
    # (the phone has none) and the preload library, all in one cached runner folder.
    sent = {Path(p).name: p for p in phone.device.sends}
    assert {"sme2_runner", "libexecutorch.so", "libexecutorch_backend_xnnpack.so",
            "ld-linux-aarch64.so.1", "libc.so.6", "libstdc++.so.6", PRELOAD_LIB} <= set(sent)
    folder = str(Path(sent["sme2_runner"]).parent)
    assert re.fullmatch(r"/data/local/tmp/pytest-sme2-cache/runner-[0-9a-f]{16}", folder)
    assert {str(Path(p).parent) for p in sent.values() if "/runner-" in p} == {folder}
    runs = [c for c in phone.device.commands if "sme2_runner" in c and "timeout" in c]
    assert len(runs) == 2
    for cmd, clear in zip(runs, (0, mask_bits("sme"))):
        # Started through the bundled loader, the mask preloaded by it (never LD_PRELOAD, which
        # the phone's own bionic tools would try to load), the bits in hex.
        assert f"{HWCAP2_CLEAR_ENV}={clear:#x} " in cmd and "LD_PRELOAD" not in cmd
        assert (f"{folder}/ld-linux-aarch64.so.1 --library-path {folder} --preload "
                f"{folder}/{PRELOAD_LIB} {folder}/sme2_runner ") in cmd
    # The phone hands its programs no glibc sysroot: QEMU runs without -L.
    fake_exec = (phone.root / "bin/fake-exec").read_text()
    assert " -L " not in fake_exec and "aarch64-linux-gnu" not in fake_exec

    names = {}
    for name, (req, maps) in results.items():
        events = read_etdump(req.etdump)
        names[name] = set(events["name"].dropna())
        # The guest loaded ExecuTorch from the pushed folder, not the host's wheel.
        loaded = {line.split()[-1] for line in maps.read_text().splitlines()
                  if line.split()[-1].endswith(".so")}
        xnn = [p for p in loaded if p.endswith("/libexecutorch_backend_xnnpack.so")]
        assert xnn and all(folder + "/" in p for p in xnn), loaded
    assert any("PF32" in n for n in names["sme2_on"]), names["sme2_on"]
    assert any("(NHWC, F32)" in n for n in names["sme2_off"]), names["sme2_off"]
    assert not any("PF32" in n for n in names["sme2_off"])

    # Which kernels executed, from QEMU's log on the fake's host side.
    traced = {name: executed_kernels(maps.with_suffix(".log"), maps).executed
              for name, (_, maps) in results.items()}
    assert any(k.isa_family == "SME2" and "sme2_mopa" in k.name for k in traced["sme2_on"])
    assert not any(k.isa_family in SME_FAMILIES for k in traced["sme2_off"])

    outs = {name: read_tensors(req.outputs) for name, (req, _) in results.items()}
    check = check_outputs(outs["sme2_off"], outs["sme2_on"], "fp32")
    assert check.equal, check


def test_output_paths_with_commas_spaces_quotes_work_on_the_phone(fake_arm64_android, tmp_path,
                                                                   toy_export, capsys):
    """Issue 32, item 4, on the (fake, emulated) phone: the names stay on this side, the phone's
    session folder holds its own; the runner's command is quoted for the phone's shell."""
    from pytest_sme2.cli import main

    folder = tmp_path / "out,a b=c'd\"e%d"
    stem = folder / "q.native,sme2=off 'x'=\"%s\""
    assert main(["run", str(toy_export.pte), "--device", f"android:{fake_arm64_android.serial}",
                 "--runner", "native,sme2=off", "--runs", "1", "--warmup", "0",
                 "--etdump", f"{stem}.etdump", "--kernel-sample", f"{stem}.csv"]) == 0
    said = capsys.readouterr().out
    assert f"{stem}.etdump: 1 runs (0 warm-up) with native" in said, said
    assert read_etdump(Path(f"{stem}.etdump")) is not None
    assert Path(f"{stem}.csv").is_file() and Path(f"{stem}.maps.txt").is_file()


def test_mask_and_native_runner_on_phones_that_cannot_have_them(adb_server, tmp_path,
                                                                monkeypatch):
    """A phone without ro.pytest_sme2.target is a real one: an arm64 phone gets our runner
    (target aarch64-linux-gnu, through the bundled loader), but a masked bionic runner needs the
    NDK-built preload library; a phone that is not arm64 gets no native runner here."""
    monkeypatch.delenv("ANDROID_NDK", raising=False)
    monkeypatch.delenv("ANDROID_NDK_HOME", raising=False)
    script = tmp_path / "runner.sh"
    script.write_text("#!/bin/sh\nexit 0\n")
    pte = tmp_path / "m.pte"
    pte.write_bytes(b"PTE")
    req = RunRequest(pte=pte, etdump=tmp_path / "out" / "x.etdump", runs=1, warmup=0)
    phone = connect_phone(adb_server, tmp_path / "p",
                          FakeAndroidConfig(props={"ro.pytest_sme2.target": ""}))
    try:
        dev = open_android(f"android:{phone.serial}", session_id="n1")
        assert dev.target == "aarch64-linux-gnu" and dev.facts().target == ""
        with pytest.raises(RunnerError) as e:
            dev.run(ScriptRunner(script, hwcap_mask="sme"), req)
        assert "mask=sme" in _msg(e) and "ANDROID_NDK" in _msg(e)
        assert not phone.device.sends            # refused before pushing anything
    finally:
        release_phone(phone)

    x86_phone = connect_phone(adb_server, tmp_path / "x", FakeAndroidConfig(props={
        "ro.pytest_sme2.target": "", "ro.product.cpu.abi": "x86_64"}))
    try:
        dev = open_android(f"android:{x86_phone.serial}", session_id="n3")
        assert dev.target == "android"
        with pytest.raises(RunnerError) as e:
            parse_runner_spec("sme2_off=native,sme2=off").make(target=dev.target)
        assert "this phone is not arm64" in _msg(e) and "--runner" in _msg(e)
    finally:
        release_phone(x86_phone)

    host_phone = connect_phone(adb_server, tmp_path / "h")   # runs the host's programs
    try:
        dev = open_android(f"android:{host_phone.serial}", session_id="n2")
        assert dev.target == "host"
        with pytest.raises(RunnerError) as e:
            dev.run(ScriptRunner(script, hwcap_mask="sme2"), req)
        assert "runs host programs" in _msg(e) and "no Arm64 hwcaps" in _msg(e)
    finally:
        release_phone(host_phone)


def test_the_device_side_timeout_stops_an_emulated_runner(fake_arm64_android, tmp_path,
                                                          toy_export):
    dev = open_android(f"android:{fake_arm64_android.serial}", session_id="t1")
    runner = parse_runner_spec("native").make(target=dev.target)
    req = RunRequest(pte=toy_export.pte, etdump=tmp_path / "o" / "x.etdump",
                     inputs=toy_export.inputs, runs=100000, warmup=0, timeout_s=3)
    with pytest.raises(RunnerError) as e:
        dev.run(runner, req)
    assert "no result within 3 s" in _msg(e)
