"""Devices: where a runner executes — the host, or an Android device over adb — chosen by a
``--device`` spec."""

from pytest_sme2.devices.base import (Device, DeviceError, open_device, resolve_devices,
                                      schedule_group)

__all__ = ["Device", "DeviceError", "open_device", "resolve_devices", "schedule_group"]
