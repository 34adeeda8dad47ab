"""``pytest-sme2 fake-phone``: the emulated arm64 phone users put in their CI, served by the real
command against a private adb server: its serial first, a phone adb lists as ready, our runner
run on it through the bundled loader with kernels sampled, and nothing left behind after
SIGTERM. Also what a phone that refuses our runner says."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_sme2.analysis.kernel_sample import read_kernel_sample_csv
from pytest_sme2.devices.android import open_android
from pytest_sme2.errors import Sme2Error
from pytest_sme2.runners import RunnerError, RunRequest, parse_runner_spec
from tests.fakes.android import AdbServer, arm64_phone_config, connect_phone, release_phone

CLI = [sys.executable, "-c", "import sys; from pytest_sme2.cli import main; sys.exit(main())"]


@pytest.fixture
def served(adb_server: AdbServer, tmp_path: Path):
    arm64_phone_config()                        # skips (fails in CI) without the QEMU target
    env = {**os.environ, "TMPDIR": str(tmp_path)}   # the fixture set the adb server port
    proc = subprocess.Popen([*CLI, "fake-phone"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        serial = proc.stdout.readline().strip()
        assert serial.startswith("127.0.0.1:"), (serial, proc.stderr.read())
        yield proc, serial, tmp_path
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(30)
        for pipe in (proc.stdout, proc.stderr):
            pipe.close()


def test_the_fake_phone_command_serves_until_sigterm_and_leaves_nothing(served, adb_server,
                                                                        toy_export):
    proc, serial, tmp = served
    assert adb_server.states().get(serial) == "device"
    second = proc.stdout.readline()
    assert "with SME2" in second and f"--device android:{serial}" in second
    dev = open_android(f"android:{serial}", session_id="fp1")
    facts = dev.facts()
    assert facts.emulated is True and facts.sme2 is True     # never a real phone's key
    assert dev.target == "aarch64-linux-gnu" and dev.samples_kernels
    runner = parse_runner_spec("native").make(target=dev.target)
    req = RunRequest(pte=toy_export.pte, etdump=tmp / "o" / "on.etdump", inputs=toy_export.inputs,
                     runs=2, warmup=0, timeout_s=300, kernel_sample=tmp / "o" / "on.csv")
    out = dev.run(runner, req)
    sampled = read_kernel_sample_csv(out.kernel_sample)
    assert sampled.samples_total > 0
    assert any(k.isa_family == "SME2" for k in sampled.sampled), sampled.kernels
    dev.cleanup()

    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0
    deadline = time.monotonic() + 10
    while serial in adb_server.states() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert serial not in adb_server.states()
    assert not list(tmp.glob("pytest-sme2-fake-phone-*"))     # its folder is gone


@pytest.mark.parametrize("flag,said,hwcaps", [
    ("--no-sme2", "without SME2", (False, False)),
    # the Snapdragon 8 Elite Gen 5's class: SME, SME2 hidden from every program
    ("--sme1", "with SME but no SME2", (True, False)),
])
def test_a_phone_without_sme2_has_no_sme2(adb_server, tmp_path, flag, said, hwcaps):
    arm64_phone_config()
    env = {**os.environ, "TMPDIR": str(tmp_path)}   # the fixture set the adb server port
    proc = subprocess.Popen([*CLI, "fake-phone", flag], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, stdin=subprocess.DEVNULL)
    try:
        serial = proc.stdout.readline().strip()
        assert f"{said})" in proc.stdout.readline()
        facts = open_android(f"android:{serial}", session_id="fp2").facts()
        assert (facts.sme, facts.sme2) == hwcaps
    finally:
        proc.send_signal(signal.SIGINT)
        rc = proc.wait(30)
        proc.stdout.close()
    assert rc == 0


_EXEC = 'case "$1" in */*) ;; *) exec "$@" ;; esac\n'


def _native_run_error(adb_server, tmp_path, toy_export, session_id, config=None,
                      exec_after: str = "") -> str:
    """The one line the native runner's run on a fake phone fails with (a RunnerError when the
    runner started; ``exec_after``: shell the phone's exec wrapper runs before it executes a
    path, to refuse or kill it there)."""
    phone = connect_phone(adb_server, tmp_path / "p", config or arm64_phone_config())
    try:
        if exec_after:
            fake_exec = phone.root / "bin/fake-exec"
            fake_exec.write_text(fake_exec.read_text().replace(_EXEC, _EXEC + exec_after))
        dev = open_android(f"android:{phone.serial}", session_id=session_id)
        runner = parse_runner_spec("native").make(target=dev.target)
        req = RunRequest(pte=toy_export.pte, etdump=tmp_path / "o" / "x.etdump", runs=1,
                         warmup=0, timeout_s=120)
        with pytest.raises(RunnerError if exec_after else Sme2Error) as e:
            dev.run(runner, req)
        return str(e.value)
    finally:
        release_phone(phone)


def test_a_loader_the_phone_refuses_is_one_line_with_the_fallback(adb_server, tmp_path,
                                                                  toy_export):
    """A phone whose /data/local/tmp cannot execute the loader (SELinux, noexec): one line
    naming the step and the fallback."""
    # The phone refuses to execute anything named like the glibc loader.
    msg = _native_run_error(adb_server, tmp_path, toy_export, "lf1", exec_after=(
        'case "$1" in *ld-linux-aarch64.so.1) echo "/system/bin/sh: $1: Permission '
        'denied" >&2; exit 126 ;; esac\n'))
    assert "\n" not in msg and "bundled glibc loader could not start" in msg
    assert "--runner NAME=/path/to/executor_runner" in msg and "SELinux" in msg


def test_a_phone_that_kills_the_runner_says_by_which_signal(adb_server, tmp_path, toy_export):
    msg = _native_run_error(adb_server, tmp_path, toy_export, "ks1", exec_after="kill -9 $$\n")
    assert "was killed by SIGKILL on device" in msg


def test_a_push_that_runs_out_of_space_names_the_file(adb_server, tmp_path, toy_export):
    msg = _native_run_error(adb_server, tmp_path, toy_export, "ns1", arm64_phone_config(
        fail_push=r"libexecutorch_kernels_optimized"))
    assert "cannot push libexecutorch_kernels_optimized.so" in msg
    assert "No space left on device" in msg and "\n" not in msg
