"""``pytest-sme2 fake-phone``: an emulated arm64 phone registered with the local adb server, for
trying a benchmark suite's Android path without a phone (a CI job, a laptop).

It serves the device side of the adb protocol on 127.0.0.1 (:mod:`.adbd`), runs pushed aarch64
programs under QEMU user mode with SME2 (``-cpu max``; ``--no-sme2``: ``-cpu max,sme=off``;
``--sme1``: ``-cpu max`` with SME2 hidden from every program, SME kept, the class of the 2026
Snapdragon flagship) and no glibc sysroot, as a phone has none, and says in its properties that
it is emulated, so its
results and baselines never mix with a real phone's. The first line printed is its serial
(``127.0.0.1:PORT``, for ``--device android:SERIAL``); it serves until SIGINT or SIGTERM, then
disconnects from adb and removes its folder.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from pytest_sme2.errors import Sme2Error
from pytest_sme2.fakephone.adbd import FakeAdbDevice
from pytest_sme2.fakephone.sandbox import FakeAndroidConfig
from pytest_sme2.device_programs.build import build_target_helpers
from pytest_sme2.device_programs.hwcaps import SME2_FAMILY
from pytest_sme2.emulation.tools import find_qemu

CONNECT_TIMEOUT_S = 20.0


def arm64_config(cpu: str = "max", trace_dir: Path | None = None,
                 sme1: bool = False) -> FakeAndroidConfig:
    """An aarch64 fake phone with what ``pytest-sme2 setup qemu`` provisions (QEMU 11, the
    cross toolchain's glibc for the host-side probe, the probe itself). ``sme1``: its kernel
    hides SME2 from every program, SME kept."""

    qemu = find_qemu()
    probe = build_target_helpers("aarch64-linux-gnu").probe
    return FakeAndroidConfig(arch="aarch64", qemu=qemu.qemu, sysroot=qemu.sysroot, probe=probe,
                             qemu_cpu=cpu, trace_dir=trace_dir,
                             hidden_hwcap2=SME2_FAMILY if sme1 else 0)


def register(addr: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """``adb connect`` the phone to the adb server of this environment (ANDROID_ADB_SERVER_PORT,
    or 5037, started if needed) and wait until it is listed ready."""

    import adbutils  # adbutils: only register() needs it

    # Start the server quietly first: adbutils would start it with its "daemon started"
    # lines on our stdout, whose first line must be the serial.
    subprocess.run([adbutils.adb_path(), "start-server"], capture_output=True,
                   stdin=subprocess.DEVNULL, timeout=timeout_s)
    client = adbutils.AdbClient()
    said = client.connect(addr, timeout=timeout_s)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if any(d.serial == addr and d.state == "device" for d in client.list()):
            return
        time.sleep(0.1)
    raise Sme2Error(f"the adb server did not list the fake phone {addr} as ready ({said!r}); "
                    "is `adb devices` working?")


def unregister(addr: str) -> None:
    import adbutils  # adbutils: only unregister() needs it

    try:
        adbutils.AdbClient().disconnect(addr)
    except Exception:  # noqa: BLE001 - the server may be gone already: nothing left to undo
        pass


def serve(sme2: bool = True, cpu: str | None = None, port: int = 0,
          out=sys.stdout, stop: threading.Event | None = None, sme1: bool = False) -> int:
    """Run one fake phone until ``stop`` is set (SIGINT/SIGTERM set it from the command line).
    ``sme1``: SME without SME2 (SME2 hidden from every program)."""
    config = arm64_config(cpu or ("max" if sme2 else "max,sme=off"), sme1=sme1)
    root = Path(tempfile.mkdtemp(prefix="pytest-sme2-fake-phone-"))
    stop = stop or threading.Event()
    phone = None
    try:
        phone = FakeAdbDevice(root, config, port=port).start()
        register(phone.addr)
        sme = {"SME2": "with SME2", "SME": "with SME but no SME2"}.get(_features(phone),
                                                                       "without SME2")
        print(phone.addr, file=out, flush=True)
        print(f"fake arm64 phone {phone.addr} ({phone.props.get('ro.pytest_sme2.emulator')}, "
              f"{sme}) registered with the adb server; use --device android:{phone.addr}; "
              "Ctrl-C stops it", file=out, flush=True)
        stop.wait()
    finally:
        if phone is not None:
            unregister(phone.addr)
            phone.stop()
        shutil.rmtree(root, ignore_errors=True)
    return 0


def _features(phone: FakeAdbDevice) -> str:
    """``SME2``, ``SME`` or "": what the phone's cpuinfo says."""
    words = set((phone.root / "proc/cpuinfo").read_text().split())
    return "SME2" if "sme2" in words else "SME" if "sme" in words else ""


def main(args) -> int:
    """The command: ``--no-sme2``, ``--sme1``, ``--cpu CPU`` (a QEMU CPU model), ``--port N``."""
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    return serve(sme2=not args.no_sme2, cpu=args.cpu, port=args.port, stop=stop,
                 sme1=args.sme1)
