"""A fake Android phone for tests: a TCP endpoint speaking the DEVICE side of the adb transport
protocol, so that the real adb server (``adb connect 127.0.0.1:PORT``) lists it as a device.

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
- ``aarch64``: pushed aarch64 ELF programs run under QEMU user mode (``qemu``, ``-L sysroot``,
  ``-cpu qemu_cpu``), like binfmt_misc would run them: the phone's ``timeout`` and ``taskset``
  start their command through ``bin/fake-exec``, which wraps an aarch64 ELF in QEMU and passes
  the guest's ``LD_LIBRARY_PATH``/``LD_PRELOAD`` with ``-E`` (the shell renames an
  ``LD_PRELOAD=`` assignment to ``FAKE_GUEST_LD_PRELOAD=`` so the host's own tools never try to
  preload an aarch64 library). The auxv and cpuinfo features come from the emulated CPU: the
  aarch64 ``probe`` (pytest_sme2/target/sme2_probe.c) runs under the same QEMU when the phone is
  built. Its programs are glibc programs (the sysroot's), not bionic ones, and the phone says
  so with ``ro.pytest_sme2.target=aarch64-linux-gnu`` and ``ro.pytest_sme2.emulator``.
"""

from __future__ import annotations

import os
import posixpath
import re
import secrets
import shutil
import signal
import socket
import struct
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

A_SYNC, A_CNXN, A_OPEN, A_OKAY = 0x434E5953, 0x4E584E43, 0x4E45504F, 0x59414B4F
A_CLSE, A_WRTE, A_AUTH, A_STLS = 0x45534C43, 0x45545257, 0x48545541, 0x534C5453
A_VERSION = 0x01000001          # >= this, neither side needs to check the data checksum
MAX_PAYLOAD = 256 * 1024
AUTH_TOKEN, AUTH_SIGNATURE, AUTH_RSAPUBLICKEY = 1, 2, 3
FEATURES = ("shell_v2", "cmd", "stat_v2", "ls_v2", "fixed_push_mkdir",
            "fixed_push_symlink_timestamp")
SYNC_CHUNK = 64 * 1024          # adbd's SYNC_DATA_MAX
WRITABLE = "/data/local/tmp"
# Device paths that live in the sandbox. Matched only at the start of a word so a sandbox path
# (which itself contains /tmp) or a file name is never rewritten twice.
_DEVICE_PATH = re.compile(r"(?<![\w.\-/])(/data/local/tmp|/proc|/sys|/system|/vendor)(?![\w.\-])")

_LD_PRELOAD = re.compile(r"(?<![\w$])LD_PRELOAD=")
GUEST_PRELOAD = "FAKE_GUEST_LD_PRELOAD"

HWCAP2_SME, HWCAP2_SME2 = 1 << 23, 1 << 37
AT_NULL, AT_PAGESZ, AT_HWCAP, AT_HWCAP2 = 0, 6, 16, 26
# /proc/cpuinfo feature names of the AT_HWCAP and AT_HWCAP2 bits, in bit order (Linux
# arch/arm64/kernel/cpuinfo.c): the aarch64 fake derives its Features line from the emulated CPU.
HWCAP_NAMES = ("fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm "
               "jscvt fcma lrcpc dcpop sha3 sm3 sm4 asimddp sha512 sve asimdfhm dit uscat ilrcpc "
               "flagm ssbs sb paca pacg").split()
HWCAP2_NAMES = ("dcpodp sve2 sveaes svepmull svebitperm svesha3 svesm4 flagm2 frint svei8mm "
                "svef32mm svef64mm svebf16 i8mm bf16 dgh rng bti mte ecv afp rpres mte3 sme "
                "smei16i64 smef64f64 smei8i32 smef16f32 smeb16f32 smef32f32 smefa64 wfxt ebf16 "
                "sveebf16 cssc rprfm sve2p1 sme2 sme2p1 smei16i32 smebi32i32 smeb16b16 smef16f16 "
                "mops hbc sveb16b16 lrcpc3 lse128 fpmr lut faminmax f8cvt f8fma f8dp4 f8dp2 "
                "f8e4m3 f8e5m2 smelutv2 smef8f16 smef8f32 smesf8fma smesf8dp4 smesf8dp2 "
                "poe").split()


def default_props(sme2: bool) -> dict[str, str]:
    soc = "MT6993" if sme2 else "SM8650"
    return {
        "ro.product.name": "fakephone", "ro.product.device": "fake",
        "ro.product.model": "Fake SME2 Phone" if sme2 else "Fake Phone",
        "ro.product.manufacturer": "pytest-sme2",
        "ro.soc.manufacturer": "Mediatek" if sme2 else "QTI", "ro.soc.model": soc,
        "ro.board.platform": "mt6993" if sme2 else "pineapple",
        "ro.hardware": "mt6993" if sme2 else "qcom",
        "ro.product.cpu.abi": "arm64-v8a", "ro.product.cpu.abilist": "arm64-v8a",
        "ro.build.version.release": "16", "ro.build.version.sdk": "36",
        "ro.build.fingerprint": "pytest/fakephone/fake:16/BP2A.250605.031/1:user/release-keys",
    }


@dataclass
class FakeAndroidConfig:
    sme2: bool = True
    # CPU layout: (cpu count, max kHz) per cluster, little to big.
    clusters: tuple[tuple[int, int], ...] = ((4, 2000000), (3, 3250000), (1, 4210000))
    governor: str = "schedutil"
    thermal: tuple[tuple[str, int], ...] = (("cpu-0-0", 41200), ("cpu-1-0", 43500),
                                            ("battery", 30100))
    # Cooling devices (type, cur_state): a CPU one above 0 is throttling (pytest_sme2.thermal).
    cooling: tuple[tuple[str, int], ...] = (("thermal-cpufreq-0", 0), ("thermal-cpufreq-4", 0))
    # `dumpsys thermalservice`'s "Thermal Status" (None: the phone has no dumpsys).
    thermal_status: int | None = None
    # Thermal readings that change while the phone is watched: the n-th shell command that
    # reads /sys/class/thermal sees the n-th value of each sequence (the last one stays).
    # Keys: a zone type of ``thermal`` (millidegrees), "cooling:<type>" (its cur_state),
    # "status" (the thermal status; needs ``thermal_status`` set).
    thermal_steps: dict[str, tuple[int, ...]] = field(default_factory=dict)
    kernel: str = "6.6.50-android15-8-g0123456789ab"
    props: dict[str, str] = field(default_factory=dict)   # overrides of default_props()
    unauthorized: bool = False      # answer CNXN with AUTH and never accept the key
    silent: bool = False            # accept TCP but never answer CNXN
    drop_on: str | None = None      # regex: drop the TCP connection once such a command starts
    drop_after_s: float = 0.2
    # regex: when the ``vanish_at``-th command matching ``vanish_on`` arrives, the phone is gone
    # for good (stops listening, drops its connections; that command never runs), as a phone
    # unplugged mid-session.
    vanish_on: str | None = None
    vanish_at: int = 2
    # regex: commands matching it first wait this long, as work the phone's own CPU does (a
    # stand-in for a real phone's benchmark time that costs this machine nothing)
    busy_on: str | None = None
    busy_s: float = 0.0
    fail_push: str | None = None    # regex on device paths: SEND answers FAIL
    serial_no: str = "FAKE0001"
    # "host": pushed programs are host programs. "aarch64": aarch64 ELF programs run under QEMU
    # (qemu, sysroot and probe needed; sme2 is then ignored: the emulated CPU decides).
    arch: str = "host"
    qemu: Path | None = None        # qemu-aarch64, >= 11 for SME2
    sysroot: Path | None = None     # QEMU's -L: the glibc the pushed programs link against
    qemu_cpu: str = "max"
    probe: Path | None = None       # aarch64 sme2_probe: the emulated CPU's hwcaps
    trace_dir: Path | None = None   # aarch64: each program's QEMU in_asm log and maps file here


@dataclass(frozen=True)
class CommandSpan:
    cmd: str
    start: float                    # time.monotonic() when the command started
    end: float                      # ... and when it exited


class _Gone(Exception):
    """The TCP connection or the stream ended."""


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
        self._conns: list[_Conn] = []
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
            _kill_group(p)
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
            conn = _Conn(self, sock)
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


def _kill_group(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass


def _pack(cmd: int, arg0: int, arg1: int, data: bytes = b"") -> bytes:
    return struct.pack("<6I", cmd, arg0, arg1, len(data), sum(data) & 0xFFFFFFFF,
                       cmd ^ 0xFFFFFFFF) + data


class _Conn:
    """One TCP connection from the adb server: a reader loop and a thread per open stream."""

    def __init__(self, dev: FakeAdbDevice, sock: socket.socket):
        self.dev, self.sock = dev, sock
        self.wlock = threading.Lock()
        self.streams: dict[int, _Stream] = {}
        self.next_id = 1
        self.max_payload = 4096
        self.online = False
        self.closed = False

    def send(self, cmd: int, arg0: int, arg1: int, data: bytes = b"") -> None:
        with self.wlock:
            if self.closed:
                raise _Gone()
            try:
                self.sock.sendall(_pack(cmd, arg0, arg1, data))
            except OSError:
                raise _Gone() from None

    def abort(self) -> None:
        """Drop the TCP connection as a pulled cable would."""
        self.closed = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        for s in list(self.streams.values()):
            s.peer_closed()

    def _recv_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise _Gone()
            buf += chunk
        return bytes(buf)

    def serve(self) -> None:
        try:
            while not self.dev._stop.is_set():
                cmd, arg0, arg1, length, _crc, magic = struct.unpack("<6I", self._recv_exact(24))
                if magic != cmd ^ 0xFFFFFFFF:
                    return                      # garbage: a real adbd drops the connection
                data = self._recv_exact(length) if length else b""
                self._handle(cmd, arg0, arg1, data)
        except (_Gone, OSError):
            pass
        finally:
            self.abort()

    def _handle(self, cmd: int, arg0: int, arg1: int, data: bytes) -> None:
        cfg = self.dev.config
        if cmd == A_CNXN:
            if cfg.silent:
                return
            if cfg.unauthorized:
                self.send(A_AUTH, AUTH_TOKEN, 0, secrets.token_bytes(20))
                return
            self.max_payload = max(1024, min(arg1, MAX_PAYLOAD))
            self.online = True
            self.send(A_CNXN, A_VERSION, MAX_PAYLOAD, self._banner())
        elif cmd == A_AUTH:
            # SIGNATURE: "wrong key" -> ask again; RSAPUBLICKEY: the phone shows its prompt,
            # which nobody accepts, so adb keeps the device "unauthorized".
            if cfg.unauthorized and arg0 == AUTH_SIGNATURE:
                self.send(A_AUTH, AUTH_TOKEN, 0, secrets.token_bytes(20))
        elif cmd == A_OPEN:
            self._open(arg0, data.rstrip(b"\0").decode("utf-8", "replace"))
        elif cmd == A_WRTE:
            stream = self.streams.get(arg1)
            if stream is not None:
                stream.feed(data)
                self.send(A_OKAY, arg1, arg0)
        elif cmd == A_OKAY:
            stream = self.streams.get(arg1)
            if stream is not None:
                stream.acked()
        elif cmd == A_CLSE:
            stream = self.streams.pop(arg1, None)
            if stream is not None:
                stream.peer_closed()

    def _banner(self) -> bytes:
        props = self.dev.props
        keys = ("ro.product.name", "ro.product.model", "ro.product.device")
        head = "".join(f"{k}={props[k]};" for k in keys)
        return f"device::{head}features={','.join(FEATURES)}".encode()

    def _open(self, remote_id: int, service: str) -> None:
        if not self.online:
            return
        handler = _service(service)
        if handler is None:
            self.send(A_CLSE, 0, remote_id)     # refused
            return
        local_id, self.next_id = self.next_id, self.next_id + 1
        stream = _Stream(self, local_id, remote_id)
        self.streams[local_id] = stream
        self.send(A_OKAY, local_id, remote_id)
        threading.Thread(target=stream.run, args=(handler,), daemon=True).start()


class _Stream:
    """One adb stream: a byte pipe in (WRTE from the server) and flow-controlled WRTE out."""

    def __init__(self, conn: _Conn, local_id: int, remote_id: int):
        self.conn, self.local_id, self.remote_id = conn, local_id, remote_id
        self.dev = conn.dev
        self._cv = threading.Condition()
        self._inbox = bytearray()
        self._ready = True              # may send the next WRTE (the previous one was OKAYed)
        self._wlock = threading.Lock()
        self.closed = False
        self.done = threading.Event()   # set when the peer closed or the connection died

    def feed(self, data: bytes) -> None:
        with self._cv:
            self._inbox += data
            self._cv.notify_all()

    def acked(self) -> None:
        with self._cv:
            self._ready = True
            self._cv.notify_all()

    def peer_closed(self) -> None:
        with self._cv:
            self.closed = True
            self._cv.notify_all()
        self.done.set()

    def read_exact(self, n: int) -> bytes:
        with self._cv:
            while len(self._inbox) < n:
                if self.closed:
                    raise _Gone()
                self._cv.wait(1)
            out = bytes(self._inbox[:n])
            del self._inbox[:n]
            return out

    def write(self, data: bytes) -> None:
        with self._wlock:               # one message at a time: shell packets never interleave
            for i in range(0, len(data), self.conn.max_payload):
                with self._cv:
                    while not self._ready:
                        if self.closed:
                            raise _Gone()
                        self._cv.wait(1)
                    if self.closed:
                        raise _Gone()
                    self._ready = False
                self.conn.send(A_WRTE, self.local_id, self.remote_id,
                               data[i:i + self.conn.max_payload])

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.conn.streams.pop(self.local_id, None)
            try:
                self.conn.send(A_CLSE, self.local_id, self.remote_id)
            except _Gone:
                pass
        self.done.set()

    def run(self, handler) -> None:
        try:
            handler(self)
        except (_Gone, OSError):
            pass
        finally:
            self.close()


# -- services ------------------------------------------------------------------------------

def _service(name: str):
    if name.startswith("shell") and ":" in name:
        opts, cmd = name.split(":", 1)
        flags = opts.split(",")[1:]
        if opts.split(",")[0] != "shell":
            return None
        return lambda s: _shell(s, cmd, v2="v2" in flags)
    if name.startswith("exec:"):
        return lambda s: _shell(s, name[5:], v2=False)
    if name == "sync:":
        return _sync
    return None


def _close_pipes(proc: subprocess.Popen) -> None:
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()


def _shell(stream: _Stream, cmd: str, v2: bool) -> None:
    dev = stream.dev
    with dev._lock:
        dev.commands.append(cmd)
    if dev._vanishes(cmd):
        return
    dev._thermal_read(cmd)
    start = time.monotonic()
    if dev.config.busy_on and re.search(dev.config.busy_on, cmd):
        time.sleep(dev.config.busy_s)
    env = {"PATH": f"{dev.root}/bin:/usr/bin:/bin", "HOME": f"{dev.root}/data/local/tmp",
           "TMPDIR": f"{dev.root}/data/local/tmp", "FAKE_ANDROID_ROOT": str(dev.root),
           "LANG": "C", "LC_ALL": "C"}
    # stdin is not forwarded: the tests' commands never read it, and a real ``raw`` shell with
    # no stdin data behaves the same for them.
    proc = subprocess.Popen(["/bin/sh", "-c", dev.rewrite(cmd) if cmd else "true"],
                            cwd=dev.root, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE if v2 else subprocess.STDOUT,
                            start_new_session=True)
    dev._track(proc)
    if dev._should_drop(cmd):
        time.sleep(dev.config.drop_after_s)
        _kill_group(proc)
        stream.conn.abort()
        proc.wait()
        _close_pipes(proc)
        return

    def pump(fh, packet_id: int) -> None:
        try:
            while chunk := os.read(fh.fileno(), 65536):
                chunk = dev.unrewrite(chunk)
                stream.write(bytes([packet_id]) + struct.pack("<I", len(chunk)) + chunk
                             if v2 else chunk)
        except (_Gone, OSError):
            _kill_group(proc)

    def watch() -> None:                # the server closed the stream: kill like adbd's SIGHUP
        stream.done.wait()
        _kill_group(proc)

    threading.Thread(target=watch, daemon=True).start()
    pumps = [threading.Thread(target=pump, args=(proc.stdout, 1), daemon=True)]
    if v2:
        pumps.append(threading.Thread(target=pump, args=(proc.stderr, 2), daemon=True))
    for t in pumps:
        t.start()
    for t in pumps:
        t.join()
    rc = proc.wait()
    _close_pipes(proc)
    rc = 128 - rc if rc < 0 else rc     # killed by signal N: the shell convention 128+N
    if v2:
        stream.write(bytes([3]) + struct.pack("<I", 1) + bytes([rc & 0xFF]))
    with dev._lock:
        dev.spans.append(CommandSpan(cmd, start, time.monotonic()))


def _stat_v1(path: Path | None) -> bytes:
    try:
        s = os.stat(path) if path is not None else None
    except OSError:
        s = None
    if s is None:
        return struct.pack("<III", 0, 0, 0)
    return struct.pack("<III", s.st_mode, s.st_size & 0xFFFFFFFF, int(s.st_mtime))


def _stat_v2(path: Path | None, follow: bool) -> bytes:
    try:
        if path is None:
            raise FileNotFoundError()
        s = os.stat(path) if follow else os.lstat(path)
    except OSError as e:
        return struct.pack("<I", e.errno or 2) + bytes(64)
    return struct.pack("<IQQIIIIQqqq", 0, s.st_dev, s.st_ino, s.st_mode, s.st_nlink, s.st_uid,
                       s.st_gid, s.st_size, int(s.st_atime), int(s.st_mtime), int(s.st_ctime))


def _fail(stream: _Stream, message: str) -> None:
    msg = message.encode()
    stream.write(b"FAIL" + struct.pack("<I", len(msg)) + msg)


def _sync(stream: _Stream) -> None:
    dev = stream.dev
    while True:
        header = stream.read_exact(8)
        ident, length = header[:4], struct.unpack("<I", header[4:])[0]
        if ident == b"QUIT":
            return
        arg = stream.read_exact(length).decode("utf-8", "surrogateescape")
        if ident == b"STAT":
            stream.write(b"STAT" + _stat_v1(dev.host_path(arg)))
        elif ident in (b"STA2", b"LST2"):
            stream.write(ident + _stat_v2(dev.host_path(arg), follow=ident == b"STA2"))
        elif ident in (b"LIST", b"LIS2"):
            _list(stream, dev.host_path(arg), v2=ident == b"LIS2")
        elif ident == b"SEND":
            _send(stream, arg)
        elif ident == b"RECV":
            _recv(stream, arg)
        else:
            _fail(stream, f"unknown sync command {ident!r}")
            return


def _list(stream: _Stream, path: Path | None, v2: bool) -> None:
    try:
        names = sorted(os.listdir(path)) if path is not None else []
    except OSError:
        names = []
    for name in [".", ".."] + names:
        child = path / name if path is not None else None
        raw = name.encode("utf-8", "surrogateescape")
        if v2:
            stream.write(b"DNT2" + _stat_v2(child, follow=False) + struct.pack("<I", len(raw))
                         + raw)
        else:
            stream.write(b"DENT" + _stat_v1(child) + struct.pack("<I", len(raw)) + raw)
    stream.write(b"DONE" + bytes(72 if v2 else 16))   # a zeroed dirent after DONE


def _send(stream: _Stream, arg: str) -> None:
    dev = stream.dev
    device_path, _, mode_text = arg.rpartition(",")
    if not device_path:                 # no ",mode": the whole argument is the path
        device_path, mode_text = arg, "33188"
    with dev._lock:
        dev.sends.append(device_path)
    target = dev.host_path(device_path)
    norm = posixpath.normpath(device_path)
    error = None
    if target is None or not (norm + "/").startswith(WRITABLE + "/"):
        error = "couldn't create file: Permission denied"
    elif dev.config.fail_push and re.search(dev.config.fail_push, device_path):
        error = "couldn't create file: No space left on device"
    data = bytearray()
    while True:                         # consume the whole upload, even when it will fail
        header = stream.read_exact(8)
        ident, length = header[:4], struct.unpack("<I", header[4:])[0]
        if ident == b"DATA":
            data += stream.read_exact(length)
        elif ident == b"DONE":
            mtime = length
            break
        else:
            _fail(stream, f"invalid data message {ident!r}")
            return
    if error is None:
        assert target is not None
        try:
            target.parent.mkdir(parents=True, exist_ok=True)   # fixed_push_mkdir
            tmp = target.with_name(f".{target.name}.part")
            tmp.write_bytes(bytes(data))
            os.chmod(tmp, int(mode_text) & 0o7777)
            os.utime(tmp, (mtime, mtime))
            os.replace(tmp, target)
        except (OSError, ValueError) as e:
            error = f"couldn't create file: {getattr(e, 'strerror', None) or e}"
    if error is not None:
        _fail(stream, error)
    else:
        stream.write(b"OKAY" + struct.pack("<I", 0))


def _recv(stream: _Stream, device_path: str) -> None:
    dev = stream.dev
    with dev._lock:
        dev.recvs.append(device_path)
    path = dev.host_path(device_path)
    try:
        if path is None:
            raise FileNotFoundError()
        fh = open(path, "rb")
    except OSError as e:
        _fail(stream, f"open failed: {e.strerror or 'No such file or directory'}")
        return
    with fh:
        while chunk := fh.read(SYNC_CHUNK):
            stream.write(b"DATA" + struct.pack("<I", len(chunk)) + chunk)
    stream.write(b"DONE" + struct.pack("<I", 0))


# -- the sandbox -----------------------------------------------------------------------------

def _cpu_features(sme2: bool) -> str:
    base = ("fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm "
            "jscvt fcma lrcpc dcpop sha3 sm3 sm4 asimddp sha512 sve asimdfhm dit uscat ilrcpc "
            "flagm ssbs sb paca pacg dcpodp sve2 sveaes svepmull svebitperm svesha3 svesm4 "
            "flagm2 frint svei8mm svebf16 i8mm bf16 dgh bti")
    return base + (" sme smei16i64 smef64f64 smei8i32 smef16f32 smeb16f32 smef32f32 smefa64 "
                   "sme2" if sme2 else "")


def hwcap_features(hwcap: int, hwcap2: int) -> str:
    """The cpuinfo ``Features`` words of AT_HWCAP/AT_HWCAP2 values (named bits only)."""
    return " ".join([n for b, n in enumerate(HWCAP_NAMES) if hwcap >> b & 1]
                    + [n for b, n in enumerate(HWCAP2_NAMES) if hwcap2 >> b & 1])


def crafted_auxv(sme2: bool, hwcaps: tuple[int, int] | None = None) -> bytes:
    """An arm64 auxiliary vector: (type, value) u64 pairs ending with AT_NULL. ``hwcaps``:
    (AT_HWCAP, AT_HWCAP2) as read on an emulated CPU; else made up from ``sme2``."""
    if hwcaps is None:
        hwcap2 = (HWCAP2_SME | HWCAP2_SME2 | (1 << 1)) if sme2 else (1 << 1)   # bit 1: SVE2
        hwcaps = (0xEFFFFFFF, hwcap2)
    pairs = [(33, 0x7FFF0000), (AT_HWCAP, hwcaps[0]), (AT_PAGESZ, 4096), (AT_HWCAP2, hwcaps[1]),
             (AT_NULL, 0)]
    return b"".join(struct.pack("<QQ", k, v) for k, v in pairs)


@dataclass(frozen=True)
class EmulatedCpu:
    """What the aarch64 probe saw under QEMU: the fake phone's CPU."""
    hwcap: int
    hwcap2: int
    qemu_version: str


def emulated_cpu(cfg: FakeAndroidConfig) -> EmulatedCpu:
    """Run the aarch64 probe under the phone's QEMU once; its hwcaps are the phone's."""
    for what in ("qemu", "sysroot", "probe"):
        if getattr(cfg, what) is None or not Path(getattr(cfg, what)).exists():
            raise ValueError(f"an aarch64 fake phone needs {what}= (got {getattr(cfg, what)})")
    argv = [str(cfg.qemu), "-L", str(cfg.sysroot), "-cpu", cfg.qemu_cpu, str(cfg.probe)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    seen = dict(ln.split(" ", 1) for ln in proc.stdout.splitlines() if " " in ln)
    if proc.returncode != 0 or "hwcap2" not in seen:
        raise RuntimeError(f"the probe failed under QEMU ({' '.join(argv)}): "
                           f"{proc.stderr.strip()[-300:]}")
    version = subprocess.run([str(cfg.qemu), "--version"], capture_output=True, text=True,
                             timeout=30).stdout
    m = re.search(r"version (\d+(?:\.\d+)*)", version)
    return EmulatedCpu(int(seen["hwcap"], 0), int(seen["hwcap2"], 0), m.group(1) if m else "?")


def _target_props(cfg: FakeAndroidConfig, cpu: EmulatedCpu | None) -> dict[str, str]:
    """What the fake phone runs, as properties only pytest-sme2's fakes have (a real phone runs
    bionic programs and has neither): the native-runner target and, if emulated, the emulator."""
    if cpu is None:
        return {"ro.pytest_sme2.target": "host"}
    return {"ro.pytest_sme2.target": "aarch64-linux-gnu",
            "ro.pytest_sme2.emulator": f"QEMU {cpu.qemu_version} user mode, -cpu {cfg.qemu_cpu}",
            "ro.product.model": "Fake Arm64 Phone (QEMU)", "ro.soc.manufacturer": "QEMU",
            "ro.soc.model": cfg.qemu_cpu, "ro.board.platform": "qemu", "ro.hardware": "qemu"}


def _fake_exec(cfg: FakeAndroidConfig) -> str:
    """binfmt_misc done by hand: an aarch64 ELF program runs under QEMU, anything else as is."""
    trace = ""
    if cfg.trace_dir is not None:
        d = _sh_word(str(cfg.trace_dir))
        trace = ('run=$(date +%s%N)-$$\n'
                 f'set -- -d in_asm -D {d}/run-$run.log -E PYTEST_SME2_MAPS_OUT={d}/run-$run.maps '
                 '"$@"\n')
    qemu = " ".join(_sh_word(str(a)) for a in (cfg.qemu, "-L", cfg.sysroot, "-cpu", cfg.qemu_cpu))
    return ("#!/bin/sh\n# fake binfmt_misc: aarch64 ELF programs run under QEMU user mode\n"
            'case "$1" in */*) ;; *) exec "$@" ;; esac\n'
            '[ -f "$1" ] && [ "$(od -An -tx1 -N4 "$1" | tr -d \' \\n\')" = 7f454c46 ] && '
            '[ "$(od -An -tu2 -j18 -N2 "$1" | tr -d \' \\n\')" = 183 ] || exec "$@"\n'
            'if [ -n "${LD_LIBRARY_PATH+x}" ]; then '
            'set -- -E "LD_LIBRARY_PATH=$LD_LIBRARY_PATH" "$@"; fi\n'
            f'if [ -n "${{{GUEST_PRELOAD}+x}}" ]; then '
            f'set -- -E "LD_PRELOAD=${GUEST_PRELOAD}" "$@"; fi\n'
            + trace +
            f'exec env -u LD_LIBRARY_PATH -u {GUEST_PRELOAD} {qemu} "$@"\n')


def _fake_timeout() -> str:
    real = shutil.which("timeout", path="/usr/bin:/bin") or "timeout"
    return ("#!/bin/sh\n# fake toybox timeout: the host's, its command started through fake-exec\n"
            'opts=\nwhile :; do\n  case "$1" in\n'
            '    -k|-s) opts="$opts $1 $2"; shift 2 ;;\n    -*) opts="$opts $1"; shift ;;\n'
            '    *) break ;;\n  esac\ndone\nlimit=$1\nshift\n'
            f'exec {_sh_word(real)} $opts "$limit" "$FAKE_ANDROID_ROOT/bin/fake-exec" "$@"\n')


def _write(path: Path, text: str | bytes, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    os.chmod(path, mode)


def build_sandbox(root: Path, cfg: FakeAndroidConfig) -> dict[str, str]:
    """Lay out the phone's files; the properties its getprop answers."""
    if cfg.arch not in ("host", "aarch64"):
        raise ValueError(f"FakeAndroidConfig.arch must be 'host' or 'aarch64', not {cfg.arch!r}")
    (root / "data/local/tmp").mkdir(parents=True, exist_ok=True)
    ncpu = sum(n for n, _ in cfg.clusters)
    emulated = emulated_cpu(cfg) if cfg.arch == "aarch64" else None
    if emulated is not None:
        hwcaps: tuple[int, int] | None = (emulated.hwcap, emulated.hwcap2)
        sme2 = bool(emulated.hwcap2 & HWCAP2_SME2)
        feats = hwcap_features(*hwcaps)
    else:
        hwcaps, sme2, feats = None, cfg.sme2, _cpu_features(cfg.sme2)
    cpuinfo = "".join(f"processor\t: {i}\nBogoMIPS\t: 26.00\nFeatures\t: {feats}\n"
                      f"CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\n"
                      f"CPU part\t: 0xd87\nCPU revision\t: 1\n\n" for i in range(ncpu))
    _write(root / "proc/cpuinfo", cpuinfo)
    _write(root / "proc/self/auxv", crafted_auxv(sme2, hwcaps))
    mask = (1 << ncpu) - 1
    _write(root / "proc/self/status", f"Name:\tsh\nState:\tR (running)\nCpus_allowed:\t{mask:x}\n"
                                      f"Cpus_allowed_list:\t0-{ncpu - 1}\n")
    cpu_dir = root / "sys/devices/system/cpu"
    _write(cpu_dir / "possible", f"0-{ncpu - 1}\n")
    _write(cpu_dir / "online", f"0-{ncpu - 1}\n")
    cpu = 0
    for count, khz in cfg.clusters:
        for _ in range(count):
            _write(cpu_dir / f"cpu{cpu}/cpufreq/cpuinfo_max_freq", f"{khz}\n")
            _write(cpu_dir / f"cpu{cpu}/cpufreq/scaling_governor", f"{cfg.governor}\n")
            cpu += 1
    for i, (kind, milli) in enumerate(cfg.thermal):
        _write(root / f"sys/class/thermal/thermal_zone{i}/type", f"{kind}\n")
        _write(root / f"sys/class/thermal/thermal_zone{i}/temp", f"{milli}\n")
    for i, (kind, state) in enumerate(cfg.cooling):
        _write(root / f"sys/class/thermal/cooling_device{i}/type", f"{kind}\n")
        _write(root / f"sys/class/thermal/cooling_device{i}/cur_state", f"{state}\n")
    if cfg.thermal_status is not None:
        set_thermal(root, cfg, "status", cfg.thermal_status)
        _write(root / "bin/dumpsys", "#!/bin/sh\n# fake dumpsys: the services' dumps as files\n"
                                     'cat "$FAKE_ANDROID_ROOT/dumpsys/$1" 2>/dev/null\n', 0o755)
    props = {**default_props(sme2), **_target_props(cfg, emulated), **cfg.props}
    cases = "".join(f"  {_sh_word(k)}) echo {_sh_word(v)} ;;\n" for k, v in props.items())
    listing = "".join(f"echo {_sh_word(f'[{k}]: [{v}]')}\n" for k, v in sorted(props.items()))
    _write(root / "bin/getprop",
           "#!/bin/sh\n# fake Android getprop\n"
           f'if [ $# -eq 0 ]; then\n{listing}exit 0\nfi\n'
           f'case "$1" in\n{cases}  *) echo "${{2:-}}" ;;\nesac\n', 0o755)
    _write(root / "bin/uname",
           "#!/bin/sh\n# fake Android uname\n"
           f'case "$1" in\n  -r) echo {_sh_word(cfg.kernel)} ;;\n  -m) echo aarch64 ;;\n'
           f'  -a) echo "Linux localhost {cfg.kernel} #1 SMP PREEMPT aarch64 Toybox" ;;\n'
           '  *) echo Linux ;;\nesac\n', 0o755)
    # The host may have fewer CPUs than the fake phone: record the mask instead of applying it.
    start = '"$FAKE_ANDROID_ROOT/bin/fake-exec" ' if emulated is not None else ""
    _write(root / "bin/taskset",
           "#!/bin/sh\n# fake taskset: logs the mask, runs the command unpinned\n"
           f'echo "$1" >> "$FAKE_ANDROID_ROOT/taskset.log"\nshift\nexec {start}"$@"\n', 0o755)
    if emulated is not None:
        _write(root / "bin/fake-exec", _fake_exec(cfg), 0o755)
        _write(root / "bin/timeout", _fake_timeout(), 0o755)
        if cfg.trace_dir is not None:
            Path(cfg.trace_dir).mkdir(parents=True, exist_ok=True)
    return props


def set_thermal(root: Path, cfg: FakeAndroidConfig, key: str, value: int) -> None:
    """Set one thermal reading of a built phone (``FakeAndroidConfig.thermal_steps`` keys)."""
    if key == "status":
        # The shape of `dumpsys thermalservice` (Android 14); the temperatures are the
        # zones' (tests/unit/test_thermal.py parses a dump with HAL temperatures).
        _write(root / "dumpsys/thermalservice",
               f"IsStatusOverride: false\nThermal Status: {value}\nCached temperatures:\n"
               "HAL Ready: true\nCurrent temperatures from HAL:\n"
               "Current cooling devices from HAL:\n")
        return
    kinds = [k for k, _ in cfg.cooling] if key.startswith("cooling:") else \
        [k for k, _ in cfg.thermal]
    name = key.removeprefix("cooling:")
    if name not in kinds:
        raise ValueError(f"thermal_steps key {key!r} names no zone or cooling device")
    path = (f"cooling_device{kinds.index(name)}/cur_state" if key.startswith("cooling:")
            else f"thermal_zone{kinds.index(name)}/temp")
    _write(root / "sys/class/thermal" / path, f"{value}\n")


def _sh_word(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"
