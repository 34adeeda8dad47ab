"""The host device's time limit waited out for real: what the runner started dies with it (the
rest of HostDevice: tests/unit/devices/test_host_device.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_sme2.devices.host import HostDevice
from pytest_sme2.runners import RunnerError
from tests.unit.devices.test_host_device import ScriptRunner, _request


# waits out a 2 s time limit
def test_timeout_kills_what_the_runner_started(tmp_path):
    marker = tmp_path / "child.pid"
    script = ("import subprocess, sys, time; "
              f"p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
              f"open({str(marker)!r}, 'w').write(str(p.pid)); time.sleep(60)")
    with pytest.raises(RunnerError, match=r"raise --sme2-timeout or lower --runs"):
        HostDevice().run(ScriptRunner(script), _request(tmp_path, 2))
    import time
    pid = int(marker.read_text())
    time.sleep(0.2)
    status = Path(f"/proc/{pid}/status")
    # Gone, or a zombie waiting for init to reap it: either way it no longer runs.
    assert not status.exists() or "\nState:\tZ" in status.read_text()
