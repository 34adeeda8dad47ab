"""--sme2-cooldown end to end: a fake phone (real adb server) whose CPU zone cools while the
hold watches it, one that never cools, and the host, which has no sensors to watch."""

import json

import pytest

from tests.fakes.adb_device import FakeAndroidConfig
from tests.fakes.android import connect_phone, release_phone

pytestmark = pytest.mark.usefixtures("inner_session_env")

BENCH = """
import pytest

@pytest.mark.parametrize("threads", [1, 2])
def test_lat(sme2_bench, threads):
    sme2_bench("toy_cnn", dtype="fp32", threads=threads, runner="native")
"""


@pytest.fixture
def phone(adb_server, tmp_path, monkeypatch):
    """``phone(config)``: a connected fake phone, the inner session pointed at its adb
    server."""
    for key, value in adb_server.env.items():
        monkeypatch.setenv(key, value)
    phones = []

    def connect(config: FakeAndroidConfig):
        phones.append(connect_phone(adb_server, tmp_path / f"phone{len(phones)}", config))
        return phones[-1]

    yield connect
    for p in phones:
        release_phone(p)


def _session(pytester, run_pytest, export_cache, device: str, *args: str):
    pytester.makepyfile(test_a=BENCH)
    return run_pytest(f"--device={device}", f"--sme2-cache-dir={export_cache}", "--runs=3",
                      "--warmup=1", *args)


def _blocks(pytester) -> list[dict]:
    return json.loads((pytester.path / "sme2-report" / "results.json").read_text())["benchmarks"]


def test_a_hot_phone_is_held_until_it_cools(pytester, run_pytest, export_cache, toy_export,
                                            phone):
    # cpu-1-0 reads 52 °C for the facts and the first look, then cools as the hold looks again;
    # cpu-0-0 stays at 41.2 °C, under the 42 °C asked for.
    p = phone(FakeAndroidConfig(thermal_steps={"cpu-1-0": (52000, 52000, 47000, 39000)}))
    res = _session(pytester, run_pytest, export_cache, f"android:{p.serial}",
                   "--sme2-cooldown=42", "--sme2-cooldown-timeout=60")
    res.assert_outcomes(passed=2)
    res.stdout.fnmatch_lines(["sme2: cooling down: cpu-1-0 52.0 °C > 42 °C; waiting up to 60 s"])
    first, second = _blocks(pytester)
    held = first["cooldown"]
    assert held["applied"] and not held["hot"] and held["polls"] >= 2
    assert (held["first_zone"], held["first_c"]) == ("cpu-1-0", 52.0)
    assert held["start_c"] <= 42 and held["throttling"] == []
    # The block's start and end temperatures, read after the hold.
    assert first["thermal_before"]["cpu-1-0"] <= 42 and first["thermal_after"]
    assert second["cooldown"]["polls"] == 1               # already cool: no wait
    assert "STARTED HOT" not in res.stdout.str()
    report = (pytester.path / "sme2-report" / "report.md").read_text()
    assert "every block started at or below 42 °C with no throttling" in report
    assert json.loads((pytester.path / "sme2-report" / "results.json").read_text())[
        "session"]["config"]["cooldown"] == {"target_c": 42.0, "timeout_s": 60.0}


def test_a_phone_that_never_cools_is_measured_kept_and_flagged(pytester, run_pytest,
                                                               export_cache, toy_export, phone):
    p = phone(FakeAndroidConfig(thermal=(("cpu-0-0", 41200), ("cpu-1-0", 58000)),
                                thermal_status=2))
    res = _session(pytester, run_pytest, export_cache, f"android:{p.serial}",
                   "--sme2-cooldown=42", "--sme2-cooldown-timeout=1")
    res.assert_outcomes(passed=2)
    res.stdout.fnmatch_lines([
        "sme2: test_lat[[]1[]] (native) STARTED HOT after waiting * s: cpu-1-0 58.0 °C (above "
        "42 °C; thermal status 2 (moderate)); measured, kept and flagged",
        "*pytest-sme2 summary*",
        "started hot: 2 of 2 blocks were above 42 °C or throttling when the 1 s cooldown ran "
        "out (kept; flagged in results.json and report.md)"])
    for b in _blocks(pytester):
        assert b["cooldown"]["hot"] and b["cooldown"]["waited_s"] >= 1
        assert b["cooldown"]["throttling"] == ["thermal status 2 (moderate)"]
        assert len(b["e2e_ms"]) == 3                       # measured all the same, and kept
    report = (pytester.path / "sme2-report" / "report.md").read_text()
    assert "**Started hot:** 2 of 2 blocks" in report


def test_the_host_says_once_that_it_cannot_hold(pytester, run_pytest, export_cache,
                                               toy_export):
    res = _session(pytester, run_pytest, export_cache, "host", "--sme2-cooldown=40")
    res.assert_outcomes(passed=2)
    notes = [line for line in res.stdout.lines if "--sme2-cooldown" in line]
    assert notes == ["sme2: --sme2-cooldown 40 °C cannot be applied: device host has no "
                     "thermal sensors to read; blocks start without waiting"]
    assert all(not b["cooldown"]["applied"] for b in _blocks(pytester))
