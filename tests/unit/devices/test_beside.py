"""What of ours ran beside a block (pytest_sme2.devices.beside): a busy child of this session
is named with the CPU it took; an idle one, and a block on another machine, are not."""

from __future__ import annotations

import subprocess
import sys
import time

from pytest_sme2.devices.beside import _read, watch

SPIN = "x = 0\nwhile True:\n    x += 1\n"


def _until_used(pid: int, ms: float, deadline_s: float = 60.0) -> None:
    """Wait until ``pid`` has used ``ms`` of CPU (however loaded the machine is)."""
    start = _read(pid).cpu_ms
    end = time.monotonic() + deadline_s
    while _read(pid).cpu_ms - start < ms and time.monotonic() < end:
        time.sleep(0.02)


def test_a_busy_process_of_the_session_is_named_with_the_cpu_it_took():
    busy = subprocess.Popen([sys.executable, "-c", SPIN])
    idle = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        time.sleep(0.2)                               # both started
        with watch() as seen:
            _until_used(busy.pid, 100)
        assert len(seen.busy) == 1, seen.busy
        assert seen.busy[0].startswith(f"pid {busy.pid} ({sys.executable} -c x = 0 while ")
        assert "ms of CPU during the block's" in seen.busy[0]
        with watch(enabled=False) as off:             # a phone's block: not this machine's
            _until_used(busy.pid, 50)
        assert off.busy == []
        # The process serving the block's runner (the python runner's fork server, which
        # forks the run and waits for it) is the runner's own, not work beside it.
        with watch(serving=(busy.pid,)) as served:
            _until_used(busy.pid, 100)
        assert served.busy == []
    finally:
        for p in (busy, idle):
            p.kill()
            p.wait()
