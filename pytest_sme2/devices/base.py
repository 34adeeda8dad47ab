"""The device protocol, its no-op defaults, and the error devices raise. Opening a device from a
``--device`` spec is :mod:`pytest_sme2.devices.registry`'s job: this module imports no device."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from pytest_sme2.devices.facts import DeviceFacts
from pytest_sme2.errors import Sme2Error
from pytest_sme2._util.protocol_defaults import WithDefaults
from pytest_sme2.programs.kernel_libraries import target_problem
from pytest_sme2.runners.base import Runner, RunnerError, RunOutcome, RunRequest

if TYPE_CHECKING:
    from pytest_sme2.devices.bandwidth import CopyBandwidth
    from pytest_sme2.results.records import ThermalState


class DeviceError(Sme2Error):
    pass


class Device(Protocol):
    """Where runners execute. Every member is listed here; :class:`DeviceBase` gives the
    defaults of the optional ones, so callers never probe a device with ``getattr``."""

    spec: str
    # What the native runner is built for to run here: "host", "aarch64-linux-gnu" (QEMU, and
    # phones through the bundled glibc loader), "android" (bionic: a user's NDK build only).
    target: str
    # Whether every run also records which kernels executed (RunOutcome.kernel_trace): QEMU.
    trace_kernels: bool
    # Whether a run can sample which kernels executed (RunRequest.kernel_sample): where the
    # preload library runs in the runner's process.
    samples_kernels: bool

    def facts(self) -> DeviceFacts:
        ...

    def run(self, runner: Runner, request: RunRequest) -> RunOutcome:
        """Run ``request`` with ``runner``; on return ``request.etdump`` is a fresh file."""
        ...

    def thermal(self) -> dict[str, float] | None:
        """Every thermal zone's degrees C (recorded around each block); None: no sensors."""
        ...

    def thermal_state(self) -> ThermalState | None:
        """CPU temperatures and throttling (what ``--sme2-cooldown`` waits on); None: no
        sensors."""
        ...

    def cleanup(self) -> bool:
        """Remove what the session left on the device; False if it could not be reached."""
        ...

    def copy_bandwidth(self) -> CopyBandwidth | None:
        """The device's measured memory copy bandwidth (:mod:`pytest_sme2.devices.bandwidth`,
        cached per device); None: this kind of device measures none."""
        ...


class DeviceBase:
    """The defaults of a device without sensors, kernel tracing or sampling, and nothing to
    clean up. Subclass it (plugins' devices too) and override what the device has."""

    trace_kernels: bool = False
    samples_kernels: bool = False

    def thermal(self) -> dict[str, float] | None:
        return None

    def thermal_state(self) -> ThermalState | None:
        return None

    def cleanup(self) -> bool:
        return True

    def copy_bandwidth(self) -> CopyBandwidth | None:
        return None


_DEVICE_DEFAULTS = {"trace_kernels": False, "samples_kernels": False,
                    "thermal": lambda: None, "thermal_state": lambda: None,
                    "cleanup": lambda: True, "copy_bandwidth": lambda: None}


def check_operators(runner: Runner, request: RunRequest, where: str) -> None:
    """RunnerError, before any process, when ``runner`` takes a program's custom operators
    from this host's executorch wheel (ours do) and ``where`` (a device other than the host:
    "device qemu") cannot have them (:func:`~pytest_sme2.programs.kernel_libraries.
    target_problem`)."""
    if runner.brings_own_operators or not request.kernel_libraries:
        return
    problem = target_problem(request.pte, where)
    if problem:
        raise RunnerError(f"runner {runner.info.name!r}: {problem}")


def with_defaults(device: object) -> Device:
    """``device`` as a full :class:`Device` (the one place the optional members are looked
    up, for devices that plugins open)."""
    if isinstance(device, DeviceBase):
        return device  # type: ignore[return-value]
    return WithDefaults(device, _DEVICE_DEFAULTS)  # type: ignore[return-value]
