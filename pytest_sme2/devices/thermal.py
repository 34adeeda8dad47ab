"""A device that is the same each time (``--sme2-cooldown TEMP_C``): before each block, hold
until the device's hottest CPU sensor is at or below TEMP_C and it reports no throttling, up to
a timeout; a block that had to start hot is flagged, never dropped.

The policy here is pure (:func:`wait_until_cool` takes the reading, the clock and the sleep as
arguments); the device I/O is the device's ``thermal_state()`` (Android:
:func:`pytest_sme2.devices.android.facts.parse_thermal_state` over one adb round trip).

Which sensors count ("CPU zones"): a thermal zone whose type names the CPU or its clusters —
it contains ``cpu`` (Qualcomm ``cpu-1-0-usr``, ``cpuss-0-usr``; MediaTek ``mtktscpu``,
``cpu_big0``), ``tsens`` (older Qualcomm sensors), is ``soc_max`` (MediaTek's hottest SoC
sensor), or is a cluster name (``big``, ``mid``, ``little``, ``prime``: Exynos, Tensor); and
every temperature the thermal HAL reports with type CPU (``dumpsys thermalservice``). Battery,
skin, GPU, modem and charger zones do not count, nor a bare ``soc`` (on Qualcomm that is the
battery's state of charge in percent, not a temperature).

What counts as throttling: the thermal service's status above 0 (NONE) where ``dumpsys
thermalservice`` reports it, or a cooling device whose type names the CPU (``thermal-cpufreq-0``,
``cpufreq-cpu4``, ``cpu-isolate2``) at a state above 0."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Mapping

from pytest_sme2.results.records import CooldownRecord, ThermalState

if TYPE_CHECKING:
    from pytest_sme2.devices.base import Device

DEFAULT_TIMEOUT_S = 600.0
# At least this many looks at the device within the timeout, and no more than POLL_S apart:
# each look is one adb round trip (~0.1 s with dumpsys), cheap beside a benchmark block.
MIN_POLLS = 10
POLL_S = 2.0

_CPU_ZONE = re.compile(r"cpu|tsens|^soc_max$|^(big|mid|little|prime)\d*$", re.IGNORECASE)
_CPU_COOLING = re.compile(r"cpu", re.IGNORECASE)
THERMAL_STATUS = {0: "none", 1: "light", 2: "moderate", 3: "severe", 4: "critical",
                  5: "emergency", 6: "shutdown"}   # android.os.PowerManager THERMAL_STATUS_*


def is_cpu_zone(zone_type: str) -> bool:
    """Whether a thermal zone of this type measures the CPU (module docstring)."""
    base = zone_type.split(" (")[0].strip()   # parse_thermal's "type (thermal_zoneN)" key
    return bool(_CPU_ZONE.search(base))


def is_cpu_cooling(device_type: str) -> bool:
    return bool(_CPU_COOLING.search(device_type))


def throttling_causes(cooling: Mapping[str, int], status: int | None) -> tuple[str, ...]:
    """Throttling as the module docstring defines it, from cooling device states (by type)
    and the thermal service's status (None: not reported)."""
    causes = []
    if status:
        causes.append(f"thermal status {status} ({THERMAL_STATUS.get(status, 'unknown')})")
    causes += [f"{kind} at state {state}" for kind, state in cooling.items()
               if state > 0 and is_cpu_cooling(kind)]
    return tuple(causes)


@dataclass(frozen=True)
class CooldownPolicy:
    """``--sme2-cooldown``: hold until the hottest CPU sensor is at or below ``target_c`` and
    nothing throttles, for at most ``timeout_s``."""

    target_c: float
    timeout_s: float = DEFAULT_TIMEOUT_S

    @property
    def poll_s(self) -> float:
        return min(POLL_S, self.timeout_s / MIN_POLLS)

    def describe(self) -> str:
        return f"--sme2-cooldown {self.target_c:g} °C (timeout {self.timeout_s:g} s)"


def wait_until_cool(read: Callable[[], ThermalState], policy: CooldownPolicy, *,
                    clock: Callable[[], float] = time.monotonic,
                    sleep: Callable[[float], None] = time.sleep,
                    on_wait: Callable[[ThermalState], None] | None = None) -> CooldownRecord:
    """Read the device until it is cool (:meth:`ThermalState.cool`) or ``policy.timeout_s``
    has passed, sleeping ``policy.poll_s`` between looks; ``on_wait`` hears the first reading
    when a wait begins. The device is always read at least once."""
    t0 = clock()
    first = state = read()
    polls = 1
    hot = False
    while not state.cool(policy.target_c):
        elapsed = clock() - t0
        if elapsed >= policy.timeout_s:
            hot = True
            break
        if polls == 1 and on_wait is not None:
            on_wait(state)
        sleep(min(policy.poll_s, policy.timeout_s - elapsed))
        state = read()
        polls += 1
    start, began = state.hottest, first.hottest
    return CooldownRecord(
        target_c=policy.target_c, timeout_s=policy.timeout_s, hot=hot,
        waited_s=round(clock() - t0, 3), polls=polls,
        first_zone=began[0] if began else None, first_c=began[1] if began else None,
        start_zone=start[0] if start else None, start_c=start[1] if start else None,
        throttling=list(state.throttling))


def hold(device: Device, policy: CooldownPolicy,
         progress: Callable[[str], None] | None = None, *,
         clock: Callable[[], float] = time.monotonic,
         sleep: Callable[[float], None] = time.sleep) -> CooldownRecord:
    """Hold ``device`` until it is cool, before a block. A device without CPU sensors (the
    host, QEMU, a phone that hides its zones) is not held: the record says why
    (``applied=False``), and whoever reports it says so once."""
    state = device.thermal_state()
    name = device.spec
    if state is None or state.hottest is None:
        why = (f"device {name} has no thermal sensors to read" if state is None else
               f"device {name} reports no CPU temperature (zones: "
               f"{', '.join(state.zones) or 'none readable'})")
        return CooldownRecord(policy.target_c, policy.timeout_s, applied=False, reason=why)
    looks = iter([state])

    def again() -> ThermalState:   # the look above is the hold's first
        return next(looks, None) or device.thermal_state()

    def say(s: ThermalState) -> None:
        if progress is not None:
            zone, temp = s.hottest or ("?", float("nan"))
            causes = "; ".join([f"{zone} {temp:.1f} °C" + (
                f" > {policy.target_c:g} °C" if temp > policy.target_c else ""),
                *s.throttling])
            progress(f"cooling down: {causes}; waiting up to {policy.timeout_s:g} s")

    return wait_until_cool(again, policy, clock=clock, sleep=sleep, on_wait=say)
