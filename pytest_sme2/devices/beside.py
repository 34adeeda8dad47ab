"""What of ours ran beside a block on this machine: the session's other processes (exports
ahead, a fork server still importing, a leftover process, another xdist worker's block) that
took CPU while the block's runner process ran.

Why: two vCPUs share one core's resources on the VMs this runs on; work on the other vCPU
slowed toy_cnn on the first from about 120 to 344 µs (docs/measurements/machine-state.md). The
session should never measure beside its own work, and when it did, it says so.

How: the CPU time (utime + stime) of every process under the session's root (the pytest
process, or an xdist worker's controller) is read from ``/proc`` before and after the block;
one that used more than :data:`BUSY_SHARE` of the block's wall time, and at least
:data:`BUSY_LEAST_MS`, ran beside it. Linux only; elsewhere nothing is watched."""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Collection, Iterator

PROC = Path("/proc")
BUSY_SHARE = 0.1          # of the block's wall time, on the other CPU
BUSY_LEAST_MS = 5.0
_TICK_MS = 1000.0 / os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 10.0


@dataclass(frozen=True)
class _Proc:
    ppid: int
    cpu_ms: float


def _read(pid: int) -> _Proc | None:
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()   # after "pid (comm) "
    return _Proc(int(fields[1]), (int(fields[11]) + int(fields[12])) * _TICK_MS)


def _what(pid: int) -> str:
    """Its command line, short: what a person recognises."""
    try:
        argv = (PROC / str(pid) / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return "gone"
    text = " ".join(a.decode(errors="replace") for a in argv[:4] if a)
    return " ".join(text.split())[:80] or "?"


def session_root() -> int:
    """The process whose descendants are this session: an xdist worker's controller, else
    this process."""
    return os.getppid() if os.environ.get("PYTEST_XDIST_WORKER") else os.getpid()


def _children(pid: int) -> list[int]:
    """Its children, from every thread's ``children`` list (Linux 3.5+)."""
    out: list[int] = []
    try:
        for task in (PROC / str(pid) / "task").iterdir():
            try:
                out += [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                continue
    except OSError:
        pass
    return out


def snapshot(root: int) -> dict[int, _Proc]:
    """Every process under ``root`` (not this one), by walking the process tree down from it:
    a few files, not all of /proc."""
    me, out = os.getpid(), {}
    todo = _children(root)
    while todo:
        pid = todo.pop()
        if pid in out:
            continue
        p = _read(pid)
        if p is None:
            continue
        out[pid] = p
        todo += _children(pid)
    out.pop(me, None)
    return out


@dataclass
class Watch:
    """The processes that ran beside one block, once it ended: ``pid N (what) used X ms of
    CPU during the block's Y ms``."""

    busy: list[str] = field(default_factory=list)


@contextmanager
def watch(enabled: bool = True, serving: Collection[int] = ()) -> Iterator[Watch]:
    """Watch the session's other processes around a block (``enabled`` False: a device whose
    blocks do not run on this machine's CPU); ``serving``: those that serve the block's runner
    (its fork server forks the run, then waits for it), left out."""
    seen = Watch()
    if not enabled or not PROC.is_dir():
        yield seen
        return
    root = session_root()
    before, t0 = snapshot(root), time.monotonic()
    try:
        yield seen
    finally:
        wall_ms = (time.monotonic() - t0) * 1e3
        least = max(BUSY_LEAST_MS, BUSY_SHARE * wall_ms)
        for pid, p in snapshot(root).items():
            if pid in serving:
                continue
            used = p.cpu_ms - before[pid].cpu_ms if pid in before else p.cpu_ms
            if used >= least:
                seen.busy.append(f"pid {pid} ({_what(pid)}) used {used:.0f} ms of CPU during "
                                 f"the block's {wall_ms:.0f} ms")
