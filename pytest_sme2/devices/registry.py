"""From ``--device`` specs to devices: parsing a spec once, expanding ``android:*``, opening
each kind, and the pytest-xdist group a device's benchmarks run in."""

from __future__ import annotations

import re
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Sequence

from pytest_sme2.devices.base import Device, DeviceError, with_defaults
from pytest_sme2.devices.host import HostDevice
from pytest_sme2.devices.kinds import ANDROID, HOST, KINDS, QEMU, spec_forms
from pytest_sme2.devices.qemu import QemuDevice

if TYPE_CHECKING:
    from pluggy import HookRelay

# Devices whose runs execute on this machine's own CPU (the host, and QEMU, which emulates on
# it: ``DeviceKind.on_host_cpu``) share one scheduling group, so they never overlap each other.
HOST_GROUP = HOST.name


@dataclass(frozen=True)
class DeviceSpec:
    """A ``--device`` spec, parsed once: ``kind`` and what follows its colon."""

    text: str
    kind: str
    rest: str

    @classmethod
    def parse(cls, text: str) -> DeviceSpec:
        kind, _, rest = text.partition(":")
        return cls(text, kind, rest)

    @property
    def is_all_android(self) -> bool:
        """``android:*`` or ``android:*@HOST:PORT``: every ready device of an adb server."""
        return self.kind == ANDROID.name and self.rest.partition("@")[0] == "*"

    @property
    def on_host_cpu(self) -> bool:
        return self.kind in KINDS and KINDS[self.kind].on_host_cpu

    @property
    def emulated(self) -> bool:
        """A built-in kind whose CPU is emulated (QEMU); a plugin's kind is not."""
        return self.kind in KINDS and KINDS[self.kind].emulated


def _android() -> ModuleType:
    """The Android package, for an Android spec alone: it imports adbutils (~110 ms)."""
    from pytest_sme2.devices import android  # adbutils: ~110 ms, for an Android spec alone

    return android


def resolve_devices(specs: Sequence[str]) -> tuple[tuple[str, ...], list[str]]:
    """The devices a session runs on: ``specs`` in order with ``android:*[@HOST:PORT]``
    expanded into one spec per ready device of that adb server; duplicates once. Also the
    lines saying which listed devices were left out and why (unauthorized, offline)."""
    out: list[str] = []
    notes: list[str] = []
    for text in specs:
        if DeviceSpec.parse(text).is_all_android:
            ready, skipped = _android().expand_all(text)
            out += ready
            notes += skipped
        else:
            out.append(text)
    return tuple(dict.fromkeys(out)), notes


def remote_adb_warning(specs: Sequence[str]) -> str | None:
    """The one line a session says when an Android spec names an adb server on another machine
    (:func:`pytest_sme2.devices.android.remote_server_warning`); None otherwise. Connects to
    nothing; adbutils is imported only when a spec is an Android one."""
    if not any(DeviceSpec.parse(s).kind == ANDROID.name for s in specs):
        return None
    return _android().remote_server_warning(specs)


def check_only_device(devices: Sequence[str]) -> None:
    """A session whose only device is a phone that adb does not list stops before its tests,
    with one line (several devices: the missing one's tests fail, the others go on)."""
    if len(devices) == 1 and DeviceSpec.parse(devices[0]).kind == ANDROID.name:
        _android().attached(devices[0])


def schedule_group(spec: str) -> str:
    """The pytest-xdist group of a device's benchmarks: one group per device, so one worker at
    a time measures on it; devices that run on this machine's CPU share the ``host`` group
    (a QEMU run beside a host benchmark would slow it). No ``@``: xdist splits node ids there."""
    if DeviceSpec.parse(spec).on_host_cpu:
        return HOST_GROUP
    return re.sub(r"[^A-Za-z0-9_.:-]+", "_", spec)


def open_plugin_devices(specs: Sequence[str], hook: HookRelay) -> dict[str, Device]:
    """The devices of ``specs`` whose kind is not built in, each opened by the plugin that opens
    it (``pytest_sme2_open_device``): asked once, when the session is configured, so that a
    kind no plugin opens (a typo: ``--device phone``) is one error before anything runs rather
    than one per benchmark. The built-in kinds are opened when a benchmark first needs them."""
    return {spec: open_device(spec, hook=hook) for spec in specs
            if DeviceSpec.parse(spec).kind not in KINDS}


def open_device(spec: str, *, taskset: str | None = "auto",
                session_id: str | None = None, hook: HookRelay | None = None) -> Device:
    """The device a ``--device`` spec names: ``host``, ``android``, ``android:SERIAL``,
    ``android:SERIAL@HOST:PORT``, ``qemu`` or ``qemu:CPU``, or a kind a plugin opens (its
    ``pytest_sme2_open_device`` hook, asked first through ``hook``, a pluggy hook relay).
    ``taskset`` (auto | none | hex mask) pins Android runs."""
    if hook is not None:
        device = hook.pytest_sme2_open_device(spec=spec)
        if device is not None:
            return with_defaults(device)
    parsed = DeviceSpec.parse(spec)
    if parsed.kind == HOST.name:
        if spec != HOST.name:
            raise DeviceError(f"--device {spec!r}: the host takes no serial; use --device host")
        return HostDevice()
    if parsed.kind == ANDROID.name:
        return _android().open_android(spec, taskset=taskset, session_id=session_id)
    if parsed.kind == QEMU.name:
        return QemuDevice(spec)
    raise DeviceError(f"--device {spec!r}: unknown device kind {parsed.kind!r}; use "
                      f"{spec_forms()} (or a kind a plugin opens: pytest_sme2_open_device)")
