"""The device protocol and the ``--device`` spec parser."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Protocol, Sequence

from pytest_sme2.devices.facts import DeviceFacts
from pytest_sme2.errors import Sme2Error
from pytest_sme2.runners.base import Runner, RunOutcome, RunRequest

if TYPE_CHECKING:
    from pluggy import HookRelay


class DeviceError(Sme2Error):
    pass


class Device(Protocol):
    """Optional, where a device has sensors (Android): ``thermal()`` (every zone's degrees C,
    recorded around each block) and ``thermal_state()`` (a :class:`pytest_sme2.thermal.
    ThermalState`, what ``--sme2-cooldown`` waits on)."""

    spec: str
    # What the native runner is built for to run here: "host", "aarch64-linux-gnu" (QEMU), ...
    target: str
    # Whether a run also records which kernels executed (RunOutcome.kernel_trace): QEMU only.
    trace_kernels: bool

    def facts(self) -> DeviceFacts:
        ...

    def run(self, runner: Runner, request: RunRequest) -> RunOutcome:
        """Run ``request`` with ``runner``; on return ``request.etdump`` is a fresh file."""
        ...


# Devices whose runs execute on this machine's own CPU: the host, and QEMU (which emulates on
# it). Their measurements share one scheduling group, so they never overlap each other.
HOST_CPU_KINDS = ("host", "qemu")
HOST_GROUP = "host"


def resolve_devices(specs: Sequence[str]) -> tuple[tuple[str, ...], list[str]]:
    """The devices a session runs on: ``specs`` in order with ``android:*[@HOST:PORT]``
    expanded into one spec per ready device of that adb server; duplicates once. Also the
    lines saying which listed devices were left out and why (unauthorized, offline)."""
    out: list[str] = []
    notes: list[str] = []
    for spec in specs:
        kind, _, rest = spec.partition(":")
        if kind == "android" and rest.partition("@")[0] == "*":
            from pytest_sme2.devices.android import expand_all

            ready, skipped = expand_all(spec)
            out += ready
            notes += skipped
        else:
            out.append(spec)
    return tuple(dict.fromkeys(out)), notes


def schedule_group(spec: str) -> str:
    """The pytest-xdist group of a device's benchmarks: one group per device, so one worker at
    a time measures on it; devices that run on this machine's CPU share the ``host`` group
    (a QEMU run beside a host benchmark would slow it). No ``@``: xdist splits node ids there."""
    if spec.split(":", 1)[0] in HOST_CPU_KINDS:
        return HOST_GROUP
    return re.sub(r"[^A-Za-z0-9_.:-]+", "_", spec)


def open_device(spec: str, *, taskset: str | None = "auto",
                session_id: str | None = None, hook: HookRelay | None = None) -> Device:
    """The device a ``--device`` spec names: ``host``, ``android``, ``android:SERIAL``,
    ``android:SERIAL@HOST:PORT``, ``qemu`` or ``qemu:CPU``, or a kind a plugin opens (its
    ``pytest_sme2_open_device`` hook, asked first through ``hook``: :mod:`pytest_sme2.hooks`).
    ``taskset`` (auto | none | hex mask) pins Android runs."""
    if hook is not None:
        device = hook.pytest_sme2_open_device(spec=spec)
        if device is not None:
            return device
    kind = spec.split(":", 1)[0]
    if kind == "host":
        from pytest_sme2.devices.host import HostDevice

        if spec != "host":
            raise DeviceError(f"--device {spec!r}: the host takes no serial; use --device host")
        return HostDevice()
    if kind == "android":
        from pytest_sme2.devices.android import open_android

        return open_android(spec, taskset=taskset, session_id=session_id)
    if kind == "qemu":
        from pytest_sme2.devices.qemu import QemuDevice

        return QemuDevice(spec)
    raise DeviceError(f"--device {spec!r}: unknown device kind {kind!r}; use 'host', 'android', "
                      "'android:SERIAL', 'android:SERIAL@HOST:PORT', 'qemu' or 'qemu:CPU' (or a "
                      "kind a plugin opens: pytest_sme2_open_device)")
