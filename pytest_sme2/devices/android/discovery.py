"""Which Android device a ``--device android[:SERIAL][@HOST:PORT]`` spec names, over the adb
server (local, or on another machine); ``android:*`` expands to every ready device."""

from __future__ import annotations

import ipaddress
import os
import socket
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

import adbutils
from adbutils.errors import AdbError

from pytest_sme2.devices.android.adb import state_problem
from pytest_sme2.devices.android.device import AndroidDevice
from pytest_sme2.devices.base import DeviceError
from pytest_sme2.devices.kinds import ANDROID


@dataclass(frozen=True)
class AndroidSpec:
    serial: str | None
    host: str | None                    # None: ANDROID_ADB_SERVER_HOST or 127.0.0.1
    port: int | None                    # None: ANDROID_ADB_SERVER_PORT or 5037


def parse_spec(spec: str) -> AndroidSpec:
    kind, _, rest = spec.partition(":")
    if kind != ANDROID.name:
        raise DeviceError(f"--device {spec!r} is not an Android spec")
    serial, at, server = rest.partition("@")   # serials may hold ':' (127.0.0.1:5555)
    host = port = None
    if at:
        host, _, port_text = server.rpartition(":")
        if not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise DeviceError(f"--device {spec!r}: the adb server must be HOST:PORT, e.g. "
                              "android:SERIAL@buildbox:5037")
        port = int(port_text)
    return AndroidSpec(serial or None, host, port)


def _server_address(parsed: AndroidSpec) -> tuple[str, int]:
    host = parsed.host or os.environ.get("ANDROID_ADB_SERVER_HOST") or "127.0.0.1"
    port = parsed.port or int(os.environ.get("ANDROID_ADB_SERVER_PORT") or 5037)
    return host, port


def _unreachable(host: str, port: int) -> str | None:
    """Why the adb server at ``host:port`` does not accept a connection; None when it does
    (the probe's socket is closed either way)."""
    try:
        socket.create_connection((host, port), timeout=3).close()
    except OSError as e:
        return e.strerror or str(e)
    return None


def _start_local_server(host: str, port: int) -> None:
    """``adb start-server`` on ``port``, quietly (its "daemon started" lines are noise);
    DeviceError with adb's own last line when it cannot."""
    try:
        res = subprocess.run([adbutils.adb_path(), "-P", str(port), "start-server"],
                             capture_output=True, text=True, stdin=subprocess.DEVNULL,
                             timeout=20)
    except (OSError, subprocess.SubprocessError) as e:
        raise DeviceError(f"cannot start the adb server on port {port} ({e}); is adb installed "
                          "and working (`adb devices`)?") from None
    if res.returncode != 0 or _unreachable(host, port) is not None:
        said = (res.stderr.strip() or res.stdout.strip()).splitlines()
        raise DeviceError(f"cannot start the adb server at {host}:{port}"
                          + (f" ({said[-1]})" if said else "")
                          + "; is adb installed and working (`adb devices`)?")


def is_loopback(host: str) -> bool:
    """``host`` is this machine's loopback (127.x, ::1, localhost), judged from the name alone:
    no DNS lookup. Any other name counts as another machine."""
    name = host.strip("[]").lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        addr = ipaddress.ip_address(name)
    except ValueError:
        return False
    mapped = getattr(addr, "ipv4_mapped", None)
    return addr.is_loopback or (mapped is not None and mapped.is_loopback)


def remote_server_warning(specs: Sequence[str]) -> str | None:
    """One line when any Android spec (or ANDROID_ADB_SERVER_HOST) names an adb server that is
    not on loopback: its protocol has no authentication and no encryption, so say how to
    tunnel it. None when every server is local. Parses only: connects to nothing."""
    servers: dict[str, str] = {}            # "host:port" -> the first spec naming it
    for spec in specs:
        if spec.partition(":")[0] != ANDROID.name:
            continue
        try:
            parsed = parse_spec(spec)
        except DeviceError:
            continue                        # refused elsewhere, with its own line
        host, port = _server_address(parsed)
        if not is_loopback(host):
            servers.setdefault(f"{host}:{port}", spec)
    if not servers:
        return None
    (first, spec), *_ = servers.items()
    host, _, port = first.rpartition(":")
    host = host.strip("[]")
    local = 5038 if port != "5038" else 5039
    serial = parse_spec(spec).serial or ""     # android:@HOST:PORT: that server's only device
    named = ", ".join(servers)
    return (f"sme2: the adb server{'s' if len(servers) > 1 else ''} at {named} "
            f"{'are' if len(servers) > 1 else 'is'} reached over the network; the adb server "
            "protocol is unauthenticated and unencrypted (whoever reaches the port runs commands "
            f"on its phones): tunnel it, `ssh -N -L {local}:localhost:{port} {host}`, then "
            f"--device 'android:{serial}@localhost:{local}' (docs/android.md)")


ALL = "*"                               # android:* — every authorised device of a server


def _list_server(parsed: AndroidSpec
                 ) -> tuple[adbutils.AdbClient, dict[str, str]]:
    """The adb server ``parsed`` names and its devices (serial -> state)."""
    host, port = _server_address(parsed)
    # adbutils starts a LOCAL server when it cannot connect, and leaks the socket of that
    # failed connect (a ResourceWarning, a traceback under -W error): never let it try. Probe
    # the server ourselves; start a local one ourselves; a named one must be running.
    refused = _unreachable(host, port)
    if refused is not None:
        if parsed.host is not None:
            raise DeviceError(f"cannot reach the adb server at {host}:{port} ({refused}); "
                              f"start it there with `adb -P {port} start-server` (on loopback "
                              "behind an SSH tunnel: docs/android.md) or fix --device")
        _start_local_server(host, port)
    client = adbutils.AdbClient(host=host, port=port)
    try:
        listed = {info.serial: info.state for info in client.list()}
    except (AdbError, OSError, EOFError, subprocess.SubprocessError) as e:   # start-server too
        raise DeviceError(f"cannot talk to the adb server at {host}:{port} ({e}); is adb "
                          "installed and working (`adb devices`)?") from None
    return client, listed


def expand_all(spec: str) -> tuple[list[str], list[str]]:
    """``android:*`` (or ``android:*@HOST:PORT``): one spec per attached device of that adb
    server that is ready for commands, in the server's order, and one line per device left
    out (unauthorized, offline) saying what to do. No ready device at all: DeviceError."""
    parsed = parse_spec(spec)
    server = f"@{parsed.host}:{parsed.port}" if parsed.host is not None else ""
    listed = _list_server(parsed)[1]
    ready = [f"android:{s}{server}" for s, st in listed.items() if st == "device"]
    skipped = [f"--device {spec}: left out {p}" for s, st in listed.items()
               if (p := state_problem(s, st))]
    if not ready:
        where = f"the adb server at {parsed.host}:{parsed.port}" if server else "adb"
        raise DeviceError(f"--device {spec}: {where} lists no device ready for commands"
                          + (f" ({_listing(listed)})" if listed else "")
                          + "; connect and authorise one, or name the devices to use")
    return ready, skipped


def attached(spec: str) -> tuple[adbutils.AdbClient, str]:
    """The adb server and the serial of the one ready device ``spec`` names; DeviceError
    saying what to do when it is not attached, not unique or not ready."""
    parsed = parse_spec(spec)
    if parsed.serial == ALL:
        raise DeviceError(f"--device {spec} names every device of an adb server, which only a "
                          "pytest session runs on; name one here: android:SERIAL")
    client, listed = _list_server(parsed)
    serial = parsed.serial
    if serial is None:
        if not listed:
            raise DeviceError("no Android device is attached (adb lists none); connect one or "
                              "use --device host")
        if len(listed) > 1:
            raise DeviceError(f"more than one Android device is attached ({_listing(listed)}); "
                              "pick one with --device android:SERIAL, or use them all with "
                              "--device 'android:*'")
        serial = next(iter(listed))
    if serial not in listed:
        raise DeviceError(f"Android device {serial!r} is not attached; attached: "
                          f"{_listing(listed) or 'none'}")
    problem = state_problem(serial, listed[serial])
    if problem:
        raise DeviceError(problem)
    return client, serial


def open_android(spec: str, *, taskset: str | None = "auto",
                 session_id: str | None = None) -> AndroidDevice:
    """Resolve ``spec`` against the adb server's device list; DeviceError says what to do."""
    client, serial = attached(spec)
    return AndroidDevice(spec, serial, client, taskset=taskset, session_id=session_id)


def _listing(listed: dict[str, str]) -> str:
    return ", ".join(s if st == "device" else f"{s} ({st})" for s, st in listed.items())
