"""A fork server for the python runner: one process imports torch and the ExecuTorch runtime
once, then forks a fresh process for every run.

Importing the runtime costs one to several seconds per process; a fork costs milliseconds. Each
run still is a process of its own, forked before any runtime state exists — the server imports
modules and nothing else: it loads no program and never touches the thread pool, which the run
sizes before it loads (XNNPACK keeps the pool it finds when a program loads) —, so the process
stays the unit of replication.

Protocol, one Unix-socket connection per run: the client (:mod:`pytest_sme2.runners.fork_client`)
sends a length-prefixed JSON ``{"argv", "cwd"}`` with its stdin/stdout/stderr attached; the
server forks a process that runs ``python_child.main(argv)`` on them, then replies
``{"status": N}`` (negative: killed by signal -N) and closes. A client that goes away (killed on
a timeout) has its run killed. The server exits when its stdin, a pipe from the process that
started it, closes, and is killed when that process ends (even while stopped). Runs see the
environment the server started with, and the client's working folder.

While it is still importing, the session stops it (SIGSTOP) around every process it measures
and lets it go on between them (:meth:`ForkServer.pause`): the import happens in the session's
idle moments, never beside a measurement.
"""

from __future__ import annotations

import json
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import traceback
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

from pytest_sme2.runners.fork_client import HEADER

READY = "fork-server ready"
ARMED = "fork-server armed"    # killed when its parent ends: from now on it may be stopped
ARM_TIMEOUT_S = 30.0           # an interpreter starting (milliseconds, or seconds on a busy host)
START_TIMEOUT_S = 120.0
CLIENT = Path(__file__).with_name("fork_client.py")


def supported() -> bool:
    """Fork, fd passing and pidfds (to wait for a run and its client at once): Linux."""
    return hasattr(os, "fork") and hasattr(os, "pidfd_open") and hasattr(socket, "send_fds")


# -- the server process ----------------------------------------------------------------------

def _recv_request(conn: socket.socket) -> tuple[dict, list[int]]:
    data, fds, _, _ = socket.recv_fds(conn, 65536, 3)
    try:
        if len(data) < HEADER.size or len(fds) != 3:
            raise ValueError("short request")
        (size,) = HEADER.unpack_from(data)
        while len(data) < HEADER.size + size:
            more = conn.recv(65536)
            if not more:
                raise ValueError("truncated request")
            data += more
        return json.loads(data[HEADER.size:HEADER.size + size]), fds
    except (OSError, ValueError):
        for fd in fds:
            os.close(fd)
        raise


def _run_child(request: dict, fds: list[int], keep_closed: list[int]) -> NoReturn:
    """In the forked process: become the run (its stdio, its folder) and exit with its status."""
    status = 1
    try:
        for fd in keep_closed:
            os.close(fd)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        os.chdir(request["cwd"])
        # python_child is also `python -m`'s entry: imported by its own package, runpy warns.
        from pytest_sme2.runners import python_child  # python_child: a `python -m` entry; 7 ms

        status = python_child.main(list(request["argv"]))
    except SystemExit as e:  # argparse, or a one-line error raised as SystemExit(message)
        if isinstance(e.code, int) or e.code is None:
            status = e.code or 0
        else:
            print(e.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - what a fresh interpreter would print, then status 1
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001 - a closed pipe: nothing more to say
                pass
        os._exit(status)


def _status(wait_status: int) -> int:
    """subprocess-style status: the exit code, or -signal."""
    if os.WIFSIGNALED(wait_status):
        return -os.WTERMSIG(wait_status)
    return os.waitstatus_to_exitcode(wait_status)


def _die_with(parent: int) -> None:
    """Be killed when ``parent`` ends, whatever state this process is in: the session stops
    the server (SIGSTOP) while it measures, and a stopped process never reads the end of its
    stdin — a session killed mid-measurement would leave it stopped for good."""
    import ctypes  # ctypes: only the forked server calls prctl

    PR_SET_PDEATHSIG = 1
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return   # no prctl: never stopped (the session waits for it instead), stdin ends it
    if os.getppid() != parent:   # it ended before the call above
        os._exit(0)
    print(ARMED, flush=True)


def serve(address: str, parent: int | None = None) -> NoReturn:
    if parent is not None:
        _die_with(parent)
    # Ctrl-C in the terminal is for the session, which kills its clients; we end on stdin EOF.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # python_child is also `python -m`'s entry: imported by its own package, runpy warns.
    from pytest_sme2.runners import python_child  # python_child: a `python -m` entry; 7 ms

    python_child.import_runtime()   # modules only: no program, no thread pool
    os.close(os.pidfd_open(os.getpid()))  # a kernel without pidfds fails here, not per run
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address)
    listener.listen(16)
    print(READY, flush=True)
    # Nobody reads our stdout/stderr from now on; runs write to their client's.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    os.close(devnull)
    _Loop(listener).run()


class _Loop:
    """Waits at once for new clients, runs that end (pidfds), clients that go away, and the
    end of stdin."""

    def __init__(self, listener: socket.socket) -> None:
        self.listener = listener
        self.sel = selectors.DefaultSelector()
        self.sel.register(listener, selectors.EVENT_READ, self.accept)
        self.sel.register(sys.stdin, selectors.EVENT_READ, self.stdin)
        self.runs: dict[int, tuple[socket.socket, int]] = {}  # pidfd -> (client conn, pid)
        self.by_conn: dict[int, int] = {}                      # client conn fd -> pid

    def run(self) -> NoReturn:
        while True:
            for key, _ in self.sel.select():
                key.data(key.fd)

    def stdin(self, fd: int) -> None:
        if not os.read(fd, 4096):
            for _, pid in self.runs.values():
                _kill(pid)
            os._exit(0)  # nothing to flush; torch's teardown would only cost time

    def accept(self, fd: int) -> None:
        conn, _ = self.listener.accept()
        try:
            request, fds = _recv_request(conn)
        except (OSError, ValueError):
            conn.close()
            return
        pid = os.fork()
        if pid == 0:
            inherited = [self.listener.fileno(), conn.fileno(), sys.stdin.fileno(),
                         *self.by_conn, *self.runs]
            self.sel.close()
            _run_child(request, fds, inherited)
        for fd in fds:
            os.close(fd)
        pidfd = os.pidfd_open(pid)
        self.runs[pidfd] = (conn, pid)
        self.by_conn[conn.fileno()] = pid
        self.sel.register(pidfd, selectors.EVENT_READ, self.ended)
        self.sel.register(conn, selectors.EVENT_READ, self.client_left)

    def ended(self, pidfd: int) -> None:
        conn, pid = self.runs.pop(pidfd)
        self.sel.unregister(pidfd)
        os.close(pidfd)
        _, wait_status = os.waitpid(pid, 0)
        if self.by_conn.pop(conn.fileno(), None) is not None and \
                conn.fileno() in self.sel.get_map():
            self.sel.unregister(conn)
        try:
            conn.sendall(json.dumps({"status": _status(wait_status)}).encode())
        except OSError:
            pass  # the client is gone already
        conn.close()

    def client_left(self, fd: int) -> None:
        """The client sent more than its request, or went away: its run must not stay."""
        self.sel.unregister(fd)
        _kill(self.by_conn.get(fd))


def _kill(pid: int | None) -> None:
    if pid is not None:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


# -- the handle the python runner keeps ------------------------------------------------------

def _stop(proc: subprocess.Popen, folder: str) -> None:
    try:  # seconds at most: the server exits as soon as it reads EOF
        proc.stdin.close()   # the server's signal to end
        proc.wait(timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        proc.kill()
        proc.wait()
    shutil.rmtree(folder, ignore_errors=True)


@dataclass(eq=False)
class ForkServer:
    """Started on first use (or ahead of it by :meth:`start`); stopped by :meth:`stop`, when
    garbage collected, or when this process ends (the server's stdin closes). ``problem`` says
    why runs go to fresh processes."""

    python: str = sys.executable
    problem: str | None = None
    problem_told: bool = False      # a runner said ``problem`` once: not again
    _proc: subprocess.Popen | None = field(default=None, repr=False)
    _address: str | None = field(default=None, repr=False)
    _finalizer: weakref.finalize | None = field(default=None, repr=False)
    # Spawned, not yet ready: (process, folder, socket address, stderr file).
    _pending: tuple[subprocess.Popen, str, str, str] | None = field(default=None, repr=False)
    _paused: bool = field(default=False, repr=False)   # stopped by pause(), still importing
    _armed: bool = field(default=False, repr=False)    # said ARMED: safe to stop
    _said_ready: bool = field(default=False, repr=False)   # READY read while pausing

    @property
    def pid(self) -> int | None:
        """The server's process id, running or still starting (None when there is none)."""
        if self._running():
            return self._proc.pid
        return self._pending[0].pid if self._pending is not None else None

    @property
    def starting(self) -> bool:
        """Spawned by :meth:`start` and still importing (or not yet asked whether it is ready)."""
        return self._pending is not None

    def start(self) -> None:
        """Spawn the server without waiting for it: its imports (torch, the runtime) take a
        second or more, which the caller can spend on other start-up work. :meth:`address`
        waits for it."""
        if self._running() or self._pending is not None or self.problem is not None:
            return
        if not supported():
            self.problem = "this platform has no fork server (it needs Linux pidfds)"
            return
        self._spawn()

    def address(self) -> str | None:
        """The server's socket, starting it if needed and waiting until it is ready; None when
        runs must use fresh processes (then ``problem`` says why)."""
        if self._running():
            return self._address
        self.start()
        if self._pending is not None:
            self.resume()
            self._await_ready()
        return self._address if self._running() else None

    def pause(self) -> None:
        """Stop a server that is still importing (SIGSTOP) while something is measured: its
        import must not share the CPU with a measurement. :meth:`resume` (or :meth:`address`)
        lets it go on. A ready server waits for clients and costs nothing: left alone."""
        if self._pending is None or self._paused:
            return
        proc = self._pending[0]
        if not self._armed and not self._said_ready:
            # Stopped before it can die with us, it could outlive us, stopped for good.
            line = self._next_line(proc, ARM_TIMEOUT_S)
            self._said_ready = line == READY
            if line != ARMED:
                return   # ready already (idle: nothing to stop), or failing: address() says
        if not self._said_ready:
            self._paused = _halt(proc)

    def _next_line(self, proc: subprocess.Popen, timeout_s: float) -> str | None:
        line = _read_line(proc.stdout, timeout_s)
        self._armed = self._armed or line == ARMED
        return line

    def resume(self) -> None:
        if self._paused:
            self._paused = False
            if self._pending is not None:
                _signal(self._pending[0], signal.SIGCONT)

    def _running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _spawn(self) -> None:
        self._armed = self._said_ready = self._paused = False
        folder = tempfile.mkdtemp(prefix="sme2-fork-")
        address = os.path.join(folder, "s")
        errors = os.path.join(folder, "stderr")   # a file: a pipe could fill up and block it
        try:
            # A session of its own: Ctrl-C in the terminal reaches the session, not the server.
            with open(errors, "wb") as err_fh:
                proc = subprocess.Popen(
                    [self.python, "-m", "pytest_sme2.runners.fork_server", address,
                     str(os.getpid())],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err_fh,
                    start_new_session=True, bufsize=0)   # unbuffered: lines read one by one
        except OSError as e:
            shutil.rmtree(folder, ignore_errors=True)
            self.problem = f"the fork server did not start ({self.python}: {e.strerror})"
            return
        self._pending = (proc, folder, address, errors)

    def _await_ready(self) -> None:
        proc, folder, address, errors = self._pending
        self._pending = None
        line = READY if self._said_ready else self._next_line(proc, START_TIMEOUT_S)
        if line == ARMED:
            line = self._next_line(proc, START_TIMEOUT_S)
        proc.stdout.close()
        if line != READY:
            with open(errors, errors="replace") as fh:
                err = [ln.strip() for ln in fh if ln.strip()]
            _stop(proc, folder)
            self.problem = ("the fork server did not start"
                            + (f" ({err[-1]})" if err else ""))
            return
        self._proc, self._address = proc, address
        self._finalizer = weakref.finalize(self, _stop, proc, folder)

    def stop(self) -> None:
        if self._pending is not None:   # spawned, never used: still importing, nothing to lose
            proc, folder, _, _ = self._pending
            self._pending, self._paused = None, False
            proc.kill()   # stopped or not
            proc.wait()
            for pipe in (proc.stdin, proc.stdout):
                pipe.close()
            shutil.rmtree(folder, ignore_errors=True)
        if self._finalizer is not None:
            self._finalizer()
        self._proc = self._address = self._finalizer = None


_SHARED: dict[str, ForkServer] = {}


def shared_server(python: str = sys.executable) -> ForkServer:
    """This process's server for ``python``: the python runners of a session share one, so a
    server started ahead of the first run (``start()``) is the one the runs use."""
    if python not in _SHARED:
        _SHARED[python] = ForkServer(python)
    return _SHARED[python]


def _read_line(stream, timeout_s: float) -> str | None:
    sel = selectors.DefaultSelector()
    sel.register(stream, selectors.EVENT_READ)
    ready = sel.select(timeout_s)
    sel.close()
    return stream.readline().decode(errors="replace").strip() if ready else None


def _halt(proc: subprocess.Popen) -> bool:
    """SIGSTOP ``proc`` and return once it has stopped (a signal takes effect when the kernel
    next schedules the process: the measurement must not start before). False if it ended."""
    if not _signal(proc, signal.SIGSTOP):
        return False
    try:
        _, status = os.waitpid(proc.pid, os.WUNTRACED)
    except ChildProcessError:
        return False
    if os.WIFSTOPPED(status):
        return True
    proc.returncode = _status(status)   # it ended meanwhile: its exit status is Popen's now
    return False


def _signal(proc: subprocess.Popen, sig: int) -> bool:
    """Send ``sig``; False if the process has ended (and been reaped)."""
    if proc.poll() is not None:
        return False
    try:
        os.kill(proc.pid, sig)
    except ProcessLookupError:
        return False
    return True


if __name__ == "__main__":
    sys.exit(serve(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else None))
