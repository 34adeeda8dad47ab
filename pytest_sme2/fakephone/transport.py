"""The device side of the adb transport: 24-byte packets (CNXN, OPEN, OKAY, WRTE, CLSE, AUTH),
one connection per adb server link, and the streams its services read and write (one WRTE in
flight per stream). Services come from the device (``dev.service(name)``)."""

from __future__ import annotations

import os
import secrets
import signal
import socket
import struct
import subprocess
import threading
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol


class FakeAdbDevice(Protocol):
    """What a connection reads of the device it serves (:class:`pytest_sme2.fakephone.adbd.
    FakeAdbDevice`; the device imports this module, so it is named here by shape)."""

    _stop: threading.Event
    config: Any
    props: Mapping[str, str]

    def service(self, name: str) -> Callable[..., Any] | None: ...

A_SYNC, A_CNXN, A_OPEN, A_OKAY = 0x434E5953, 0x4E584E43, 0x4E45504F, 0x59414B4F
A_CLSE, A_WRTE, A_AUTH, A_STLS = 0x45534C43, 0x45545257, 0x48545541, 0x534C5453
A_VERSION = 0x01000001          # >= this, neither side needs to check the data checksum
MAX_PAYLOAD = 256 * 1024
AUTH_TOKEN, AUTH_SIGNATURE, AUTH_RSAPUBLICKEY = 1, 2, 3
FEATURES = ("shell_v2", "cmd", "stat_v2", "ls_v2", "fixed_push_mkdir",
            "fixed_push_symlink_timestamp")


@dataclass(frozen=True)
class CommandSpan:
    cmd: str
    start: float                    # time.monotonic() when the command started
    end: float                      # ... and when it exited


class Gone(Exception):
    """The TCP connection or the stream ended."""


def kill_group(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass


def _pack(cmd: int, arg0: int, arg1: int, data: bytes = b"") -> bytes:
    return struct.pack("<6I", cmd, arg0, arg1, len(data), sum(data) & 0xFFFFFFFF,
                       cmd ^ 0xFFFFFFFF) + data


class Connection:
    """One TCP connection from the adb server: a reader loop and a thread per open stream."""

    def __init__(self, dev: FakeAdbDevice, sock: socket.socket):
        self.dev, self.sock = dev, sock
        self.wlock = threading.Lock()
        self.streams: dict[int, Stream] = {}
        self.next_id = 1
        self.max_payload = 4096
        self.online = False
        self.closed = False

    def send(self, cmd: int, arg0: int, arg1: int, data: bytes = b"") -> None:
        with self.wlock:
            if self.closed:
                raise Gone()
            try:
                self.sock.sendall(_pack(cmd, arg0, arg1, data))
            except OSError:
                raise Gone() from None

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
                raise Gone()
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
        except (Gone, OSError):
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
        handler = self.dev.service(service)
        if handler is None:
            self.send(A_CLSE, 0, remote_id)     # refused
            return
        local_id, self.next_id = self.next_id, self.next_id + 1
        stream = Stream(self, local_id, remote_id)
        self.streams[local_id] = stream
        self.send(A_OKAY, local_id, remote_id)
        threading.Thread(target=stream.run, args=(handler,), daemon=True).start()


class Stream:
    """One adb stream: a byte pipe in (WRTE from the server) and flow-controlled WRTE out."""

    def __init__(self, conn: Connection, local_id: int, remote_id: int):
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
                    raise Gone()
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
                            raise Gone()
                        self._cv.wait(1)
                    if self.closed:
                        raise Gone()
                    self._ready = False
                self.conn.send(A_WRTE, self.local_id, self.remote_id,
                               data[i:i + self.conn.max_payload])

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.conn.streams.pop(self.local_id, None)
            try:
                self.conn.send(A_CLSE, self.local_id, self.remote_id)
            except Gone:
                pass
        self.done.set()

    def run(self, handler) -> None:
        try:
            handler(self)
        except (Gone, OSError):
            pass
        finally:
            self.close()
