"""The device protocol and the ``--device`` spec parser."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from pytest_sme2.devices.facts import DeviceFacts
from pytest_sme2.errors import Sme2Error
from pytest_sme2.runners.base import Runner, RunOutcome, RunRequest


class DeviceError(Sme2Error):
    pass


class Device(Protocol):
    spec: str

    def facts(self) -> DeviceFacts:
        ...

    def run(self, runner: Runner, request: RunRequest) -> RunOutcome:
        """Run ``request`` with ``runner``; on return ``request.etdump`` is a fresh file."""
        ...


def open_device(spec: str, work_dir: Path | None = None) -> Device:
    kind = spec.split(":", 1)[0]
    if kind == "host":
        from pytest_sme2.devices.host import HostDevice

        if spec != "host":
            raise DeviceError(f"--device {spec!r}: the host takes no serial; use --device host")
        return HostDevice()
    raise DeviceError(f"--device {spec!r}: unknown device kind {kind!r}; use 'host' "
                      "(Android over adb is not available yet)")
