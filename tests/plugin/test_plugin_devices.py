"""Several devices in one session, scheduled over pytest-xdist: three fake phones (two on one
adb server, one on a second server on another port, reached as a remote server), the real adb
servers, the real native runner and a real .pte — a shelf of phones, without one."""

import json
import re
from collections import Counter

import pytest

from tests.fakes.adb_device import FakeAndroidConfig
from tests.fakes.android import AdbServer, connect_phone, release_phone

pytestmark = pytest.mark.usefixtures("inner_session_env")

RUN = r"\btimeout -k "    # the command that runs a benchmark's runner on a phone

BENCH = """
def test_lat(sme2_bench, sme2_case):
    r = sme2_bench(sme2_case.model, dtype=sme2_case.dtype, threads=sme2_case.threads,
                   runner="native")
    assert r.device.spec == sme2_case.device
"""
SME2_ONLY = """
def test_sme2_only(sme2_capable_device, sme2_case):
    assert sme2_capable_device.facts().sme2 is True
"""


@pytest.fixture
def second_server(tmp_path_factory):
    server = AdbServer(tmp_path_factory.mktemp("adb-home-2")).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def shelf(request, adb_server, second_server, tmp_path, monkeypatch):
    """Three phones: A (SME2) and B (no SME2) on the session's adb server, C (SME2) on the
    second one. ``request.param``: FakeAndroidConfig overrides for B."""
    for key, value in adb_server.env.items():
        monkeypatch.setenv(key, value)
    b_extra = getattr(request, "param", {})
    phones = {}
    try:
        phones["a"] = connect_phone(adb_server, tmp_path / "a", FakeAndroidConfig(serial_no="A1"))
        phones["b"] = connect_phone(adb_server, tmp_path / "b",
                                    FakeAndroidConfig(sme2=False, serial_no="B2", **b_extra))
        phones["c"] = connect_phone(second_server, tmp_path / "c",
                                    FakeAndroidConfig(serial_no="C3"))
        yield phones
    finally:
        for phone in phones.values():
            release_phone(phone)


def _spec(phone, remote_port: int | None = None) -> str:
    return f"android:{phone.serial}" + (f"@127.0.0.1:{remote_port}" if remote_port else "")


def _session(pytester, run_pytest, export_cache, second_server, *args: str, threads="1,2",
             files=(BENCH,)):
    pytester.makepyfile(test_a="\n".join(files))
    return run_pytest("--device", "android:*", "--device",
                      f"android:*@127.0.0.1:{second_server.port}",
                      f"--sme2-cache-dir={export_cache}", "--sme2-models=toy_cnn",
                      "--sme2-dtypes=fp32", f"--sme2-threads={threads}", "--runs=3",
                      "--warmup=1", "-rfEs", *args)


def test_three_phones_on_two_servers_with_n3(pytester, run_pytest, shelf, second_server,
                                             export_cache, toy_export):
    res = _session(pytester, run_pytest, export_cache, second_server, "-n", "3",
                   files=(BENCH, SME2_ONLY))
    specs = [_spec(shelf["a"]), _spec(shelf["b"]), _spec(shelf["c"], second_server.port)]
    # 2 cases x 3 phones benchmarked; the SME2 test passes on A and C and skips on B.
    res.assert_outcomes(passed=6 + 4, skipped=2)
    (listed,) = [ln for ln in res.stdout.lines if ln.startswith("sme2: 3 devices: ")]
    assert sorted(listed.split(": ", 2)[2].split(", ")) == sorted(specs)  # android:* expanded
    res.stdout.fnmatch_lines(["sme2: -n: --dist loadgroup*",
                              f"SKIPPED*device {shelf['b'].serial} (*) has no SME2*"])
    # Ids carry the device; results name the tests without xdist's @group suffix.
    res.stdout.fnmatch_lines([f"*test_lat[[]toy_cnn-fp32-t2-{specs[2]}[]]*"])
    doc = json.loads((pytester.path / "sme2-report" / "results.json").read_text())
    ran = Counter((b["device"]["spec"], b["threads"]) for b in doc["benchmarks"])
    assert ran == Counter({(s, t): 1 for s in specs for t in (1, 2)})   # every case, each once
    assert all(b["nodeid"].endswith("]") for b in doc["benchmarks"]), doc["benchmarks"]
    assert sorted(doc["session"]["config"]["devices"]) == sorted(specs)
    # No phone ever ran two runner processes at once, and each ran its own: two benchmarks,
    # each its block and two load-only processes (--sme2-loads 3).
    for phone in shelf.values():
        runs = [s for s in phone.device.spans if re.search(RUN, s.cmd)]
        assert len(runs) == 2 * 3, [s.cmd for s in runs]
        assert phone.device.overlapping(RUN) == []
        tmp = phone.root / "data" / "local" / "tmp"
        assert [p.name for p in tmp.iterdir() if p.name.startswith("pytest-sme2-")] == [
            "pytest-sme2-cache"]     # the session folders are gone, the runner cache stays
    # The terminal table and the report put the devices side by side.
    out = res.stdout.str()
    table = out[out.index("pytest-sme2 summary"):]
    assert table.splitlines()[1].split()[:2] == ["device", "benchmark"]
    report = (pytester.path / "sme2-report" / "report.md").read_text()
    side = report[report.index("## Devices Side by Side"):]
    header = side.splitlines()[4]
    assert all(s in header for s in specs), header
    assert "SM8650" in report and "MT6993" in report    # each device's facts in Metadata


HOLD = """
import json, os, time

def test_hold(sme2_device, sme2_device_spec, sme2_case):
    assert sme2_case.device == sme2_device_spec == sme2_device.spec
    start = time.time()
    time.sleep(0.2)
    line = {"device": sme2_device_spec, "worker": os.environ.get("PYTEST_XDIST_WORKER"),
            "start": start, "end": time.time()}
    with open("spans.jsonl", "a") as fh:
        fh.write(json.dumps(line) + "\\n")
"""


def test_the_host_is_a_device_too_one_test_at_a_time_on_each(pytester, run_pytest, shelf,
                                                              export_cache):
    """The host and two phones with -n 3: each device's tests run on one worker, never two at
    once (the tests record their own start and end)."""
    pytester.makepyfile(test_a=HOLD)
    res = run_pytest("--device", "host", "--device", "android:*", "-n", "3",
                     "--sme2-models=toy_cnn", "--sme2-dtypes=fp32", "--sme2-threads=1,2,3")
    res.assert_outcomes(passed=9)
    spans = [json.loads(ln) for ln in (pytester.path / "spans.jsonl").read_text().splitlines()]
    by_device: dict[str, list[dict]] = {}
    for span in spans:
        by_device.setdefault(span["device"], []).append(span)
    assert sorted(by_device) == sorted(["host", _spec(shelf["a"]), _spec(shelf["b"])])
    for device, mine in by_device.items():
        assert len(mine) == 3 and len({s["worker"] for s in mine}) == 1, mine
        mine.sort(key=lambda s: s["start"])
        assert all(b["start"] >= a["end"] for a, b in zip(mine, mine[1:])), (device, mine)


@pytest.mark.parametrize("shelf", [{"vanish_on": RUN, "vanish_at": 2}], indirect=True)
def test_a_phone_unplugged_mid_session_fails_only_its_own_remaining_cases(
        pytester, run_pytest, shelf, second_server, export_cache, toy_export):
    # One process per benchmark (--sme2-loads 1): B's second run is its second benchmark's.
    res = _session(pytester, run_pytest, export_cache, second_server, "-n", "3",
                   "--sme2-loads=1", threads="1,2,3")
    b = shelf["b"].serial
    # A and C: all three cases; B: its first, then it is gone at its second run.
    res.assert_outcomes(passed=3 + 3 + 1, failed=2)
    failed = [ln for ln in res.stdout.lines if ln.startswith("FAILED ")]
    assert len(failed) == 2 and all(f"-android:{b}]" in ln for ln in failed), failed
    # Each failure is one line saying what happened to which phone, no traceback.
    said = [ln for ln in res.stdout.lines
            if re.fullmatch(rf"device {re.escape(b)} disconnected .*; reconnect it and run "
                            "again", ln)]
    assert len(said) == 2, res.stdout.str()
    assert "Traceback" not in res.stdout.str()
    doc = json.loads((pytester.path / "sme2-report" / "results.json").read_text())
    ran = Counter(bm["device"]["serial"] for bm in doc["benchmarks"])
    assert ran == {shelf["a"].serial: 3, b: 1, shelf["c"].serial: 3}   # all that was measured


def test_android_star_takes_the_ready_devices_and_says_which_it_left_out(adb_server,
                                                                        second_server,
                                                                        tmp_path):
    from pytest_sme2.devices.base import DeviceError
    from pytest_sme2.devices.registry import resolve_devices

    ready = connect_phone(adb_server, tmp_path / "ok")
    locked = connect_phone(adb_server, tmp_path / "locked",
                           FakeAndroidConfig(unauthorized=True), state="unauthorized")
    only_locked = connect_phone(second_server, tmp_path / "locked2",
                                FakeAndroidConfig(unauthorized=True), state="unauthorized")
    try:
        devices, notes = resolve_devices(["android:*", f"android:{ready.serial}"])
        assert devices == (f"android:{ready.serial}",)            # once, however named
        assert notes == [f"--device android:*: left out Android device {locked.serial} is "
                         "unauthorized: unlock it and accept the 'Allow USB debugging?' RSA "
                         "key prompt, then run again"]
        with pytest.raises(DeviceError, match=rf"--device android:\*@127.0.0.1:"
                                              rf"{second_server.port}: the adb server at .* "
                                              "lists no device ready for commands"):
            resolve_devices([f"android:*@127.0.0.1:{second_server.port}"])
    finally:
        for phone in (ready, locked, only_locked):
            release_phone(phone)


def test_a_distribution_that_would_overlap_measurements_fails_each_test_in_one_line(
        pytester, run_pytest):
    pytester.makepyfile(test_a=HOLD)
    res = run_pytest("--device", "host", "-n", "2", "--dist", "each", "--sme2-models=toy_cnn",
                     "--sme2-dtypes=fp32", "--sme2-threads=1")
    res.assert_outcomes(errors=2)      # the one case, on each of the two workers
    res.stdout.fnmatch_lines(["--dist each would measure on one device from several workers "
                              "at once: use --dist loadgroup*"])
    assert "Traceback" not in res.stdout.str()


def test_one_device_keeps_its_ids_and_several_add_theirs(pytester, run_pytest):
    pytester.makepyfile(test_a=HOLD)
    one = run_pytest("--co", "-q", "--sme2-models=toy_cnn", "--sme2-dtypes=fp32",
                     "--sme2-threads=1,2")
    one.stdout.fnmatch_lines(["test_a.py::test_hold[[]toy_cnn-fp32-t1[]]",
                              "test_a.py::test_hold[[]toy_cnn-fp32-t2[]]"])
    two = run_pytest("--co", "-q", "--device", "host", "--device", "qemu:max,sme=off",
                     "--sme2-models=toy_cnn", "--sme2-dtypes=fp32", "--sme2-threads=1,2",
                     "-k", "t2")
    two.stdout.fnmatch_lines(["test_a.py::test_hold[[]toy_cnn-fp32-t2-host[]]",
                              "test_a.py::test_hold[[]toy_cnn-fp32-t2-qemu:max,sme=off[]]",
                              "2/4 tests collected (2 deselected)*"])


def test_the_emulated_sme2_cpu_beside_a_phone_without_sme2(pytester, run_pytest, adb_server,
                                                           tmp_path, monkeypatch, export_cache,
                                                           toy_export, provisioned_qemu):
    """The project's own benchmark files over `--device qemu` (SME2, emulated on this CPU) and
    a phone without SME2, with -n 2: the SME2 comparison runs where SME2 exists and skips on
    the phone, in the same session; the host-only test skips on both."""
    import shutil
    from pathlib import Path

    from tests.needs import missing

    if not provisioned_qemu:
        missing("QEMU", "run `pytest-sme2 setup qemu`")
    for key, value in adb_server.env.items():
        monkeypatch.setenv(key, value)
    phone = connect_phone(adb_server, tmp_path / "nosme2", FakeAndroidConfig(sme2=False))
    try:
        for name in ("test_latency.py", "test_sme2.py"):
            shutil.copy(Path(__file__).parents[2] / "benchmarks" / name, pytester.path / name)
        res = run_pytest("--device", "qemu", "--device", f"android:{phone.serial}", "-n", "2",
                         "-rs", f"--sme2-cache-dir={export_cache}", "--sme2-models=toy_cnn",
                         "--sme2-dtypes=fp32", "--sme2-threads=1", "--runs=3", "--warmup=1",
                         "--sme2-blocks=2")
    finally:
        release_phone(phone)
    # latency on both; the SME2 comparison on qemu; skipped: the comparison on the phone and
    # the host-runners test on both.
    res.assert_outcomes(passed=3, skipped=3)
    res.stdout.fnmatch_lines(["sme2: sme2_on vs sme2_off on toy_cnn fp32 t1 on qemu: speed-up*"
                              "outputs equal*",
                              "SKIPPED*this device has no SME2 (*: no SME2 hwcap); --device qemu "
                              "emulates one*"])
    doc = json.loads((pytester.path / "sme2-report" / "results.json").read_text())
    assert {b["device"]["spec"] for b in doc["benchmarks"]} == {"qemu",
                                                                f"android:{phone.serial}"}
    report = (pytester.path / "sme2-report" / "report.md").read_text()
    speedups = report[report.index("## Speedup"):]
    assert "toy_cnn fp32 t1 on qemu" in speedups
