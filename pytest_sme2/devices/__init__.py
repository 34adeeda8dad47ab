"""Devices: where a runner executes — the host, an Android phone over adb, or an emulated Arm64
CPU (QEMU) — chosen by a ``--device`` spec (:mod:`.registry`)."""

from pytest_sme2.devices.base import Device, DeviceBase, DeviceError
from pytest_sme2.devices.registry import (DeviceSpec, open_device, resolve_devices,
                                          schedule_group)

__all__ = ["Device", "DeviceBase", "DeviceError", "DeviceSpec", "open_device",
           "resolve_devices", "schedule_group"]
