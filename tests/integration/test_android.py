"""AndroidDevice against the REAL adb server (the one adbutils ships, on a private port) and a
fake phone (tests/fakes/adb_device.py) that runs commands on the host in a sandbox."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from pytest_sme2.runners.base import RunnerBase
from pytest_sme2.analysis.latency import e2e_per_run
from pytest_sme2.devices import DeviceError
from pytest_sme2.devices.android import device as android
from pytest_sme2.devices.android import CACHE_DIR, AndroidDevice, open_android
from pytest_sme2.devices.host import HostDevice
from pytest_sme2.readers.etdump import read_etdump
from pytest_sme2.runners import RunnerError, RunnerInfo, RunRequest
from pytest_sme2.runners.python import PythonRunner
from pytest_sme2.readers.tensorfile import read_tensors, write_tensors
from tests.fakes.adb_device import FakeAndroidConfig
from tests.fakes.android import FakePhone, connect_phone, free_port, release_phone
from tests.fakes.etdumps import execute_run, make_etdump
from tests.needs import missing


SID = "t1"
SESSION = f"/data/local/tmp/pytest-sme2-{SID}"

# A stand-in for executor_runner: parses its flags, checks the model it was given exists, then
# runs BODY. The crafted ETDump travels as a "library" so LD_LIBRARY_PATH is exercised too.
SCRIPT = """#!/bin/sh
while [ $# -gt 0 ]; do
  case "$1" in
    --model_path) model=$2; shift ;;
    --etdump_path) etdump=$2; shift ;;
    --inputs) inputs=$2; shift ;;
    --outputs) outputs=$2; shift ;;
    --cpu_threads) threads=$2; shift ;;
  esac
  shift
done
[ -f "$model" ] || { echo "no model at $model" >&2; exit 2; }
echo "threads=$threads model=$model inputs=$inputs lib=$LD_LIBRARY_PATH pwd=$(pwd)"
"""
WRITE_ETDUMP = 'cp "$LD_LIBRARY_PATH/crafted.etdump" "$etdump"\n'


@dataclass
class ScriptRunner(RunnerBase):
    script: Path
    extra: list[Path] = field(default_factory=list)
    info: RunnerInfo = field(default_factory=lambda: RunnerInfo("fake", "test"))
    hwcap_mask: str | None = None

    def command(self, request: RunRequest) -> list[str]:
        argv = [str(self.script), "--model_path", str(request.pte), "--etdump_path",
                str(request.etdump), "--cpu_threads", str(request.threads)]
        if request.inputs:
            argv += ["--inputs", str(request.inputs)]
        if request.outputs:
            argv += ["--outputs", str(request.outputs)]
        return argv

    def device_files(self) -> list[Path]:
        return [self.script, *self.extra]


@pytest.fixture(autouse=True)
def _private_lock_dir(tmp_path_factory, monkeypatch):
    """Per-device lock files go to the test's temp folder, not the system's."""
    monkeypatch.setattr(android, "LOCK_DIR", tmp_path_factory.getbasetemp())


@pytest.fixture(scope="module")
def etdump_blob(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("blob") / "crafted.etdump"
    path.write_bytes(make_etdump([execute_run(1000 * i, [("Fully Connected (NC, F32) GEMM",
                                                          2000 + i)]) for i in range(4)]))
    return path


def _runner(tmp_path: Path, blob: Path, body: str = WRITE_ETDUMP,
            name: str = "runner.sh") -> ScriptRunner:
    script = tmp_path / "host-runner" / name
    script.parent.mkdir(exist_ok=True)
    script.write_text(SCRIPT + body)
    script.chmod(0o755)
    return ScriptRunner(script, [blob])


def _request(tmp_path: Path, pte_name: str = "m.pte", timeout: float = 20,
             threads: int = 1, **kw) -> RunRequest:
    models = tmp_path / "models"
    models.mkdir(exist_ok=True)
    pte = models / pte_name
    pte.write_bytes(b"PTE" + pte_name.encode())
    return RunRequest(pte=pte, etdump=tmp_path / "out" / "fake.etdump", threads=threads,
                      runs=3, warmup=1, timeout_s=timeout, **kw)


def _open(phone: FakePhone, **kw) -> AndroidDevice:
    return open_android(f"android:{phone.serial}", session_id=SID, **kw)


def _session(phone: FakePhone) -> Path:
    return phone.root / SESSION.lstrip("/")


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def _msg(excinfo: pytest.ExceptionInfo) -> str:
    msg = str(excinfo.value)
    assert "\n" not in msg
    return msg


# -- facts -------------------------------------------------------------------------------------

def test_facts_of_an_sme2_phone(fake_android):
    facts = _open(fake_android).facts()
    assert (facts.kind, facts.serial, facts.model, facts.cpu, facts.abi) == (
        "android", fake_android.serial, "Fake SME2 Phone", "Mediatek MT6993", "arm64-v8a")
    assert (facts.os, facts.kernel, facts.cores) == (
        "Android 16 (SDK 36)", "6.6.50-android15-8-g0123456789ab", 8)
    assert (facts.sme, facts.sme2, facts.executorch) == (True, True, "1.5.1")
    x = facts.extra
    assert x["sme_source"] == "auxv" and x["hwcap2"] == hex((1 << 37) | (1 << 23) | 2)
    assert x["clusters"] == [
        {"name": "little", "cpus": [0, 1, 2, 3], "max_khz": 2000000, "capacity": 486},
        {"name": "mid", "cpus": [4, 5, 6], "max_khz": 3250000, "capacity": 790},
        {"name": "big", "cpus": [7], "max_khz": 4210000, "capacity": 1024}]
    assert x["big_cores"] == [7] and x["governor"] == "schedutil"
    assert x["cpus_allowed"] == list(range(8))
    assert x["thermal_c"] == {"cpu-0-0": 41.2, "cpu-1-0": 43.5, "battery": 30.1}
    assert (x["sdk"], x["board_platform"], x["manufacturer"]) == (36, "mt6993", "pytest-sme2")
    assert x["fingerprint"].startswith("pytest/fakephone/fake:16/")
    assert (facts.kind, facts.cpu, facts.abi, facts.sme2) == (
        "android", "Mediatek MT6993", "arm64-v8a", True)


def test_facts_of_a_phone_without_sme2(adb_server, tmp_path):
    phone = connect_phone(adb_server, tmp_path / "p", FakeAndroidConfig(sme2=False))
    try:
        facts = _open(phone).facts()
    finally:
        release_phone(phone)
    assert (facts.model, facts.cpu, facts.sme, facts.sme2) == ("Fake Phone", "QTI SM8650",
                                                                False, False)
    assert facts.extra["sme_source"] == "auxv" and facts.extra["hwcap2"] == "0x2"


def test_sme2_falls_back_to_cpuinfo_features_without_auxv(fake_android):
    (fake_android.root / "proc/self/auxv").unlink()
    facts = _open(fake_android).facts()
    assert (facts.sme, facts.sme2, facts.extra["sme_source"]) == (True, True, "cpuinfo")
    assert "hwcap2" not in facts.extra


def test_thermal_reads_current_temperatures(fake_android):
    dev = _open(fake_android)
    assert dev.thermal() == {"cpu-0-0": 41.2, "cpu-1-0": 43.5, "battery": 30.1}
    (fake_android.root / "sys/class/thermal/thermal_zone1/temp").write_text("51234\n")
    assert dev.thermal()["cpu-1-0"] == 51.234


def test_thermal_state_reads_zones_cooling_devices_and_the_thermal_status(adb_server,
                                                                          tmp_path):
    config = FakeAndroidConfig(thermal_status=0, thermal_steps={
        "cooling:thermal-cpufreq-4": (3, 0), "status": (2, 0)})
    phone = connect_phone(adb_server, tmp_path / "p", config)
    try:
        dev = _open(phone)
        first, second = dev.thermal_state(), dev.thermal_state()
    finally:
        release_phone(phone)
    assert first.cpu_c == {"cpu-0-0": 41.2, "cpu-1-0": 43.5}     # the battery zone is out
    assert first.throttling == ("thermal status 2 (moderate)", "thermal-cpufreq-4 at state 3")
    assert second.throttling == () and second.cool(44.0) and not second.cool(43.0)
    assert phone.device.thermal_reads == 2


def test_the_hold_waits_for_a_hot_phone_to_cool(adb_server, tmp_path):
    from pytest_sme2.devices.thermal import CooldownPolicy, hold

    config = FakeAndroidConfig(thermal_steps={"cpu-1-0": (52000, 47000, 44000, 39000, 30000)})
    phone = connect_phone(adb_server, tmp_path / "p", config)
    said: list[str] = []
    try:
        rec = hold(_open(phone), CooldownPolicy(42.0, 20.0), said.append,
                   sleep=lambda s: None)          # the phone cools per look, not per second
    finally:
        release_phone(phone)
    assert rec.applied and not rec.hot and rec.polls == 4 == phone.device.thermal_reads
    # Cool once the hottest CPU zone is: cpu-1-0 fell to 39, cpu-0-0 stayed at 41.2.
    assert (rec.first_zone, rec.first_c, rec.start_zone, rec.start_c) == (
        "cpu-1-0", 52.0, "cpu-0-0", 41.2)
    assert said == ["cooling down: cpu-1-0 52.0 °C > 42 °C; waiting up to 20 s"]


# -- choosing the device -----------------------------------------------------------------------

def test_no_device_attached(adb_server):
    with pytest.raises(DeviceError) as ei:
        open_android("android")
    assert _msg(ei) == ("no Android device is attached (adb lists none); connect one or use "
                        "--device host")


def test_the_only_device_is_chosen_without_a_serial(fake_android):
    assert open_android("android").serial == fake_android.serial


def test_two_devices_and_no_serial_lists_them(adb_server, fake_android, tmp_path):
    other = connect_phone(adb_server, tmp_path / "other")
    try:
        with pytest.raises(DeviceError) as ei:
            open_android("android")
    finally:
        release_phone(other)
    serials = sorted([fake_android.serial, other.serial])
    listed = _msg(ei).split("(")[1].split(")")[0].split(", ")
    assert sorted(listed) == serials
    assert _msg(ei) == (f"more than one Android device is attached ({', '.join(listed)}); "
                        "pick one with --device android:SERIAL, or use them all with "
                        "--device 'android:*'")


def test_unknown_serial_lists_attached(fake_android):
    with pytest.raises(DeviceError) as ei:
        open_android("android:NOPE123")
    assert _msg(ei) == f"Android device 'NOPE123' is not attached; attached: {fake_android.serial}"


@pytest.mark.parametrize("config,state,said", [
    (FakeAndroidConfig(unauthorized=True), "unauthorized",
     "is unauthorized: unlock it and accept the 'Allow USB debugging?' RSA key prompt, then "
     "run again"),
    (FakeAndroidConfig(silent=True), "offline",
     "is offline: reconnect it (replug the cable or run `adb reconnect offline`) and run "
     "again")])
def test_a_device_adb_cannot_use_says_what_to_do(adb_server, tmp_path, config, state, said):
    phone = connect_phone(adb_server, tmp_path / "p", config, state=state)
    try:
        with pytest.raises(DeviceError) as ei:
            _open(phone)
    finally:
        release_phone(phone)
    assert _msg(ei) == f"Android device {phone.serial} {said}"


def test_device_on_an_explicit_adb_server(fake_android, adb_server, monkeypatch):
    monkeypatch.setenv("ANDROID_ADB_SERVER_PORT", str(free_port()))   # must not be used
    dev = open_android(f"android:{fake_android.serial}@127.0.0.1:{adb_server.port}")
    assert dev.facts().model == "Fake SME2 Phone"


def test_no_phone_and_no_adb_server_is_one_line_without_a_traceback(tmp_path):
    """Issue 32, item 3: the README's command with no phone and no adb server running. adbutils
    leaks the socket of its first, failed connect (a ResourceWarning that the repository's
    filterwarnings = error turns into a printed traceback): we start the server ourselves."""
    import subprocess
    import sys

    from tests.fakes.android import AdbServer

    server = AdbServer(tmp_path / "adb")          # a private port, not started
    server.home.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANDROID_", "ADBUTILS_"))}
    env.update(server.env, PYTHONDEVMODE="1")     # -X dev: every ResourceWarning shows
    try:
        proc = subprocess.run([sys.executable, "-m", "pytest", "benchmarks", "-q", "-k",
                               "toy_cnn", "--device", "android", "-p", "no:cacheprovider"],
                              cwd=Path(__file__).parents[2], env=env, capture_output=True,
                              text=True, timeout=120, stdin=subprocess.DEVNULL)
    finally:
        server.stop()                             # the server our code started
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out and "ResourceWarning" not in out, out
    assert "Exception ignored" not in out and "daemon" not in out, out
    assert out.strip() == ("ERROR: no Android device is attached (adb lists none); connect one "
                           "or use --device host"), out
    assert proc.returncode == 4


def test_an_adb_server_that_cannot_start_is_one_line(tmp_path, monkeypatch):
    """Starting the local server is ours now: adb's own reason, or the missing binary, in one
    line (and no socket left open: warnings are errors here)."""
    fake = tmp_path / "adb"
    fake.write_text("#!/bin/sh\necho 'adb: cannot bind to 127.0.0.1: Address in use' >&2\n"
                    "exit 1\n")
    fake.chmod(0o755)
    port = free_port()
    monkeypatch.setenv("ANDROID_ADB_SERVER_PORT", str(port))
    monkeypatch.delenv("ANDROID_ADB_SERVER_HOST", raising=False)
    monkeypatch.setenv("ADBUTILS_ADB_PATH", str(fake))
    with pytest.raises(DeviceError) as ei:
        open_android("android")
    assert _msg(ei) == (f"cannot start the adb server at 127.0.0.1:{port} (adb: cannot bind to "
                        "127.0.0.1: Address in use); is adb installed and working "
                        "(`adb devices`)?")
    monkeypatch.setenv("ADBUTILS_ADB_PATH", str(tmp_path / "no-adb"))
    with pytest.raises(DeviceError) as ei:
        open_android("android")
    assert _msg(ei).startswith(f"cannot start the adb server on port {port} ([Errno 2] No such "
                               "file or directory")


def test_unreachable_adb_server(adb_server):
    port = free_port()
    with pytest.raises(DeviceError) as ei:
        open_android(f"android:X@127.0.0.1:{port}")
    assert _msg(ei) == (f"cannot reach the adb server at 127.0.0.1:{port} (Connection refused); "
                        f"start it there with `adb -P {port} start-server` (on loopback behind "
                        "an SSH tunnel: docs/android.md) or fix --device")


# -- running -----------------------------------------------------------------------------------

def test_full_run_pushes_runs_pinned_and_pulls_a_valid_etdump(fake_android, tmp_path,
                                                               etdump_blob):
    inputs = tmp_path / "inputs.bin"
    write_tensors(inputs, [np.arange(6, dtype=np.float32).reshape(2, 3)])
    req = _request(tmp_path, threads=2, inputs=inputs)
    req.etdump.parent.mkdir(parents=True)
    req.etdump.write_bytes(b"stale")
    out = _open(fake_android).run(_runner(tmp_path, etdump_blob), req)
    assert out.etdump == req.etdump and req.etdump.read_bytes() == etdump_blob.read_bytes()
    events = read_etdump(req.etdump)
    assert events.equals(read_etdump(etdump_blob)) and len(events) > 0
    # device paths, not sandbox paths, reached the runner; the libraries' folder is its cwd
    lib = next(p for p in fake_android.device.sends if p.endswith("/runner.sh")).rsplit("/", 1)[0]
    model = next(p for p in fake_android.device.sends if p.endswith("/m.pte"))
    ins = next(p for p in fake_android.device.sends if p.endswith("/inputs.bin"))
    assert out.stdout == f"threads=2 model={model} inputs={ins} lib={lib} pwd={lib}\n"
    assert out.stderr == "" and out.wall_s > 0
    assert fake_android.device.sends == [f"{lib}/runner.sh", f"{lib}/crafted.etdump", model, ins,
                                         f"{ins}.json"]
    # The runner and the program in the cache folder kept between sessions, the inputs in the
    # session folder.
    assert lib.startswith(f"{CACHE_DIR}/runner-") and model.startswith(f"{CACHE_DIR}/model-")
    assert ins.startswith(SESSION + "/")
    assert fake_android.device.taskset_log == ["f0"]   # 2 threads: the big core + 3 mid cores
    run_cmd = fake_android.device.commands[-1]
    assert (f"LD_LIBRARY_PATH={lib} timeout -k 2 20 sh -c 'echo $$ > {SESSION}/out/runner.pid; "
            f"exec taskset f0 \"$@\"' sh {lib}/runner.sh") in run_cmd
    assert fake_android.device.recvs[-1] == f"{SESSION}/out/fake.etdump"
    assert os.access(fake_android.root / lib.lstrip("/") / "runner.sh", os.X_OK)


def test_second_run_pushes_nothing_when_hashes_match(fake_android, tmp_path, etdump_blob):
    dev, runner = _open(fake_android), _runner(tmp_path, etdump_blob)
    req = _request(tmp_path)
    dev.run(runner, req)
    assert len(fake_android.device.sends) == 3
    dev.run(runner, req)
    assert len(fake_android.device.sends) == 3            # nothing transferred again
    req.pte.write_bytes(b"a new model")
    dev.run(runner, req)
    assert len(fake_android.device.sends) == 4            # only the changed model
    assert fake_android.device.sends[-1].endswith("/m.pte")
    # a program cut short on the device (its folder is named by its hash: checked by size)
    remote_model = fake_android.device.sends[-1]
    (fake_android.root / remote_model.lstrip("/")).write_bytes(b"a new")
    dev.run(runner, req)
    assert fake_android.device.sends[-1] == remote_model and len(fake_android.device.sends) == 5
    # a file damaged on the device no longer matches its hash: pushed again
    remote_script = fake_android.device.sends[0]
    (fake_android.root / remote_script.lstrip("/")).write_text("#!/bin/sh\nexit 9\n")
    dev.run(runner, req)
    assert fake_android.device.sends[-1] == remote_script and len(fake_android.device.sends) == 6


def test_a_second_session_pushes_the_program_again_never(fake_android, tmp_path, etdump_blob):
    """The program is kept in the device's cache: a new session (a new session folder, the
    old one removed) pushes nothing."""
    runner, req = _runner(tmp_path, etdump_blob), _request(tmp_path)
    first = _open(fake_android)
    first.run(runner, req)
    assert first.cleanup()
    sent = len(fake_android.device.sends)
    second = open_android(f"android:{fake_android.serial}", session_id="second")
    second.run(runner, req)
    assert fake_android.device.sends[sent:] == []


def test_a_push_the_phone_has_no_room_for_is_one_line_naming_both_sizes(adb_server, tmp_path,
                                                                         etdump_blob):
    phone = connect_phone(adb_server, tmp_path / "p", FakeAndroidConfig(free_kb=1))
    req = _request(tmp_path)
    req.pte.write_bytes(b"x" * 5000)
    try:
        with pytest.raises(DeviceError) as ei:
            _open(phone).run(_runner(tmp_path, etdump_blob), req)
    finally:
        release_phone(phone)
    assert _msg(ei).startswith(f"device {phone.serial} has 1.0 KB free in /data/local/tmp and "
                               "this run must push ")
    assert "KB (" in _msg(ei) and not any(p.endswith("/m.pte") for p in phone.device.sends)


def test_outputs_are_pulled_with_their_sidecar(fake_android, tmp_path, etdump_blob):
    body = WRITE_ETDUMP + 'cp "$inputs" "$outputs" && cp "$inputs.json" "$outputs.json"\n'
    inputs = tmp_path / "inputs.bin"
    write_tensors(inputs, [np.full((2, 2), 7, dtype=np.float32)])
    req = _request(tmp_path, inputs=inputs, outputs=tmp_path / "out" / "outputs.bin")
    _open(fake_android).run(_runner(tmp_path, etdump_blob, body), req)
    [arr] = read_tensors(req.outputs)
    assert arr.shape == (2, 2) and float(arr.sum()) == 28.0


def test_runner_exit_status_and_stderr_tail(fake_android, tmp_path, etdump_blob):
    body = 'echo "loading" >&2; echo "Error: model is corrupt" >&2; exit 3\n'
    with pytest.raises(RunnerError) as ei:
        _open(fake_android).run(_runner(tmp_path, etdump_blob, body), _request(tmp_path))
    expected = (f"runner 'fake' on m.pte exited with status 3 on device {fake_android.serial}; "
                "stderr: loading | Error: model is corrupt")
    assert _msg(ei) == expected or _msg(ei).startswith(expected + "; ")   # + explainer hint


def test_known_runner_failure_is_explained(fake_android, tmp_path, etdump_blob):
    body = "echo \"ERROR: unknown command line flag 'etdump_path'\" >&2; exit 1\n"
    with pytest.raises(RunnerError) as ei:
        _open(fake_android).run(_runner(tmp_path, etdump_blob, body), _request(tmp_path))
    assert _msg(ei) == ("runner 'fake' on m.pte was built without the event tracer "
                        "(EXECUTORCH_ENABLE_EVENT_TRACER=ON needed) (exited with status 1 on "
                        f"device {fake_android.serial}); stderr: ERROR: unknown command line "
                        "flag 'etdump_path'")


def test_foreign_architecture_binary_is_refused_before_pushing(fake_android, tmp_path):
    from pytest_sme2.runners import binary

    host_tool = Path("/bin/true").resolve()
    if binary.elf_machine(host_tool) in (None, "aarch64"):
        pytest.skip("needs a non-arm64 host binary")
    runner = binary.BinaryRunner("mine", host_tool)
    with pytest.raises(RunnerError) as ei:
        _open(fake_android).run(runner, _request(tmp_path))
    assert _msg(ei) == (f"runner 'mine': {host_tool} is an {binary.elf_machine(host_tool)} "
                        "binary and the device is aarch64")
    assert fake_android.device.sends == []


def test_runner_killed_by_a_signal(fake_android, tmp_path, etdump_blob):
    with pytest.raises(RunnerError) as ei:
        _open(fake_android).run(_runner(tmp_path, etdump_blob, "kill -SEGV $$\n"),
                                _request(tmp_path))
    # the device's shell reports the crash on stderr, in its own words
    assert _msg(ei).startswith(f"runner 'fake' on m.pte was killed by SIGSEGV on device "
                               f"{fake_android.serial}; stderr: ")
    assert "Segmentation fault" in _msg(ei)


def test_hung_runner_is_killed_on_the_device_at_the_limit(fake_android, tmp_path, etdump_blob):
    t0 = time.monotonic()
    with pytest.raises(RunnerError) as ei:
        _open(fake_android).run(_runner(tmp_path, etdump_blob, "sleep 60\n"),
                                _request(tmp_path, timeout=1))
    assert time.monotonic() - t0 < 8
    assert _msg(ei) == (f"runner 'fake' on m.pte: no result within 1 s on device "
                        f"{fake_android.serial}; killed (raise --sme2-timeout or lower --runs)")
    assert "timeout -k 2 1 " in fake_android.device.commands[-1]


def test_missing_etdump_is_an_error_and_a_stale_one_is_never_pulled(fake_android, tmp_path,
                                                                     etdump_blob):
    dev, req = _open(fake_android), _request(tmp_path)
    dev.run(_runner(tmp_path, etdump_blob), req)             # leaves out/fake.etdump behind
    with pytest.raises(RunnerError) as ei:
        dev.run(_runner(tmp_path, etdump_blob, "true\n", name="quiet.sh"), req)
    assert _msg(ei) == (f"runner 'fake' on m.pte succeeded but wrote no ETDump at "
                        f"{SESSION}/out/fake.etdump on device {fake_android.serial} (was it "
                        "built with the event tracer?)")
    assert not req.etdump.exists()
    etdumps = [r for r in fake_android.device.recvs if r.endswith(".etdump")]
    assert etdumps == [f"{SESSION}/out/fake.etdump"]   # the first run's only


def test_connection_dropped_mid_run(adb_server, tmp_path, etdump_blob):
    phone = connect_phone(adb_server, tmp_path / "p", FakeAndroidConfig(drop_on=r"timeout -k"))
    try:
        dev = _open(phone)
        with pytest.raises(DeviceError) as ei:
            dev.run(_runner(tmp_path, etdump_blob), _request(tmp_path))
    finally:
        release_phone(phone)
    assert _msg(ei) == (f"device {phone.serial} disconnected during the run; reconnect it and "
                        "run again")


def test_push_refused_by_the_device(adb_server, tmp_path, etdump_blob):
    phone = connect_phone(adb_server, tmp_path / "p", FakeAndroidConfig(fail_push=r"\.pte$"))
    try:
        with pytest.raises(DeviceError) as ei:
            _open(phone).run(_runner(tmp_path, etdump_blob), _request(tmp_path))
    finally:
        release_phone(phone)
    remote = phone.device.sends[-1]
    assert remote.startswith(f"{CACHE_DIR}/model-") and remote.endswith("/m.pte")
    assert _msg(ei) == (f"cannot push m.pte to {remote} on device {phone.serial}: couldn't "
                        "create file: No space left on device; free space on /data/local/tmp "
                        "or check the device")


def test_invalid_taskset_mask_is_named(fake_android, tmp_path, etdump_blob):
    dev = _open(fake_android, taskset="f00")
    with pytest.raises(DeviceError) as ei:
        dev.run(_runner(tmp_path, etdump_blob), _request(tmp_path))
    assert _msg(ei) == (f"taskset mask 'f00' selects CPU 8-11 but device {fake_android.serial} "
                        "has 8 CPUs (0-7); fix --sme2-taskset")
    assert fake_android.device.sends == []


def test_user_mask_and_no_pinning(fake_android, tmp_path, etdump_blob):
    runner, req = _runner(tmp_path, etdump_blob), _request(tmp_path)
    _open(fake_android, taskset="0x30").run(runner, req)
    _open(fake_android, taskset=None).run(runner, req)
    assert fake_android.device.taskset_log == ["30"]
    assert "taskset" not in fake_android.device.commands[-1]


def test_host_only_runner_is_refused(fake_android, tmp_path):
    with pytest.raises(RunnerError) as ei:
        _open(fake_android).run(PythonRunner(), _request(tmp_path))
    assert _msg(ei) == ("runner 'python' runs only on the host (it is the ExecuTorch Python "
                        "runtime); use the 'native' runner or an executor_runner binary on a "
                        "remote device")


def test_shell_metacharacters_in_file_names_stay_quoted(fake_android, tmp_path, etdump_blob):
    name = "a b;$(touch x).pte"
    inputs = tmp_path / "in 'q' `id`.bin"
    write_tensors(inputs, [np.zeros(2, dtype=np.float32)])
    before = _files(fake_android.root)
    req = _request(tmp_path, pte_name=name, inputs=inputs)
    out = _open(fake_android).run(_runner(tmp_path, etdump_blob, name="run me;.sh"), req)
    model = next(p for p in fake_android.device.sends if p.endswith(name))
    assert f"model={model} " in out.stdout              # the script found the model by that name
    after = _files(fake_android.root)
    new = {p for p in after - before if p != "taskset.log"}
    ours = (SESSION.lstrip("/"), CACHE_DIR.lstrip("/"))
    assert new and all(p in ours or p.startswith((ours[0] + "/", ours[1] + "/")) for p in new)
    assert not any(Path(p).name == "x" for p in after)
    assert not (Path.cwd() / "x").exists()


def test_one_run_at_a_time_per_device(fake_android, tmp_path, etdump_blob):
    # Script bodies run unrewritten on the host: write beside the libraries, not to /data.
    body = ('echo "start $(date +%s.%N)" >> "$LD_LIBRARY_PATH/../runs.log"; sleep 0.4; '
            'echo "end $(date +%s.%N)" >> "$LD_LIBRARY_PATH/../runs.log"\n' + WRITE_ETDUMP)
    runner = _runner(tmp_path, etdump_blob, body)
    errors: list[BaseException] = []

    def one(i: int) -> None:
        try:
            req = _request(tmp_path / f"w{i}")
            _open(fake_android).run(runner, req)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    (tmp_path / "w0").mkdir(), (tmp_path / "w1").mkdir()
    threads = [threading.Thread(target=one, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    log = (fake_android.root / CACHE_DIR.lstrip("/") / "runs.log").read_text().split("\n")
    kinds = [ln.split()[0] for ln in log if ln]
    assert kinds == ["start", "end", "start", "end"]     # never interleaved


def test_cleanup_removes_only_the_session_folder(fake_android, tmp_path, etdump_blob):
    keep = fake_android.root / "data/local/tmp/users-own-file"
    keep.write_text("mine")
    dev = _open(fake_android)
    dev.run(_runner(tmp_path, etdump_blob), _request(tmp_path))
    assert _session(fake_android).is_dir()
    assert dev.cleanup() is True
    assert not _session(fake_android).exists() and keep.read_text() == "mine"


# -- the real native runner and a real model through the fake phone ------------------------------

@pytest.fixture(scope="module")
def native_binary(tmp_path_factory) -> Path:
    from pytest_sme2.runners import native

    try:
        return native.build_native_runner(tmp_path_factory.mktemp("native-cache"))
    except RunnerError as e:            # no cmake / compiler on this machine
        missing("a C++ toolchain for the native runner", str(e))


def test_native_runner_and_real_model_through_the_phone(fake_android, tmp_path, toy_export,
                                                        native_binary):
    from pytest_sme2.runners.native import NativeRunner

    runner = NativeRunner.from_build(native_binary)
    req = RunRequest(pte=toy_export.pte, etdump=tmp_path / "phone" / "native.etdump",
                     inputs=toy_export.inputs, outputs=tmp_path / "phone" / "out.bin",
                     runs=5, warmup=2, threads=2, timeout_s=60)
    out = _open(fake_android).run(runner, req)
    per_run = e2e_per_run(read_etdump(req.etdump), source=str(req.etdump))
    assert len(per_run) == req.executions and (per_run > 0).all()
    # every library went beside the binary, which found them there ($ORIGIN / LD_LIBRARY_PATH)
    sent = {Path(p).name for p in fake_android.device.sends}
    assert sent >= {"sme2_runner", "libexecutorch.so", "libexecutorch_backend_xnnpack.so",
                    "model.pte", "inputs.bin", "inputs.bin.json"}
    assert out.wall_s > 0
    # the same binary on the host gives the same outputs
    host_req = RunRequest(pte=toy_export.pte, etdump=tmp_path / "host" / "native.etdump",
                          inputs=toy_export.inputs, outputs=tmp_path / "host" / "out.bin",
                          runs=1, warmup=0, threads=1, timeout_s=60)
    host_req.outputs.parent.mkdir()
    HostDevice().run(runner, host_req)
    [phone_out], [host_out] = read_tensors(req.outputs), read_tensors(host_req.outputs)
    assert phone_out.shape == host_out.shape and np.allclose(phone_out, host_out)


@dataclass
class _TokenizerRunner(ScriptRunner):
    """A runner whose command names a data file of its own (a llama_main's tokenizer)."""

    tokenizer: Path = Path()

    def command(self, request: RunRequest) -> list[str]:
        return super().command(request) + ["--tokenizer_path", str(self.tokenizer)]

    def data_files(self) -> list[Path]:
        return [self.tokenizer]


def test_a_runners_data_file_is_pushed_and_named_by_its_device_path(fake_android, tmp_path,
                                                                     etdump_blob):
    """A llama_main's tokenizer reaches the phone: pushed into the runner's cached folder, and
    the command names it there, not by its host path."""
    tokenizer = tmp_path / "tok" / "tokenizer.model"
    tokenizer.parent.mkdir()
    tokenizer.write_text("vocab\n")
    script = tmp_path / "host-runner" / "runner.sh"
    script.parent.mkdir()
    script.write_text(SCRIPT.replace("    --cpu_threads) threads=$2; shift ;;\n",
                                     "    --cpu_threads) threads=$2; shift ;;\n"
                                     "    --tokenizer_path) tok=$2; shift ;;\n")
                      + '[ -f "$tok" ] || { echo "no tokenizer at $tok" >&2; exit 3; }\n'
                      + 'echo "tokenizer=$tok $(cat "$tok")"\n' + WRITE_ETDUMP)
    script.chmod(0o755)
    runner = _TokenizerRunner(script, [etdump_blob], tokenizer=tokenizer)
    out = _open(fake_android).run(runner, _request(tmp_path))
    lib = next(p for p in fake_android.device.sends if p.endswith("/runner.sh")).rsplit("/", 1)[0]
    assert f"{lib}/tokenizer.model" in fake_android.device.sends
    assert f"tokenizer={lib}/tokenizer.model vocab" in out.stdout
    assert str(tokenizer) not in fake_android.device.commands[-1]


def test_a_missing_data_file_is_one_line(fake_android, tmp_path, etdump_blob):
    runner = _TokenizerRunner(_runner(tmp_path, etdump_blob).script, [etdump_blob],
                              tokenizer=tmp_path / "gone.model")
    with pytest.raises(RunnerError) as ei:
        _open(fake_android).run(runner, _request(tmp_path))
    assert _msg(ei) == f"runner 'fake': {tmp_path / 'gone.model'} does not exist on the host"


# -- pinning proven (issue 38) -----------------------------------------------------------------

def test_the_runners_threads_affinity_is_read_and_checked(fake_android, tmp_path, etdump_blob):
    """The fake phone's kernel applies the mask: its /proc/<pid>/task/*/status say CPUs 4-7."""
    runner = _runner(tmp_path, etdump_blob, body="sleep 0.5\n" + WRITE_ETDUMP)
    _open(fake_android, taskset="f0").run(runner, _request(tmp_path))
    assert f"{SESSION}/out/affinity.txt" in fake_android.device.recvs


def test_a_mask_that_did_not_apply_fails_in_one_line(adb_server, tmp_path, etdump_blob):
    phone = connect_phone(adb_server, tmp_path / "p", FakeAndroidConfig(taskset_applies=False))
    runner = _runner(tmp_path, etdump_blob, body="sleep 0.5\n" + WRITE_ETDUMP)
    try:      # the adb server is the session's: a phone left connected is every later test's
        with pytest.raises(RunnerError) as ei:
            _open(phone, taskset="f0").run(runner, _request(tmp_path))
    finally:
        release_phone(phone)
    assert _msg(ei) == (f"runner 'fake' on device {phone.serial}: taskset mask f0 (CPUs "
                        "4,5,6,7) did not apply: its 1 thread(s) were allowed CPUs 0-7 "
                        "(/proc/<pid>/task/*/status); fix --sme2-taskset or pass none")
