"""The emulated device's pure parts: spec, probe parsing, hwcap masks, the masked runner pair,
and how a session picks runners for it. The emulator itself runs in
tests/integration/test_qemu.py."""

from __future__ import annotations

import pytest

from pytest_sme2.measure.process import process_sme, process_sme2
from pytest_sme2.devices.base import DeviceError
from pytest_sme2.devices.registry import open_device
from pytest_sme2.devices.qemu import QemuDevice, QemuSpec, parse_spec
from pytest_sme2.device_programs import parse_probe
from pytest_sme2.errors import Sme2Error
from pytest_sme2.device_programs.hwcaps import (HWCAP2_SME, HWCAP2_SME2, SME2_FAMILY, SME_FAMILY,
                                                describe_mask, mask_bits, sme_flags)
from pytest_sme2.runners import RunnerError, parse_runner_spec
from pytest_sme2.runners.spec import masked_pair, sme_pair
from pytest_sme2.measure.session import BenchSession
from pytest_sme2.measure.config import Sme2Config


def test_spec_names_the_cpu_model():
    assert parse_spec("qemu") == QemuSpec("max")
    assert parse_spec("qemu:neoverse-v1") == QemuSpec("neoverse-v1")
    assert parse_spec("qemu:max,sme=off") == QemuSpec("max,sme=off")
    with pytest.raises(DeviceError, match="name a QEMU CPU model after ':' .*qemu:sme1"):
        parse_spec("qemu:")
    assert isinstance(open_device("qemu:cortex-a53"), QemuDevice)
    assert open_device("qemu").target == "aarch64-linux-gnu"


def test_sme1_is_a_class_max_with_sme2_hidden_from_every_process():
    assert parse_spec("qemu:sme1") == QemuSpec("max", SME2_FAMILY, "sme1")
    device = open_device("qemu:sme1")
    assert (device.cpu, device.hidden, device.device_class) == ("max", SME2_FAMILY, "sme1")
    assert device.hidden & HWCAP2_SME2 and not device.hidden & HWCAP2_SME   # SME stays
    assert "hidden=0x7e0007e000000000" in repr(device)


def test_unknown_device_kind_lists_qemu():
    with pytest.raises(DeviceError, match="'qemu', 'qemu:CPU' or 'qemu:sme1'"):
        open_device("toaster")


def test_probe_output_is_parsed_line_by_line():
    probe = parse_probe("machine aarch64\nkernel 6.1.0\nhwcap 0xb01\nhwcap2 0x2000800000\n"
                        "cpus 2\n\ngarbage\n")
    assert probe == {"machine": "aarch64", "kernel": "6.1.0", "hwcap": 0xb01,
                     "hwcap2": 0x2000800000, "cpus": 2}
    assert sme_flags(probe["hwcap2"]) == (True, True)


def test_masks_clear_sme2_and_optionally_sme():
    hwcap2 = 0x7fffbff47fc77fff          # what QEMU 11 -cpu max reports
    assert sme_flags(hwcap2 & ~mask_bits("sme")) == (False, False)
    assert sme_flags(hwcap2 & ~mask_bits("sme2")) == (True, False)
    assert mask_bits("sme2") & HWCAP2_SME == 0          # SME stays: the SME1-only case
    assert mask_bits("sme") == SME_FAMILY | SME2_FAMILY
    assert HWCAP2_SME2 & SME2_FAMILY and HWCAP2_SME & SME_FAMILY
    assert sme_flags(None) == (None, None)
    with pytest.raises(Sme2Error, match="unknown hwcap mask 'sve'; known: sme"):
        mask_bits("sve")
    assert "no SME, no SME2" in describe_mask("sme")
    assert describe_mask(None) == "hwcaps as the device reports them"


def test_mask_in_a_runner_spec_labels_it_sme2_off_and_says_how():
    s = parse_runner_spec("off=native,mask=sme")
    assert s.hwcap_mask == "sme"
    assert s.labels["sme2"] == "off" and s.labels["hwcap_mask"] == "sme"
    assert "masked" in s.labels["made_by"]
    s = parse_runner_spec("sme_only=/opt/runner,mask=sme2")
    assert (s.kind, s.hwcap_mask, s.labels["sme2"]) == ("binary", "sme2", "off")


def test_native_sme2_off_means_the_masked_binary():
    # Our runner is one build with SME2 kernels: "off" can only be a masked process.
    assert parse_runner_spec("x=native,sme2=off").hwcap_mask == "sme"
    # A user's binary labelled off is a build label (two builds): no mask implied.
    assert parse_runner_spec("x=/opt/off/runner,sme2=off").hwcap_mask is None


@pytest.mark.parametrize("text,msg", [
    ("x=native,mask=sve", "unknown mask 'sve'"),
    ("x=native,mask=sme,sme2=on", "the label sme2=on would be false"),
    ("x=python,mask=sme", "the python runner runs on the host"),
])
def test_bad_masks_are_one_line(text, msg):
    with pytest.raises(RunnerError, match=msg):
        parse_runner_spec(text)


def test_masked_pair_is_one_binary_with_three_views():
    pair = {s.name: s for s in masked_pair()}
    assert set(pair) == {"sme2_on", "sme2_off", "sme_only"}
    assert {s.kind for s in pair.values()} == {"native"}
    assert (pair["sme2_on"].hwcap_mask, pair["sme2_off"].hwcap_mask,
            pair["sme_only"].hwcap_mask) == (None, "sme", "sme2")
    assert pair["sme2_on"].labels["sme2"] == "on"
    assert all(s.labels["made_by"].startswith("one binary") for s in pair.values())


def test_the_process_sees_sme2_as_the_mask_leaves_it():
    assert process_sme2(True, None) is True
    assert process_sme2(True, "sme") is False
    assert process_sme2(True, "sme2") is False
    assert process_sme2(None, None) is None


def test_the_process_sees_sme_as_the_mask_leaves_it():
    assert process_sme(True, None) is True
    assert process_sme(True, "sme2") is True        # SME2 hidden, SME kept
    assert process_sme(True, "sme") is False
    assert process_sme(None, None) is None


def test_the_sme_pair_is_one_binary_with_sme_hidden_on_the_off_side():
    pair = {s.name: s for s in sme_pair()}
    assert set(pair) == {"sme_on", "sme_off"} and {s.kind for s in pair.values()} == {"native"}
    assert (pair["sme_on"].hwcap_mask, pair["sme_off"].hwcap_mask) == (None, "sme")
    assert (pair["sme_on"].labels["sme"], pair["sme_off"].labels["sme"]) == ("on", "off")
    assert all(s.labels["made_by"].startswith("one binary") for s in pair.values())


class _FakeFacts:
    def __init__(self, sme2, sme=None):
        self.sme2 = sme2
        self.sme = sme2 if sme is None else sme


class _FakeQemu:
    spec, target = "qemu", "aarch64-linux-gnu"

    def __init__(self, sme2, sme=None):
        self._facts = _FakeFacts(sme2, sme)

    def facts(self):
        return self._facts


def test_session_offers_the_masked_pair_only_on_an_sme2_qemu_device():
    session = BenchSession(Sme2Config(devices=("qemu",)))
    session._devices["qemu"] = _FakeQemu(True)
    assert session.sme2_runner("off") == "sme2_off"
    assert session.sme2_runner("on") == "sme2_on"
    assert session.specs["sme2_off"].hwcap_mask == "sme"
    assert session.default_runner() == "native"

    no_sme2 = BenchSession(Sme2Config(devices=("qemu:max,sme=off",)))
    no_sme2._devices["qemu:max,sme=off"] = _FakeQemu(False)
    assert no_sme2.sme2_runner("off") is None

    host = BenchSession()
    assert host.sme2_runner("on") is None


def test_session_offers_the_sme_pair_only_on_a_device_with_sme_but_no_sme2():
    session = BenchSession(Sme2Config(devices=("qemu:sme1",)))
    session._devices["qemu:sme1"] = _FakeQemu(False, sme=True)
    assert (session.sme_runner("on"), session.sme_runner("off")) == ("sme_on", "sme_off")
    assert session.specs["sme_off"].hwcap_mask == "sme"
    assert session.sme2_runner("on") is None           # no SME2: its pair does not apply
    for sme2, sme in ((True, True), (False, False), (None, None)):
        other = BenchSession(Sme2Config(devices=("qemu",)))
        other._devices["qemu"] = _FakeQemu(sme2, sme)
        assert other.sme_runner("on") is None, (sme2, sme)
    configured = BenchSession(Sme2Config(devices=("qemu",), runners=("mine=/opt/r,sme=off",)))
    configured._devices["qemu"] = _FakeQemu(True)
    assert configured.sme_runner("off") == "mine"


def test_configured_runners_win_over_the_masked_pair():
    session = BenchSession(Sme2Config(devices=("qemu",), runners=("mine=/opt/r,sme2=off",)))
    session._devices["qemu"] = _FakeQemu(True)
    assert session.sme2_runner("off") == "mine"


def test_host_refuses_a_mask_it_cannot_apply(tmp_path):
    from pytest_sme2.devices.host import HostDevice
    from pytest_sme2.runners.base import RunRequest
    from pytest_sme2.runners.binary import BinaryRunner

    exe = tmp_path / "runner.sh"
    exe.write_text("#!/bin/sh\nexit 0\n")
    exe.chmod(0o755)
    runner = BinaryRunner("off", exe, hwcap_mask="sme")
    with pytest.raises(RunnerError, match=r"mask=sme: hiding SME/SME2 .* \(--device qemu\)"):
        HostDevice().run(runner, RunRequest(pte=tmp_path / "m.pte", etdump=tmp_path / "o"))


def test_qemu_refuses_the_python_runner_and_foreign_binaries(tmp_path):
    from pytest_sme2.runners.base import RunRequest
    from pytest_sme2.runners.python import PythonRunner

    dev = QemuDevice("qemu")
    req = RunRequest(pte=tmp_path / "m.pte", etdump=tmp_path / "o.etdump")
    with pytest.raises(RunnerError, match="host's Python runtime and cannot run on --device qemu"):
        dev.run(PythonRunner(), req)
    script = tmp_path / "r.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    from pytest_sme2.runners.binary import BinaryRunner

    with pytest.raises(RunnerError, match="not an ELF program, and --device qemu runs aarch64"):
        dev.run(BinaryRunner("s", script), req)


def test_describing_an_unknown_mask_is_the_one_line_error():
    with pytest.raises(Sme2Error, match="unknown hwcap mask 'sve'"):
        describe_mask("sve")
