"""The fake phone's adb services: ``shell`` (v1 merged output, v2 packets with the exit code),
``exec`` and ``sync`` (STAT, STA2, LST2, LIST, LIS2, SEND, RECV, QUIT), run in its sandbox."""

from __future__ import annotations

import os
import posixpath
import re
import struct
import subprocess
import threading
import time
from pathlib import Path

from pytest_sme2.fakephone.transport import CommandSpan, Gone, kill_group, Stream

SYNC_CHUNK = 64 * 1024          # adbd's SYNC_DATA_MAX
WRITABLE = "/data/local/tmp"


def find(name: str):
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


def _shell(stream: Stream, cmd: str, v2: bool) -> None:
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
        kill_group(proc)
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
        except (Gone, OSError):
            kill_group(proc)

    def watch() -> None:                # the server closed the stream: kill like adbd's SIGHUP
        stream.done.wait()
        kill_group(proc)

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


def _fail(stream: Stream, message: str) -> None:
    msg = message.encode()
    stream.write(b"FAIL" + struct.pack("<I", len(msg)) + msg)


def _sync(stream: Stream) -> None:
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


def _list(stream: Stream, path: Path | None, v2: bool) -> None:
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


def _send(stream: Stream, arg: str) -> None:
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


def _recv(stream: Stream, device_path: str) -> None:
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


