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

import os
import posixpath
import re
import secrets
import signal
import socket
import struct
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from pytest_sme2.fakephone.sandbox import (GUEST_PRELOAD, FakeAndroidConfig, build_sandbox,
                                          set_thermal)

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


