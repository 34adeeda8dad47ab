"""The device kinds built in, one table: what each ``--device`` kind is called, the spec forms
it takes, and what a session must know of it (whether it runs on this machine's CPU, whether
its CPU is emulated). ``--device``'s help, the registry (parsing, opening, xdist groups, its
error for an unknown kind), ``is_emulated``, the devices' facts and the report read it. A kind
a plugin opens (``pytest_sme2_open_device``) is not in it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DeviceKind:
    name: str                   # the spec's part before ":"; DeviceFacts.kind
    specs: tuple[str, ...]      # the spec forms it takes, as an unknown kind's error lists them
    help: str                   # its part of --device's help
    on_host_cpu: bool = False   # runs on this machine's CPU: shares the host's xdist group
    emulated: bool = False      # an emulated CPU: its timings say nothing about speed
    # Our runners load the executorch wheel's operator libraries there (this host's
    # installation: a custom-SDPA LLM runs); elsewhere they need a plain-attention program.
    host_operators: bool = False


HOST = DeviceKind("host", ("host",), "host", on_host_cpu=True, host_operators=True)
ANDROID = DeviceKind(
    "android", ("android", "android:SERIAL", "android:SERIAL@HOST:PORT"),
    "android (the only attached device), android:SERIAL, android:SERIAL@HOST:PORT, android:* "
    "(every authorised device of the adb server; android:*@HOST:PORT)")
QEMU = DeviceKind("qemu", ("qemu", "qemu:CPU", "qemu:sme1"),
                  "qemu[:CPU] (an emulated Arm64 CPU with SME2), qemu:sme1 (the same with SME2 "
                  "hidden from every process: SME without SME2)", on_host_cpu=True, emulated=True)
KINDS: dict[str, DeviceKind] = {k.name: k for k in (HOST, ANDROID, QEMU)}


def kind_of(spec: str) -> DeviceKind | None:
    """The built-in kind of a ``--device`` spec (``qemu:max`` -> QEMU); None: a plugin's."""
    return KINDS.get(spec.split(":", 1)[0])


def device_help() -> str:
    """``--device``'s help: every kind's forms, then how the option repeats."""
    forms = [k.help for k in KINDS.values()]
    return (f"where to run: {', '.join(forms[:-1])}, or {forms[-1]}; repeatable: the device "
            "becomes an axis of the matrix (ini: one per line)")


def spec_forms() -> str:
    """Every kind's spec forms, quoted: ``'host', 'android', ... or 'qemu:CPU'``."""
    quoted = [f"'{s}'" for k in KINDS.values() for s in k.specs]
    return f"{', '.join(quoted[:-1])} or {quoted[-1]}"
