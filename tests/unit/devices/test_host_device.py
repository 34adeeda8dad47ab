"""The host device runs real child processes; these runners misbehave on purpose."""

import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_sme2.runners.base import RunnerBase
from pytest_sme2.devices import DeviceError, open_device
from pytest_sme2.devices.host import HostDevice, stderr_tail
from pytest_sme2.runners import RunnerError, RunnerInfo, RunRequest


@dataclass
class ScriptRunner(RunnerBase):
    """Runs ``python -c SCRIPT ETDUMP``."""

    script: str
    info: RunnerInfo = RunnerInfo("fake", "test")
    hwcap_mask: str | None = None

    def command(self, request: RunRequest) -> list[str]:
        return [sys.executable, "-c", self.script, str(request.etdump)]


def _request(tmp_path: Path, timeout: float = 30) -> RunRequest:
    return RunRequest(pte=tmp_path / "m.pte", etdump=tmp_path / "out" / "r.etdump",
                      timeout_s=timeout)


def test_success_returns_fresh_etdump(tmp_path):
    req = _request(tmp_path)
    out = HostDevice().run(ScriptRunner("import sys; open(sys.argv[1],'wb').write(b'x');"
                                        "print('hi')"), req)
    assert out.etdump == req.etdump and out.stdout.strip() == "hi"


def test_stale_etdump_is_removed_before_the_run(tmp_path):
    req = _request(tmp_path)
    req.etdump.parent.mkdir(parents=True)
    req.etdump.write_bytes(b"old trace")
    with pytest.raises(RunnerError, match=r"runner 'fake' on m.pte succeeded but wrote no ETDump"):
        HostDevice().run(ScriptRunner("pass"), req)
    assert not req.etdump.exists()


def test_nonzero_exit_names_status_and_stderr_tail(tmp_path):
    script = "import sys; [print(f'line {i}', file=sys.stderr) for i in range(20)]; sys.exit(3)"
    with pytest.raises(RunnerError) as ei:
        HostDevice().run(ScriptRunner(script), _request(tmp_path))
    msg = str(ei.value)
    assert "exited with status 3" in msg and "line 19" in msg and "line 5" not in msg
    assert "\n" not in msg


def test_signal_is_named(tmp_path):
    script = "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"
    with pytest.raises(RunnerError, match="was killed by SIGSEGV"):
        HostDevice().run(ScriptRunner(script), _request(tmp_path))


def test_hang_is_killed_at_the_time_limit(tmp_path):
    with pytest.raises(RunnerError, match=r"no result within 1 s; killed"):
        HostDevice().run(ScriptRunner("import time; time.sleep(60)"), _request(tmp_path, 1))


def test_stderr_tail_keeps_last_lines_on_one_line():
    assert stderr_tail("a\n\nb\nc\n", lines=2) == "b | c"
    assert stderr_tail("") == "(no stderr)"


def test_host_facts_describe_this_machine():
    facts = HostDevice().facts()
    assert facts.kind == "host" and facts.cores >= 1 and facts.executorch == "1.5.1"
    if facts.abi == "x86_64":
        assert facts.sme2 is False  # x86 has no SME: a definite no, not "unknown"


@pytest.mark.parametrize("spec,msg", [("host:abc", "the host takes no serial"),
                                      ("phone", "unknown device kind 'phone'")])
def test_bad_device_spec(spec, msg):
    with pytest.raises(DeviceError, match=msg):
        open_device(spec)


