"""Why an SME2 comparison skips: on a device without SME2 that fact comes first (no runner pair
would help there); only where SME2 may be present is the user asked for an SME2-off runner."""

from __future__ import annotations

from pytest_sme2.plugin.fixtures import no_sme2_runner_reason, no_sme_runner_reason
from pytest_sme2.results.device import DeviceFacts


def test_a_device_without_sme2_says_so_and_offers_qemu():
    facts = DeviceFacts(kind="host", abi="x86_64", sme=False, sme2=False)
    assert no_sme2_runner_reason("off", facts) == (
        "does not apply here: this device has no SME2 (x86_64: no SME2 hwcap); --device qemu "
        "emulates one")


def test_an_sme1_only_device_says_what_it_has_and_where_its_pair_is():
    facts = DeviceFacts(kind="android", serial="R5CX", abi="arm64-v8a", sme=True, sme2=False)
    assert no_sme2_runner_reason("on", facts) == (
        "does not apply here: device R5CX has SME but no SME2 (SME (no SME2) in its hwcaps): "
        "no SME2 kernel can run there; its SME pair (sme_on vs sme_off, benchmarks/test_sme.py) "
        "measures the SME it has")


def test_the_sme_pair_says_why_it_does_not_apply_on_other_classes():
    sme2 = DeviceFacts(kind="qemu", serial="qemu-max", sme=True, sme2=True)
    assert no_sme_runner_reason("off", sme2).startswith(
        "does not apply here: device qemu-max has SME2: its SME2 pair (sme2_on, sme2_off, "
        "sme_only) measures it; --device qemu:sme1 emulates SME without SME2")
    none = DeviceFacts(kind="host", serial="h", abi="x86_64", sme=False, sme2=False)
    assert no_sme_runner_reason("on", none).startswith(
        "does not apply here: device h has no SME (x86_64: no SME hwcap)")
    for unknown in (DeviceFacts(kind="android", sme=None, sme2=None), None):
        assert no_sme_runner_reason("on", unknown).startswith(
            "no SME-on runner configured: pass --runner sme_on=/path/to/executor_runner,sme=on")


def test_a_device_with_sme2_or_unknown_asks_for_the_runner():
    for facts in (DeviceFacts(kind="android", abi="arm64-v8a", sme2=True),
                  DeviceFacts(kind="android", abi="arm64-v8a", sme2=None), None):
        reason = no_sme2_runner_reason("off", facts)
        assert reason.startswith("no SME2-off runner configured: pass --runner "
                                 "sme2_off=/path/to/executor_runner,sme2=off")
        assert "has no SME2" not in reason
