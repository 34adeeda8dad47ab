"""Parsing what an Android phone says about itself, and the ``--device android...`` spec."""

import pytest

from pytest_sme2.devices import DeviceError
from pytest_sme2.devices.android import AndroidSpec, parse_spec, state_problem
from pytest_sme2.devices.android.facts import (auxv_hwcap2, check_mask, clusters, cpu_mask,
                                               fastest_cpus, parse_cpu_list, parse_facts,
                                               parse_thermal)

KHZ = {0: 1800000, 1: 1800000, 2: 1800000, 3: 1800000, 4: 2850000, 5: 2850000, 6: 2850000,
       7: 3300000}


@pytest.mark.parametrize("spec,parsed", [
    ("android", AndroidSpec(None, None, None)),
    ("android:R5CX12", AndroidSpec("R5CX12", None, None)),
    ("android:127.0.0.1:40001", AndroidSpec("127.0.0.1:40001", None, None)),
    ("android:R5CX12@lab-pc:5037", AndroidSpec("R5CX12", "lab-pc", 5037)),
    ("android:@lab-pc:5038", AndroidSpec(None, "lab-pc", 5038)),
])
def test_parse_spec(spec, parsed):
    assert parse_spec(spec) == parsed


@pytest.mark.parametrize("spec", ["android:X@lab-pc", "android:X@:5037", "android:X@h:99999"])
def test_bad_server_in_spec(spec):
    with pytest.raises(DeviceError, match=r"the adb server must be HOST:PORT"):
        parse_spec(spec)


def test_state_problems_say_what_to_do():
    assert state_problem("S", "device") is None
    assert "accept the 'Allow USB debugging?' RSA key prompt" in state_problem("S", "unauthorized")
    assert "is offline: reconnect it" in state_problem("S", "offline")
    assert "is in state 'recovery'" in state_problem("S", "recovery")


def test_cpu_lists_and_masks():
    assert parse_cpu_list("0-3,6") == [0, 1, 2, 3, 6] and parse_cpu_list("junk") == []
    assert clusters(KHZ) == [{"name": "little", "cpus": [0, 1, 2, 3], "max_khz": 1800000},
                             {"name": "mid", "cpus": [4, 5, 6], "max_khz": 2850000},
                             {"name": "big", "cpus": [7], "max_khz": 3300000}]
    # sysfs cpu_capacity groups first: two cores at one frequency, other capacities
    cap = {0: 300, 1: 300, 2: 300, 3: 300, 4: 800, 5: 800, 6: 1024, 7: 1024}
    assert [(c["name"], c["cpus"], c.get("capacity")) for c in clusters(
        {c: 2000000 for c in range(8)}, cap)] == [
        ("little", [0, 1, 2, 3], 300), ("mid", [4, 5], 800), ("big", [6, 7], 1024)]
    assert fastest_cpus(KHZ, 1) == [7] and fastest_cpus(KHZ, 4) == [4, 5, 6, 7]
    assert fastest_cpus(KHZ, 5) == list(range(8))
    assert cpu_mask([4, 5, 6, 7]) == "f0"


@pytest.mark.parametrize("mask,msg", [
    ("zz", "taskset mask 'zz' is not a hexadecimal CPU mask (e.g. f0 = CPUs 4-7); fix "
           "--sme2-taskset"),
    ("0x0", "taskset mask '0x0' selects no CPU; fix --sme2-taskset"),
    ("1f00", "taskset mask '1f00' selects CPU 8-12 but device S has 8 CPUs (0-7); fix "
             "--sme2-taskset"),
    ("500", "taskset mask '500' selects CPU 8,10 but device S has 8 CPUs (0-7); fix "
            "--sme2-taskset"),
])
def test_bad_masks_are_named(mask, msg):
    with pytest.raises(DeviceError) as ei:
        check_mask(mask, 8, "S")
    assert str(ei.value) == msg


def test_good_masks_are_normalised():
    assert check_mask("0xF0", 8, "S") == "f0" and check_mask("80", 8, "S") == "80"


def test_auxv_hwcap2_reads_pairs_until_at_null():
    sme2 = (1 << 37) | (1 << 23)
    assert auxv_hwcap2(f"33 4096\n 16 255\n 26 {sme2}\n 0 0\n") == sme2
    assert auxv_hwcap2("16 255 0 0 26 7") is None        # after AT_NULL: not part of the vector
    assert auxv_hwcap2("") is None


def test_thermal_zones_in_celsius_and_duplicate_types_kept():
    text = ("thermal thermal_zone0 cpu 41200\nthermal thermal_zone1 cpu 45000\n"
            "thermal thermal_zone2 battery 31\nthermal thermal_zone3 broken \nnoise\n")
    assert parse_thermal(text) == {"cpu": 41.2, "cpu (thermal_zone1)": 45.0, "battery": 31.0}


def test_facts_without_auxv_or_features_leave_sme_unknown():
    text = ("prop ro.product.model=Pixel 9\nprop ro.board.platform=zumapro\n"
            "prop ro.product.cpu.abi=arm64-v8a\nprop ro.build.version.release=15\n"
            "prop ro.build.version.sdk=35\nkernel 6.1.99\ncpu 0 1950000 sched_pixel\n"
            "cpu 1 - -\nallowed \t0-1\nauxv\nfeatures\n")
    f = parse_facts(text, "S")
    assert (f.model, f.cpu, f.os, f.cores, f.sme, f.sme2) == (
        "Pixel 9", "zumapro", "Android 15 (SDK 35)", 2, None, None)
    assert f.extra["cpu_max_khz"] == {"0": 1950000} and f.extra["governor"] == "sched_pixel"
    assert f.extra["sme_source"] == "unknown" and f.extra["cpus_allowed"] == [0, 1]


def test_facts_from_something_that_is_not_android():
    with pytest.raises(DeviceError, match=r"answered the facts query with nothing usable"):
        parse_facts("sh: getprop: not found\n", "S")


def test_only_a_fake_phone_names_its_target_and_emulator():
    phone = "prop ro.product.model=Pixel 9\nprop ro.pytest_sme2.target=\ncpu 0 1950000 -\n"
    f = parse_facts(phone, "S")
    assert (f.target, f.emulated) == ("", False)      # a real phone: its ABI decides
    assert "target" not in f.to_dict()["extra"] and "emulated" not in f.to_dict()["extra"]
    fake = (phone.replace("target=", "target=aarch64-linux-gnu")
            + "prop ro.pytest_sme2.emulator=QEMU 11.1.3 user mode, -cpu max\n")
    f = parse_facts(fake, "S")
    assert (f.target, f.emulated) == ("aarch64-linux-gnu", True)
    assert f.to_dict()["extra"]["target"] == "aarch64-linux-gnu"     # as results.json held it
    assert f.to_dict()["extra"]["emulated"] is True
    assert type(f).from_dict(f.to_dict()) == f
    assert f.extra["emulator"] == "QEMU 11.1.3 user mode, -cpu max"
