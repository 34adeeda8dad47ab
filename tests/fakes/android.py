"""A private adb server and fake phones for tests: no plugin, import the fixtures into a conftest
(``from tests.fakes.android import adb_server, fake_android  # noqa: F401``) or use the helpers.

The adb server is the real one that adbutils ships, started on a free port of its own with its
own HOME (its RSA key) and TMPDIR (its log), so it never touches a user's server on 5037 or their
~/.android. Ports 5555-5585 are never used: adb scans them for emulators."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import adbutils
import pytest

from tests.fakes.adb_device import FakeAdbDevice, FakeAndroidConfig
from tests.needs import missing

ADB = str(Path(adbutils.__file__).parent / "binaries" / "adb")
EMULATOR_PORTS = range(5555, 5586)


def free_port() -> int:
    for _ in range(50):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in EMULATOR_PORTS and port != 5037:
            return port
    raise RuntimeError("no free TCP port on 127.0.0.1")


@dataclass
class AdbServer:
    """A private adb server: ``env`` is what a process needs to talk to it (adbutils reads
    ANDROID_ADB_SERVER_PORT; ``AdbClient(port=...)`` alone would still start one on 5037)."""

    home: Path
    port: int = field(default_factory=free_port)

    @property
    def env(self) -> dict[str, str]:
        return {"ANDROID_ADB_SERVER_PORT": str(self.port), "ADBUTILS_ADB_PATH": ADB,
                "HOME": str(self.home), "TMPDIR": str(self.home),
                # ADB_LIBUSB=0: libusb's start-up scan costs 3 s and there is no USB here.
                "ADB_LIBUSB": "0", "ADB_MDNS": "0"}

    def adb(self, *args: str, timeout: float = 20) -> subprocess.CompletedProcess:
        env = {**os.environ, **self.env}
        env.pop("ANDROID_SERIAL", None)
        return subprocess.run([ADB, *args], env=env, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)

    def start(self) -> "AdbServer":
        self.home.mkdir(parents=True, exist_ok=True)
        proc = self.adb("start-server")
        if proc.returncode != 0:
            raise RuntimeError(f"adb start-server failed: {proc.stderr.strip()}")
        return self

    def stop(self) -> None:
        self.adb("kill-server")

    def states(self) -> dict[str, str]:
        """serial -> state, as ``adb devices`` prints them."""
        out = self.adb("devices").stdout
        rows = [ln.split("\t") for ln in out.splitlines()[1:] if "\t" in ln]
        return {r[0]: r[1] for r in rows}

    def connect(self, addr: str, timeout: float = 15) -> str:
        return (self.adb("connect", addr, timeout=timeout).stdout or "").strip()

    def disconnect(self, addr: str) -> str:
        return (self.adb("disconnect", addr).stdout or "").strip()

    def wait_state(self, serial: str, state: str | None, timeout: float = 10) -> None:
        """Wait until ``serial`` is listed in ``state`` (None: not listed at all)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.states().get(serial) == state:
                return
            time.sleep(0.05)
        raise TimeoutError(f"adb never listed {serial} as {state}: {self.states()}")


@dataclass
class FakePhone:
    device: FakeAdbDevice
    server: AdbServer
    pending: subprocess.Popen | None = None    # an ``adb connect`` still waiting (offline)

    @property
    def serial(self) -> str:
        return self.device.addr

    @property
    def root(self) -> Path:
        return self.device.root


def connect_phone(server: AdbServer, root: Path, config: FakeAndroidConfig | None = None,
                  state: str = "device") -> FakePhone:
    """Start a fake phone in ``root`` and ``adb connect`` it; wait until it shows ``state``."""
    dev = FakeAdbDevice(root, config).start()
    pending = None
    try:
        if state == "offline":
            # A phone that never answers CNXN: ``adb connect`` itself waits 10 s before it gives
            # up, but the server lists the transport as offline at once and keeps it listed.
            pending = subprocess.Popen([ADB, "connect", dev.addr], env={**os.environ, **server.env},
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                       stdin=subprocess.DEVNULL)
        else:
            server.connect(dev.addr)
        server.wait_state(dev.addr, state)
    except BaseException:
        _stop(dev, pending)
        raise
    return FakePhone(dev, server, pending)


def _stop(dev: FakeAdbDevice, pending: subprocess.Popen | None) -> None:
    if pending is not None:
        pending.kill()
        pending.wait()
    dev.stop()


def release_phone(phone: FakePhone) -> None:
    phone.server.disconnect(phone.serial)
    _stop(phone.device, phone.pending)


@contextmanager
def connected_phone(server: AdbServer, root: Path,
                    config: FakeAndroidConfig | None = None) -> Iterator[FakePhone]:
    """:func:`connect_phone`, released however the block ends: a fixture's whole body."""
    phone = connect_phone(server, root, config)
    try:
        yield phone
    finally:
        release_phone(phone)


@pytest.fixture(scope="session")
def adb_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AdbServer]:
    """A private adb server for the session; its port and adb path are in the environment of
    the tests so code under test (adbutils) finds it and not a user's server."""
    server = AdbServer(tmp_path_factory.mktemp("adb-home")).start()
    mp = pytest.MonkeyPatch()
    for key, value in server.env.items():
        if key.startswith(("ANDROID_", "ADBUTILS_")):
            mp.setenv(key, value)
    mp.delenv("ANDROID_SERIAL", raising=False)
    mp.delenv("ANDROID_ADB_SERVER_HOST", raising=False)
    try:
        yield server
    finally:
        mp.undo()
        server.stop()


@pytest.fixture
def fake_android(adb_server: AdbServer, tmp_path: Path) -> Iterator[FakePhone]:
    """One connected fake phone with SME2 (its ``serial`` is ``127.0.0.1:PORT``)."""
    with connected_phone(adb_server, tmp_path / "phone") as phone:
        yield phone


def arm64_phone_config(**kw) -> FakeAndroidConfig:
    """A fake phone that runs pushed aarch64 programs under QEMU (``-cpu max``: SME2) with no
    glibc sysroot, as ``pytest-sme2 fake-phone`` serves it; skips without what `pytest-sme2 setup
    qemu` provisions (fails in CI, which provisions it)."""
    from dataclasses import replace

    from pytest_sme2.errors import Sme2Error
    from pytest_sme2.fakephone.serve import arm64_config

    try:
        config = arm64_config()
    except Sme2Error as e:
        missing("the emulated Arm64 target", f"run `pytest-sme2 setup qemu` ({e})")
    return replace(config, **kw)


@pytest.fixture
def fake_arm64_android(adb_server: AdbServer, tmp_path: Path) -> Iterator[FakePhone]:
    """One connected fake phone whose pushed aarch64 programs run under QEMU -cpu max (SME2),
    each run's QEMU in_asm log and maps file kept in ``tmp_path / "qemu-trace"``."""
    with connected_phone(adb_server, tmp_path / "phone",
                         arm64_phone_config(trace_dir=tmp_path / "qemu-trace")) as phone:
        yield phone


@pytest.fixture
def arm64_phone(adb_server: AdbServer, tmp_path: Path) -> Iterator[FakePhone]:
    """:func:`fake_arm64_android` without the in_asm log, as a user's phone runs: a plugin
    session proves its kernels by sampling."""
    with connected_phone(adb_server, tmp_path / "phone", arm64_phone_config()) as phone:
        yield phone
