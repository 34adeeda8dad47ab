"""Devices: where a runner executes (the host; Android over adb arrives with issue 5)."""

from pytest_sme2.devices.base import Device, DeviceError, open_device

__all__ = ["Device", "DeviceError", "open_device"]
