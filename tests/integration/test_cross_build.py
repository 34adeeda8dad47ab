"""Cross builds for the emulated Arm64 target, for real: the native runner against the aarch64
wheel, the hwcap mask and the probe, run under QEMU 11 with -cpu max. Needs what
`pytest-sme2 setup qemu` provisions (CI runs it first); a missing piece fails with that line."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from pytest_sme2.emulation.tools import QemuTools, find_qemu
from pytest_sme2.device_programs.hwcaps import HWCAP2_CLEAR_ENV, HWCAP2_SME, HWCAP2_SME2, mask_bits
from pytest_sme2.runners.native import NativeRunner, build_native_runner
from pytest_sme2.device_programs import parse_probe
from pytest_sme2.device_programs.build import TargetHelpers, build_target_helpers


TARGET = "aarch64-linux-gnu"
EM_AARCH64 = 183


@pytest.fixture(scope="module")
def qemu() -> QemuTools:
    return find_qemu()


@pytest.fixture(scope="module")
def cross(tmp_path_factory) -> tuple[Path, Path, float]:
    """(binary, cache folder, cold build seconds)."""
    cache = tmp_path_factory.mktemp("cross-runner")
    t0 = time.perf_counter()
    binary = build_native_runner(cache, target=TARGET)
    return binary, cache, time.perf_counter() - t0


@pytest.fixture(scope="module")
def helpers(tmp_path_factory) -> tuple[TargetHelpers, Path]:
    cache = tmp_path_factory.mktemp("target-helpers")
    return build_target_helpers(TARGET, cache), cache


def _elf_machine(path: Path) -> int:
    head = path.read_bytes()[:20]
    assert head[:4] == b"\x7fELF"
    return int.from_bytes(head[18:20], "little")


def _probe(qemu: QemuTools, helpers: TargetHelpers, cpu: str = "max",
           mask: str | None = None) -> dict:
    env = {"LD_PRELOAD": str(helpers.preload),
           HWCAP2_CLEAR_ENV: hex(mask_bits(mask))} if mask else None
    proc = subprocess.run(qemu.command([str(helpers.probe)], cpu=cpu, env=env),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return parse_probe(proc.stdout)


def test_cross_built_runner_is_aarch64_with_the_wheels_libraries(cross):
    binary, _, seconds = cross
    runner = NativeRunner.from_build(binary)
    labels = runner.info.labels
    assert _elf_machine(binary) == EM_AARCH64
    assert labels["machine"] == "aarch64" and labels["source"] == "executorch wheel (aarch64)"
    assert labels["sme2"].startswith("kernels present (") and "SME2" in labels["sme2"]
    assert labels["executorch"] == "1.5.1" and labels["compiler"].startswith("gcc")
    names = {p.name for p in runner.libs}
    assert {"libexecutorch.so", "libexecutorch_backend_xnnpack.so"} <= names
    assert all(p.is_file() and _elf_machine(p) == EM_AARCH64 for p in runner.libs)
    assert (binary.parent / "toolchain.cmake").is_file()
    print(f"cross build: {seconds:.1f} s")


def test_second_cross_build_is_a_cache_hit(cross):
    binary, cache, _ = cross
    # A hit builds nothing: progress=pytest.fail fails on any build step (no timed assertion:
    # these machines differ 3-5x).
    assert build_native_runner(cache, target=TARGET, progress=pytest.fail) == binary


def test_cross_built_runner_runs_a_model_under_qemu(cross, qemu, toy_export, tmp_path):
    binary, _, _ = cross
    etdump = tmp_path / "toy.etdump"
    argv = [str(binary), "--model_path", str(toy_export.pte), "--etdump_path", str(etdump),
            "--num_executions", "1", "--warmup", "0", "--cpu_threads", "1"]
    proc = subprocess.run(qemu.command(argv), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Model executed successfully 1 time(s)" in proc.stdout
    assert etdump.stat().st_size > 0


def test_helpers_are_aarch64_and_cached(helpers):
    built, cache = helpers
    assert _elf_machine(built.preload) == _elf_machine(built.probe) == EM_AARCH64
    assert build_target_helpers(TARGET, cache, progress=pytest.fail) == built


def test_guest_sees_sme2_with_cpu_max(qemu, helpers):
    facts = _probe(qemu, helpers[0])
    assert facts["machine"] == "aarch64"
    assert facts["hwcap2"] & HWCAP2_SME and facts["hwcap2"] & HWCAP2_SME2


def test_hwcap_mask_hides_sme_and_sme2(qemu, helpers):
    facts = _probe(qemu, helpers[0], mask="sme")
    assert not facts["hwcap2"] & HWCAP2_SME and not facts["hwcap2"] & HWCAP2_SME2
    unmasked = _probe(qemu, helpers[0])
    # Nothing else changes: the bits outside the mask are the unmasked ones.
    assert facts["hwcap2"] == unmasked["hwcap2"] & ~mask_bits("sme")
    assert facts["hwcap"] == unmasked["hwcap"]


def test_sme2_only_mask_keeps_sme(qemu, helpers):
    facts = _probe(qemu, helpers[0], mask="sme2")
    assert facts["hwcap2"] & HWCAP2_SME and not facts["hwcap2"] & HWCAP2_SME2


def test_qemu_sme_off_matches_the_mask(qemu, helpers):
    facts = _probe(qemu, helpers[0], cpu="max,sme=off")
    assert not facts["hwcap2"] & (HWCAP2_SME | HWCAP2_SME2)
