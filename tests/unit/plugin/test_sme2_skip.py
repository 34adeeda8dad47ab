"""Why an SME2 comparison skips: on a device without SME2 that fact comes first (no runner pair
would help there); only where SME2 may be present is the user asked for an SME2-off runner."""

from __future__ import annotations

from pytest_sme2.plugin.fixtures import no_sme2_runner_reason
from pytest_sme2.results.device import DeviceFacts


def test_a_device_without_sme2_says_so_and_offers_qemu():
    facts = DeviceFacts(kind="host", abi="x86_64", sme=False, sme2=False)
    assert no_sme2_runner_reason("off", facts) == (
        "this device has no SME2 (x86_64: no SME2 hwcap); --device qemu emulates one")


def test_a_device_with_sme2_or_unknown_asks_for_the_runner():
    for facts in (DeviceFacts(kind="android", abi="arm64-v8a", sme2=True),
                  DeviceFacts(kind="android", abi="arm64-v8a", sme2=None), None):
        reason = no_sme2_runner_reason("off", facts)
        assert reason.startswith("no SME2-off runner configured: pass --runner "
                                 "sme2_off=/path/to/executor_runner,sme2=off")
        assert "has no SME2" not in reason
