"""--sme2-cooldown: which sensors count, what a phone's thermal state says, and the waiting
policy with a fake clock (no sleeping, no timing assertions)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_sme2.measure.config import BaseDirs, config_from_options
from pytest_sme2.devices.android.facts import parse_thermal_state
from pytest_sme2.devices.base import DeviceBase
from pytest_sme2.errors import Sme2Error
from pytest_sme2.results import RunContext
from pytest_sme2.devices.thermal import (CooldownPolicy, hold, is_cpu_zone, throttling_causes,
                                         wait_until_cool)
from pytest_sme2.results.records import CooldownRecord, ThermalState


@pytest.mark.parametrize("zone", ["cpu-0-0-usr", "cpu-1-0", "cpuss-0-usr", "mtktscpu",
                                  "cpu_big0", "tsens_tz_sensor1", "soc_max", "BIG", "little",
                                  "mid", "cpu (thermal_zone3)"])
def test_cpu_zones_count(zone):
    assert is_cpu_zone(zone)


@pytest.mark.parametrize("zone", ["battery", "skin-therm", "gpuss-0-usr", "G3D", "soc",
                                  "modem-0-usr", "pm8550b_tz", "charger_therm", "bigcore_skin"])
def test_other_zones_do_not(zone):
    # "soc" on Qualcomm is the battery's state of charge in percent.
    assert not is_cpu_zone(zone)


# What THERMAL_STATE_SCRIPT prints on a phone (Android 14, dumpsys trimmed).
PHONE = """\
thermal thermal_zone0 cpu-0-0-usr 41200
thermal thermal_zone1 cpu-1-0-usr 47500
thermal thermal_zone2 battery 30100
thermal thermal_zone3 soc 88
thermal thermal_zone4 gpuss-0-usr 52000
cooling cooling_device0 thermal-cpufreq-0 0
cooling cooling_device1 thermal-cpufreq-4 2
cooling cooling_device2 battery 1
dumpsys-begin
IsStatusOverride: false
Thermal Status: 1
Cached temperatures:
\tTemperature{mValue=99.0, mType=0, mName=cpu7, mStatus=0}
HAL Ready: true
Current temperatures from HAL:
\tTemperature{mValue=30.1, mType=2, mName=battery, mStatus=0}
\tTemperature{mValue=48.25, mType=0, mName=cpu7, mStatus=1}
\tTemperature{mValue=55.0, mType=1, mName=gpu0, mStatus=0}
Current cooling devices from HAL:
\tCoolingDevice{mValue=2, mType=2, mName=cpu4}
dumpsys-end
"""


def test_a_phone_state_keeps_cpu_sensors_and_says_why_it_throttles():
    s = parse_thermal_state(PHONE)
    # The GPU, battery and state-of-charge zones are out; the HAL's cached value is not read.
    assert s.cpu_c == {"cpu-0-0-usr": 41.2, "cpu-1-0-usr": 47.5, "HAL cpu7": 48.25}
    assert s.hottest == ("HAL cpu7", 48.25)
    assert s.throttling == ("thermal status 1 (light)", "thermal-cpufreq-4 at state 2")
    assert "battery" in s.zones and not s.cool(50.0)


def test_a_phone_without_dumpsys_or_cooling_devices():
    s = parse_thermal_state("thermal thermal_zone0 mtktscpu 36500\ndumpsys-begin\n"
                            "dumpsys-end\n")
    assert s.cpu_c == {"mtktscpu": 36.5} and s.throttling == ()
    assert s.cool(37.0) and not s.cool(36.0)


def test_a_phone_that_hides_its_zones_is_watched_through_the_thermal_hal():
    # SELinux on some phones denies the zones' temp files to the shell: no value is printed.
    text = ("thermal thermal_zone0 cpu-0-0-usr \ndumpsys-begin\nThermal Status: 0\n"
            "Current temperatures from HAL:\n"
            "\tTemperature{mValue=39.5, mType=0, mName=CPU4, mStatus=0}\n"
            "\tTemperature{mValue=33.0, mType=3, mName=skin, mStatus=0}\ndumpsys-end\n")
    s = parse_thermal_state(text)
    assert s.cpu_c == {"HAL CPU4": 39.5} and s.throttling == () and s.cool(40.0)


def test_throttling_counts_cpu_cooling_devices_and_the_status_only():
    assert throttling_causes({"battery": 3, "thermal-cpufreq-0": 0}, 0) == ()
    assert throttling_causes({"cpufreq-cpu4": 1}, None) == ("cpufreq-cpu4 at state 1",)
    assert throttling_causes({}, 3) == ("thermal status 3 (severe)",)


class FakeTime:
    """A clock that moves only when the policy sleeps."""

    def __init__(self):
        self.now = 100.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.sleeps.append(s)
        self.now += s


def readings(*temps, throttling=()):
    """A device whose hottest CPU sensor reads ``temps`` in turn (the last one stays)."""
    seq = [ThermalState({"cpu-1-0": t}, throttling if i == 0 else ()) for i, t in
           enumerate(temps)]
    calls = []

    def read():
        calls.append(1)
        return seq[min(len(calls) - 1, len(seq) - 1)]

    read.calls = calls
    return read


def test_a_cool_device_starts_at_once():
    t = FakeTime()
    rec = wait_until_cool(readings(35.0), CooldownPolicy(37.0, 60), clock=t.clock,
                          sleep=t.sleep)
    assert t.sleeps == [] and rec.polls == 1 and rec.waited_s == 0
    assert (rec.start_zone, rec.start_c, rec.hot) == ("cpu-1-0", 35.0, False)


def test_a_hot_device_is_waited_for_until_it_cools():
    t, heard = FakeTime(), []
    read = readings(45.0, 41.0, 38.0, 36.5, 30.0)
    rec = wait_until_cool(read, CooldownPolicy(37.0, 60), clock=t.clock, sleep=t.sleep,
                          on_wait=heard.append)
    assert len(read.calls) == 4 and t.sleeps == [2.0, 2.0, 2.0]
    assert rec.waited_s == 6.0 and rec.polls == 4 and not rec.hot
    assert (rec.first_c, rec.start_c) == (45.0, 36.5)
    assert [s.hottest for s in heard] == [("cpu-1-0", 45.0)]     # said once, when it began


def test_throttling_holds_a_device_that_is_cool_enough():
    t = FakeTime()
    read = readings(30.0, 30.0, throttling=("thermal status 2 (moderate)",))
    rec = wait_until_cool(read, CooldownPolicy(37.0, 60), clock=t.clock, sleep=t.sleep)
    assert rec.polls == 2 and rec.throttling == [] and not rec.hot


def test_a_device_that_never_cools_starts_hot_at_the_timeout():
    t = FakeTime()
    read = readings(45.0)
    policy = CooldownPolicy(37.0, 5.0)
    rec = wait_until_cool(read, policy, clock=t.clock, sleep=t.sleep)
    assert rec.hot and rec.start_c == 45.0
    assert sum(t.sleeps) == pytest.approx(5.0) and max(t.sleeps) <= policy.poll_s
    assert rec.waited_s == pytest.approx(5.0) and rec.polls == len(t.sleeps) + 1
    assert rec.summary() == "cpu-1-0 45.0 °C (above 37 °C)"


def test_polls_are_at_most_2_s_apart_and_at_least_10_per_timeout():
    assert CooldownPolicy(37, 600).poll_s == 2.0
    assert CooldownPolicy(37, 1).poll_s == 0.1


class Phone:
    spec = "android:FAKE"

    def __init__(self, *states):
        self.states = list(states)
        self.reads = 0

    def thermal_state(self):
        self.reads += 1
        return self.states[min(self.reads - 1, len(self.states) - 1)]


def test_hold_reads_the_device_and_reuses_its_first_look():
    t, said = FakeTime(), []
    phone = Phone(ThermalState({"cpu": 44.0}), ThermalState({"cpu": 36.0}))
    rec = hold(phone, CooldownPolicy(37.0, 60), said.append, clock=t.clock, sleep=t.sleep)
    assert phone.reads == 2 and rec.applied and rec.polls == 2 and rec.start_c == 36.0
    assert said == ["cooling down: cpu 44.0 °C > 37 °C; waiting up to 60 s"]


def test_hold_on_a_device_without_sensors_says_why_it_is_not_applied():
    class Host(DeviceBase):
        spec = "host"

    rec = hold(Host(), CooldownPolicy(37.0))
    assert not rec.applied and rec.reason == "device host has no thermal sensors to read"
    blind = Phone(ThermalState({}, (), zones=("battery", "skin")))
    rec = hold(blind, CooldownPolicy(37.0))
    assert not rec.applied and blind.reads == 1
    assert rec.reason == ("device android:FAKE reports no CPU temperature (zones: battery, "
                          "skin)")


def test_the_record_rides_in_results_json_and_old_documents_are_unchanged():
    rec = CooldownRecord(37.0, 60.0, hot=True, waited_s=60.0, polls=31, first_zone="cpu",
                         first_c=45.0, start_zone="cpu", start_c=44.0,
                         throttling=["thermal status 1 (light)"])
    ctx = RunContext(block=1, cooldown=rec)
    back = RunContext.from_json(json.loads(json.dumps(ctx.to_json())))
    assert back == ctx and back.started_hot and isinstance(back.cooldown, CooldownRecord)
    assert "cooldown" not in RunContext().to_json()
    assert rec.summary() == "cpu 44.0 °C (above 37 °C; thermal status 1 (light))"


def _config(ini: dict | None = None, **values):
    return config_from_options(values, ini or {}, BaseDirs(Path("/w"), Path("/r")))


def test_cooldown_options():
    assert _config().settings.cooldown is None
    cfg = _config(sme2_cooldown="37", sme2_cooldown_timeout="90")
    assert cfg.settings.cooldown == CooldownPolicy(37.0, 90.0)
    assert cfg.document()["cooldown"] == {"target_c": 37.0, "timeout_s": 90.0}
    assert "cooldown" not in _config().document()
    assert _config({"sme2_cooldown": "40"}).settings.cooldown == CooldownPolicy(40.0, 600)


@pytest.mark.parametrize("values,message", [
    (dict(sme2_cooldown="hot"), "--sme2-cooldown must be a temperature in degrees C between 0 "
                                "and 150 (e.g. 37), got 'hot'"),
    (dict(sme2_cooldown="370"), "--sme2-cooldown must be a temperature"),
    (dict(sme2_cooldown="37", sme2_cooldown_timeout="0"),
     "--sme2-cooldown-timeout must be a positive number of seconds, got '0'"),
    (dict(sme2_cooldown="37", sme2_cooldown_timeout="inf"), "--sme2-cooldown-timeout must be"),
])
def test_bad_cooldown_values_are_one_line(values, message):
    with pytest.raises(Sme2Error) as e:
        _config(**values)
    assert message in str(e.value)
