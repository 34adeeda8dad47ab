"""The device protocol and the ``--device`` spec parser."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

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
