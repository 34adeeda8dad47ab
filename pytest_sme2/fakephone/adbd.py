"""A fake Android phone: a TCP endpoint speaking the DEVICE side of the adb transport protocol,
so that the real adb server (``adb connect 127.0.0.1:PORT``) lists it as a device. Our tests use
it, and so can users (``pytest-sme2 fake-phone``, :mod:`pytest_sme2.fakephone.serve`).

What it implements (enough for adbutils and the ``adb`` command line):
- transport: 24-byte headers (command, arg0, arg1, data length, data checksum, magic); CNXN with
  a ``device::`` banner and features, OPEN/OKAY/WRTE/CLSE with one-WRTE-in-flight flow control,
  AUTH (only to stay unauthorized on purpose);
- services: ``shell[,v2][,raw|,pty]:CMD`` (shell protocol v2 packets: id byte + u32 length +
  payload; 1 stdout, 2 stderr, 3 exit) and plain ``shell:CMD`` / ``exec:CMD`` (merged output);
  ``sync:`` with STAT, STA2, LST2, LIST, LIS2, SEND, RECV, QUIT.

Commands run on THE HOST with ``/bin/sh -c`` in a sandbox folder that stands for the device's
``/``: ``root/data/local/tmp`` is the writable area, ``root/proc`` and ``root/sys`` hold crafted
CPU, auxv and thermal files (zones and cooling devices, which can step to new values as they are
read: ``thermal_steps``) and ``root/bin`` fake ``getprop``, ``uname``, ``taskset`` and, with
``thermal_status``, ``dumpsys thermalservice`` (first on PATH). Device paths at the start of a
word (``/data/local/tmp``, ``/proc``, ``/sys``, ``/system``, ``/vendor``) are rewritten into the
sandbox in the command string, and the sandbox prefix is removed from the output again, so the
caller sees device paths. This is a test double, not a jail: it runs whatever the test sends,
so it only ever listens on 127.0.0.1 and lives as long as one test.

Two kinds of fake phone (``FakeAndroidConfig.arch``):
- ``host`` (default): pushed programs are the host's own (x86-64 glibc); the SME2 facts are
  crafted from ``sme2``. The phone says so with ``ro.pytest_sme2.target=host``.
- ``aarch64``: pushed aarch64 ELF programs run under QEMU user mode (``qemu -cpu qemu_cpu``)
  with NO glibc sysroot: as on a phone there is no ``/lib/ld-linux-aarch64.so.1``, so a glibc
  program runs only when it brings its own loader. The phone's ``timeout`` and ``taskset`` start
  their command through ``bin/fake-exec`` (binfmt_misc by hand), which wraps an aarch64 ELF in
  QEMU and passes the guest's ``LD_LIBRARY_PATH``/``LD_PRELOAD`` with ``-E`` (the shell renames
  an ``LD_PRELOAD=`` assignment to ``FAKE_GUEST_LD_PRELOAD=`` so the host's own tools never try
  to preload an aarch64 library). The auxv and cpuinfo features come from the emulated CPU: the
  aarch64 ``probe`` (pytest_sme2/device_programs/sme2_probe.c) runs under the same QEMU when
  the phone is built. The phone says it is emulated with ``ro.pytest_sme2.emulator``, so its
  results and baselines never mix with a real phone's.
"""

from __future__ import annotations

import posixpath
import re
import socket
import subprocess
import threading
from pathlib import Path

from pytest_sme2.fakephone import services
from pytest_sme2.fakephone.sandbox import (GUEST_PRELOAD, FakeAndroidConfig, build_sandbox,
                                          set_thermal)
from pytest_sme2.fakephone.transport import CommandSpan, Connection, kill_group

# Device paths that live in the sandbox. Matched only at the start of a word so a sandbox path
# (which itself contains /tmp) or a file name is never rewritten twice.
_DEVICE_PATH = re.compile(r"(?<![\w.\-/])(/data/local/tmp|/proc|/sys|/system|/vendor)(?![\w.\-])")

_LD_PRELOAD = re.compile(r"(?<![\w$])LD_PRELOAD=")


class FakeAdbDevice:
    """Listens on 127.0.0.1:``port`` (0 = pick); ``root`` is the sandbox standing for ``/``."""

    def __init__(self, root: Path, config: FakeAndroidConfig | None = None, port: int = 0):
        self.root = Path(root).resolve()
        if not re.fullmatch(r"[\w./-]+", str(self.root)):
            # The root is spliced into shell commands unquoted-safe only if it is plain.
            raise ValueError(f"sandbox path {self.root} must be plain [A-Za-z0-9_./-]")
        self.config = config or FakeAndroidConfig()
        self.commands: list[str] = []       # shell commands as the device received them
        self.spans: list[CommandSpan] = []  # each shell command's start and end (monotonic)
        self.sends: list[str] = []          # device paths of SEND requests (pushes)
        self.recvs: list[str] = []          # device paths of RECV requests (pulls)
        self.connections = 0
        self.thermal_reads = 0              # shell commands that read /sys/class/thermal
        self._lock = threading.Lock()
        self._conns: list[Connection] = []
        self._procs: list[subprocess.Popen] = []
        self._stop = threading.Event()
        self._dropped = False
        self.props = build_sandbox(self.root, self.config)     # what getprop answers
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", port))
        self._sock.listen(8)
        self.port = self._sock.getsockname()[1]
        self._thread = threading.Thread(target=self._accept, name=f"fake-adbd-{self.port}",
                                        daemon=True)

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> "FakeAdbDevice":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        try:
            self._sock.shutdown(socket.SHUT_RDWR)   # wakes the blocked accept(); close() won't
        except OSError:
            pass
        self._sock.close()
        with self._lock:
            conns, procs = list(self._conns), list(self._procs)
        for c in conns:
            c.abort()
        for p in procs:
            kill_group(p)
        self._thread.join(5)

    def __enter__(self) -> "FakeAdbDevice":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- paths -------------------------------------------------------------------------------

    def host_path(self, device_path: str) -> Path | None:
        """The sandbox file for an absolute device path; None if it would leave the sandbox."""
        if not device_path.startswith("/"):
            return None
        norm = posixpath.normpath(device_path)
        return self.root / norm.lstrip("/") if norm != "/" else self.root

    def rewrite(self, cmd: str) -> str:
        cmd = _DEVICE_PATH.sub(lambda m: f"{self.root}{m.group(1)}", cmd)
        if self.config.arch == "aarch64":   # the guest's, never the host tools' (fake-exec)
            cmd = _LD_PRELOAD.sub(GUEST_PRELOAD + "=", cmd)
        return cmd

    def unrewrite(self, data: bytes) -> bytes:
        return data.replace(str(self.root).encode(), b"")

    def _thermal_read(self, cmd: str) -> None:
        """A command about to read the thermal files: step them (``thermal_steps``)."""
        if "/sys/class/thermal" not in cmd:
            return
        with self._lock:
            n, self.thermal_reads = self.thermal_reads, self.thermal_reads + 1
            for key, values in self.config.thermal_steps.items():
                if values:
                    set_thermal(self.root, self.config, key, values[min(n, len(values) - 1)])

    @property
    def taskset_log(self) -> list[str]:
        log = self.root / "taskset.log"
        return log.read_text().split() if log.exists() else []

    # -- serving -----------------------------------------------------------------------------

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                sock, _ = self._sock.accept()
            except OSError:
                return
            conn = Connection(self, sock)
            with self._lock:
                self.connections += 1
                self._conns.append(conn)
            threading.Thread(target=conn.serve, daemon=True,
                             name=f"fake-adbd-conn-{self.port}").start()

    def _should_drop(self, cmd: str) -> bool:
        pattern = self.config.drop_on
        with self._lock:
            if pattern and not self._dropped and re.search(pattern, cmd):
                self._dropped = True     # once: adb reconnects and later commands must work
                return True
        return False

    def _vanishes(self, cmd: str) -> bool:
        """Whether ``cmd`` (just received) is the one the phone is unplugged at; if so it is
        being unplugged."""
        pattern = self.config.vanish_on
        if not pattern or not re.search(pattern, cmd):
            return False
        with self._lock:
            seen = sum(1 for c in self.commands if re.search(pattern, c))
        if seen != self.config.vanish_at:
            return False
        # Not from this thread: stop() joins the acceptor and aborts every connection.
        threading.Thread(target=self.stop, daemon=True).start()
        return True

    def overlapping(self, pattern: str) -> list[tuple["CommandSpan", "CommandSpan"]]:
        """Pairs of commands matching ``pattern`` that ran at the same time on this phone."""
        spans = sorted((s for s in self.spans if re.search(pattern, s.cmd)),
                       key=lambda s: s.start)
        return [(a, b) for a, b in zip(spans, spans[1:]) if b.start < a.end]

    def _track(self, proc: subprocess.Popen) -> None:
        with self._lock:
            self._procs = [p for p in self._procs if p.poll() is None] + [proc]

    def service(self, name: str):
        """The handler of an adb service (``shell:``, ``exec:``, ``sync:``), or None."""
        return services.find(name)
