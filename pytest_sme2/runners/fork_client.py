"""The process a device runs for one python-runner run served by the fork server
(:mod:`pytest_sme2.runners.fork_server`): ``python -S fork_client.py SOCKET CHILD-ARGS...``.

It hands its stdin/stdout/stderr to the server, which forks the run's process onto them, and
exits as that process did (same status, or killed by the same signal): to the device it is the
run. Killing it (a timeout) makes the server kill the run. Standard library only and started
with ``-S``: it costs milliseconds, where a fresh runtime costs seconds. If the server cannot be
reached, it becomes a fresh ``python_child`` process instead: slower, same result.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import sys

HEADER = struct.Struct("!I")   # length of the JSON request that follows


def _fresh_child(args: list[str]) -> None:
    """Replace this process with a fresh python_child (the server is gone)."""
    os.execv(sys.executable, [sys.executable, "-m", "pytest_sme2.runners.python_child", *args])


def main(argv: list[str]) -> int:
    address, args = argv[0], argv[1:]
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(address)
    except OSError:
        sock.close()
        _fresh_child(args)
    body = json.dumps({"argv": args, "cwd": os.getcwd()}).encode()
    socket.send_fds(sock, [HEADER.pack(len(body)) + body], [0, 1, 2])
    reply = b""
    while chunk := sock.recv(4096):
        reply += chunk
    try:
        status = int(json.loads(reply)["status"])
    except (ValueError, KeyError, TypeError):
        print("python runner: the fork server ended before the run did", file=sys.stderr)
        return 1
    if status < 0:  # killed by a signal: die by the same one, so the device reports it as such
        try:
            signal.signal(-status, signal.SIG_DFL)
        except (OSError, ValueError):  # SIGKILL and SIGSTOP have no handler to reset
            pass
        os.kill(os.getpid(), -status)
        return 128 - status
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
