"""Several devices in one session, without devices: the --device list, the matrix's device
axis, the scheduling groups, the session's per-device state and how reports put devices side
by side (pure functions over crafted results)."""

from __future__ import annotations

import copy
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_sme2.measure.block import artifact_dir
from pytest_sme2.measure.config import BaseDirs, Sme2Config, config_from_options, parse_devices
from pytest_sme2.devices.registry import resolve_devices, schedule_group
from pytest_sme2.errors import Sme2Error
from pytest_sme2.measure.matrix import Case, with_devices
from pytest_sme2.report.digest import devices_side_by_side, units
from pytest_sme2.report.markdown.render import render_markdown
from pytest_sme2.report.terminal import summary_table
from pytest_sme2.results import load_results
from pytest_sme2.plugin.scheduling import read_groups, write_groups
from pytest_sme2.measure.session import BenchSession
from pytest_sme2.report.view import SessionView
from tests.fakes.results_docs import ANDROID, HOST_NO_SME2, single_doc, sme2_doc, steady
from tests.unit.report.test_report import assert_tables_valid, section, table_rows

DIRS = BaseDirs(invocation=Path("/here"), rootdir=Path("/repo"))
PHONE = "android:R5CX1234@buildbox:5037"


def test_devices_from_the_command_line_or_the_ini_lines_once_each_in_order():
    assert parse_devices(["android:A", "host", "android:A"], "host") == ("android:A", "host")
    assert parse_devices(None, "host\n  android:*\n\n") == ("host", "android:*")
    # A QEMU CPU spec holds a comma: a value is never split on commas.
    assert parse_devices("qemu:max,sme=off", "host") == ("qemu:max,sme=off",)
    with pytest.raises(Sme2Error, match="--device: no device given"):
        parse_devices(None, "  \n")


def test_emulated_defaults_only_when_every_device_is_emulated():
    def cfg(*devices: str) -> Sme2Config:
        return config_from_options({"device": list(devices)}, {}, DIRS)

    assert cfg("qemu", "qemu:max,sme=off").settings.runs == 5
    mixed = cfg("qemu", "host")
    assert not mixed.emulated and mixed.settings.runs == 30      # the real device sets them
    assert mixed.devices == ("qemu", "host")
    assert mixed.document(("qemu", "host"))["devices"] == ["qemu", "host"]
    assert "device" not in mixed.document(("qemu", "host"))
    assert cfg("host").document()["device"] == "host"            # one device: as before


def test_only_android_star_needs_an_adb_server_to_resolve():
    assert resolve_devices(["host", "qemu", "android:R5", "host"]) == (
        ("host", "qemu", "android:R5"), [])


def test_a_device_is_a_group_and_everything_on_this_cpu_is_one():
    assert schedule_group("host") == schedule_group("qemu:max,sme=off") == "host"
    assert schedule_group("android:R5") == "android:R5"
    # xdist reads a group from after the last '@' of a node id: a group never holds one.
    assert "@" not in schedule_group(PHONE)
    assert schedule_group(PHONE) != schedule_group("android:R5CX1234@otherbox:5037")


def test_the_device_axis_keeps_single_device_ids_and_runs_device_by_device():
    cases = [Case("toy_cnn", "fp32", 1), Case("toy_cnn", "fp32", 2)]
    both = with_devices(cases, ["host", PHONE])
    assert [c.device for c in both] == ["host", "host", PHONE, PHONE]
    assert both[0].id == "toy_cnn-fp32-t1"                       # what one device shows
    assert both[3].device_id == f"toy_cnn-fp32-t2-{PHONE}"


def test_artifact_folders_of_long_ids_stay_apart():
    base = "benchmarks/test_sme2.py::test_sme2_speedup[mobilenet_v3_small-int8_dynamic-t1-"
    a = artifact_dir(Path("r"), base + "android:R5CX1234567@buildbox.example.com:5037]")
    b = artifact_dir(Path("r"), base + "android:R5CX1234568@buildbox.example.com:5037]")
    assert a != b and len(a.name) <= 120 and len(b.name) <= 120
    short = "b.py::test_latency[toy_cnn-fp32-t1]"
    assert artifact_dir(Path("r"), short).name == "b.py_test_latency_toy_cnn-fp32-t1"


def test_worker_groups_round_trip(tmp_path):
    write_groups(tmp_path, "gw0", {"t.py::a[x]": "host"})
    write_groups(tmp_path, "gw1", {"t.py::a[x]": "host", "t.py::b[y]": "android:R5"})
    assert read_groups(tmp_path) == {"t.py::a[x]": "host", "t.py::b[y]": "android:R5"}
    assert not list(tmp_path.glob(".*"))                        # no partial file left


class _Device:
    def __init__(self, spec: str, target: str, sme2: bool):
        self.spec, self.target = spec, target
        self._facts = SimpleNamespace(sme2=sme2)

    def facts(self):
        return self._facts


def test_the_session_keeps_each_devices_state_apart():
    session = BenchSession(devices=("qemu", "android:R5"))
    session._devices["qemu"] = _Device("qemu", "aarch64-linux-gnu", True)
    session._devices["android:R5"] = _Device("android:R5", "android", True)
    # The masked SME2 pair exists on QEMU; asking there first must not lend it to the phone.
    assert session.sme2_runner("on", "qemu") == "sme2_on"
    assert session.sme2_runner("on", "android:R5") is None
    with pytest.raises(Sme2Error, match="runs on 2 devices .*name the device"):
        session.device()


def _two_device_doc() -> dict:
    host = single_doc(device={**HOST_NO_SME2, "spec": "host"})
    phone = single_doc(samples=steady(3.0), device={**ANDROID, "spec": PHONE})
    host["benchmarks"][0]["nodeid"] = "b.py::test_latency[toy_cnn-fp32-t1-host]"
    phone["benchmarks"][0]["nodeid"] = f"b.py::test_latency[toy_cnn-fp32-t1-{PHONE}]"
    doc = copy.deepcopy(host)
    doc["benchmarks"] += phone["benchmarks"]
    return doc


def test_units_never_pool_two_devices():
    us = units(load_results(_two_device_doc()))
    assert [u.point for u in us] == ["toy_cnn fp32 t1 on host", f"toy_cnn fp32 t1 on {PHONE}"]
    assert [round(u.sides[0].latency.median_ms, 1) for u in us] == [2.0, 3.0]


def test_devices_side_by_side_in_the_report_and_the_terminal():
    doc = _two_device_doc()
    labels, rows = devices_side_by_side(load_results(doc))
    assert labels == ["host", PHONE] and len(rows) == 1
    assert [round(p.median_ms, 1) for p in rows[0].latency.values()] == [2.0, 3.0]

    text = render_markdown(doc)
    assert_tables_valid(text)
    side = section(text, "Devices Side by Side")
    assert table_rows(side, "model")[0][4:] == ["host", PHONE]
    (row,) = table_rows(side, "toy_cnn")
    assert [float(c.split()[0]) for c in row[4:]] == pytest.approx([2.0, 3.0], abs=0.01)
    latency = section(text, "Latency Comparison")
    assert [r[3] for r in table_rows(latency, "toy_cnn")] == ["host", PHONE]
    assert table_rows(section(text, "Metadata"), "fact")[0] == ["fact", "host", PHONE]

    results = load_results(doc).benchmarks
    lines = summary_table(SessionView.of(list(reversed(results))))
    assert lines[0].split()[:2] == ["device", "benchmark"]
    assert [ln.split()[0] for ln in lines[2:]] == [PHONE, "host"]


def test_one_device_reports_as_before():
    text = render_markdown(sme2_doc())
    assert "## Devices Side by Side" not in text
    assert table_rows(section(text, "Metadata"), "fact")[0] == ["fact", "device"]
    lines = summary_table(load_results(sme2_doc()))
    assert lines[0].split()[0] == "benchmark"


def test_a_comparison_line_names_its_device_when_asked():
    from pytest_sme2.report.terminal import comparison_line

    (cmp,) = sme2_doc()["comparisons"]
    assert " t1: speed-up" in comparison_line(cmp)
    assert f" t1 on {PHONE}: speed-up" in comparison_line(cmp, PHONE)


def test_one_devices_failed_cleanup_costs_the_others_nothing():
    cleaned = []

    class _Gone(_Device):
        def cleanup(self):
            raise Sme2Error("device R5 disconnected while cleaning up; reconnect it")

    class _Fine(_Device):
        def cleanup(self):
            cleaned.append(self.spec)

    session = BenchSession(devices=("android:R5", "android:R6"))
    session._devices["android:R5"] = _Gone("android:R5", "android", False)
    session._devices["android:R6"] = _Fine("android:R6", "android", False)
    with pytest.raises(Sme2Error, match="device R5 disconnected"):
        session.close()
    assert cleaned == ["android:R6"]


# -- adb servers on other machines (issue 32, item 7): parsed, never connected to ----------------

@pytest.mark.parametrize("host", ["127.0.0.1", "127.3.2.1", "::1", "[::1]", "localhost",
                                  "LOCALHOST", "localhost.", "lab.localhost", "::ffff:127.0.0.1"])
def test_loopback_adb_servers(host):
    from pytest_sme2.devices.android import is_loopback

    assert is_loopback(host)


@pytest.mark.parametrize("host", ["labhost", "10.0.0.5", "192.168.1.2", "0.0.0.0", "::",
                                  "fe80::1", "localhost.example.com", "127.0.0.1.nip.io"])
def test_adb_servers_on_the_network(host):
    from pytest_sme2.devices.android import is_loopback

    assert not is_loopback(host)


def test_no_word_about_local_adb_servers(monkeypatch):
    from pytest_sme2.devices.registry import remote_adb_warning

    monkeypatch.delenv("ANDROID_ADB_SERVER_HOST", raising=False)
    assert remote_adb_warning(["host", "qemu", "android", "android:R5", "android:*",
                               "android:R5@127.0.0.1:5037", "android:*@localhost:5038",
                               "android:X@::1:5037", "android:@127.0.0.2:6000"]) is None


def test_a_remote_adb_server_is_named_once_with_the_tunnel_to_use(monkeypatch):
    from pytest_sme2.devices.registry import remote_adb_warning

    monkeypatch.delenv("ANDROID_ADB_SERVER_HOST", raising=False)
    # A session's fake adb server sets the port; a bare "android" spec would then name it.
    monkeypatch.delenv("ANDROID_ADB_SERVER_PORT", raising=False)
    tail = ("the adb server protocol is unauthenticated and unencrypted (whoever reaches the "
            "port runs commands on its phones): tunnel it, ")
    assert remote_adb_warning(["host", "android:*@labhost:5037"]) == (
        "sme2: the adb server at labhost:5037 is reached over the network; " + tail
        + "`ssh -N -L 5038:localhost:5037 labhost`, then --device 'android:*@localhost:5038' "
        "(docs/android.md)")
    # Several specs, two servers: one line naming both, the tunnel of the first.
    line = remote_adb_warning(["android:R5@10.0.0.5:5037", "android:R6@10.0.0.5:5037",
                               "android:*@labhost:5038", "android:L@localhost:5037"])
    assert line == ("sme2: the adb servers at 10.0.0.5:5037, labhost:5038 are reached over the "
                    "network; " + tail + "`ssh -N -L 5038:localhost:5037 10.0.0.5`, then "
                    "--device 'android:R5@localhost:5038' (docs/android.md)")
    assert "\n" not in line
    # The server a bare spec finds through the environment counts too.
    monkeypatch.setenv("ANDROID_ADB_SERVER_HOST", "labhost")
    assert remote_adb_warning(["android"]).startswith("sme2: the adb server at labhost:5037 is")


def test_a_session_says_it_once_before_connecting(pytester, monkeypatch):
    """The line is written once per session, even with -q, and nothing connects here: device
    resolution is replaced (no traffic to a non-loopback address in tests)."""
    from pytest_sme2 import plugin

    monkeypatch.delenv("ANDROID_ADB_SERVER_HOST", raising=False)
    monkeypatch.setattr(plugin, "resolve_devices", lambda specs: (tuple(specs), []))
    monkeypatch.setattr(plugin, "check_only_device", lambda devices: None)
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = pytester.runpytest_inprocess("-q", "-p", "no:cacheprovider",
                                          "--device", "android:A@labhost:5037",
                                          "--device", "android:B@labhost:5037")
    out = result.stdout.str()
    assert result.ret == 0, out
    assert out.count("unauthenticated and unencrypted") == 1, out
    assert "sme2: the adb server at labhost:5037 is reached over the network" in out
    local = pytester.runpytest_inprocess("-q", "-p", "no:cacheprovider",
                                         "--device", "android:A@127.0.0.1:5037")
    assert "unauthenticated" not in local.stdout.str()
