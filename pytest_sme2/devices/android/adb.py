"""The adb plumbing of one phone: shell commands with exit codes and separate stderr, pushes that
keep the phone's reason for a failure, checked pulls, and one-line errors when the phone drops."""

from __future__ import annotations

import contextlib
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import adbutils
from adbutils.errors import AdbError, AdbTimeout

from pytest_sme2.devices.base import DeviceError
from pytest_sme2.runners.base import RunnerError

QUERY_TIMEOUT_S = 30.0                  # adb inactivity limit for short queries
PUSH_CHUNK = 64 * 1024                  # sync DATA payloads may not exceed 64 KiB


def state_problem(serial: str, state: str) -> str | None:
    """What to do about a device that adb lists in ``state``; None when it is usable."""
    if state == "device":
        return None
    if state == "unauthorized":
        return (f"Android device {serial} is unauthorized: unlock it and accept the 'Allow USB "
                "debugging?' RSA key prompt, then run again")
    if state == "offline":
        return (f"Android device {serial} is offline: reconnect it (replug the cable or run "
                "`adb reconnect offline`) and run again")
    return (f"Android device {serial} is in state {state!r}, not ready for commands; boot it "
            "normally and run again")


class AdbLink:
    """One phone on one adb server."""

    def __init__(self, client: adbutils.AdbClient, serial: str):
        self.client = client
        self.serial = serial
        self.device = client.device(serial)

    def lost(self, during: str) -> DeviceError:
        """The device stopped answering. A revoked authorization needs the prompt accepted;
        anything else (gone, offline while adb retries) is a disconnection."""
        try:
            state = {i.serial: i.state for i in self.client.list()}.get(self.serial)
        except (AdbError, OSError, EOFError):
            state = None
        if state == "unauthorized":
            return DeviceError(state_problem(self.serial, state) or "")
        return DeviceError(f"device {self.serial} disconnected {during}; reconnect it and run "
                           "again")

    @contextlib.contextmanager
    def link(self, during: str) -> Iterator[None]:
        """adbutils reports a dropped device as a bare EOFError, socket errors or AdbError."""
        try:
            yield
        except AdbTimeout:
            raise DeviceError(f"device {self.serial} stopped answering {during}; reconnect it "
                              "and run again") from None
        except (EOFError, OSError, AdbError):
            raise self.lost(during) from None

    def sh(self, cmd: str, timeout: float = QUERY_TIMEOUT_S) -> adbutils.ShellReturn:
        return self.device.shell2(cmd, timeout=timeout, v2=True)

    def query(self, cmd: str, what: str) -> str:
        with self.link(f"while reading its {what}"):
            try:
                res = self.sh(cmd)
            except AdbTimeout:
                raise DeviceError(f"device {self.serial} did not answer within "
                                  f"{QUERY_TIMEOUT_S:g} s while reading its {what}; reconnect "
                                  "it and run again") from None
        return res.stdout

    def push(self, local: Path, remote: str, mode: int) -> None:
        """sync SEND written out here: adbutils' push raises a bare "FAIL" and drops the
        device's reason (no space left, permission denied), which is the useful part."""
        with self.device.open_transport(timeout=QUERY_TIMEOUT_S) as c:
            c.send_command("sync:")
            c.check_okay()
            target = f"{remote},{0o100000 | mode}".encode()
            c.conn.sendall(b"SEND" + struct.pack("<I", len(target)) + target)
            with open(local, "rb") as fh:
                for chunk in iter(lambda: fh.read(PUSH_CHUNK), b""):
                    c.conn.sendall(b"DATA" + struct.pack("<I", len(chunk)) + chunk)
            c.conn.sendall(b"DONE" + struct.pack("<I", int(time.time())))
            status = c.read_exact(8)
            if status[:4] == b"OKAY":
                return
            if status[:4] != b"FAIL":
                raise AdbError(f"unexpected sync reply {status[:4]!r}")
            reason = c.read_exact(struct.unpack("<I", status[4:])[0]).decode("utf-8", "replace")
        raise DeviceError(f"cannot push {local.name} to {remote} on device {self.serial}: "
                          f"{reason}; free space on /data/local/tmp or check the device")

    def pull(self, remote: str, local: Path, required: str | None) -> bool:
        """A checked pull (adbutils' sync.pull of a missing file makes an empty directory):
        False when the file is missing or empty and not ``required`` (else RunnerError)."""
        info = self.device.sync.stat(remote)
        if not (info.mode & 0o170000 == 0o100000 and info.size > 0):
            if required:
                raise RunnerError(required)
            return False
        part = local.with_name(local.name + ".part")
        got = self.device.sync.pull_file(remote, part)
        if got != info.size:
            part.unlink(missing_ok=True)
            raise DeviceError(f"pulling {remote} from device {self.serial} stopped after {got} "
                              f"of {info.size} bytes; reconnect it and run again")
        part.replace(local)
        return True
