"""User executor_runner binaries: ELF architecture, path checks, upstream argv, failure hints."""

import hashlib
import re
import struct
import sys
from pathlib import Path

import pytest

from pytest_sme2.devices.host import HostDevice
from pytest_sme2.runners import RunnerError, RunRequest
from pytest_sme2.runners.binary import (BinaryRunner, detect_no_event_tracer, elf_machine,
                                        explain_failure, host_machine, normalize_machine)


def _elf(path: Path, machine: int, big_endian: bool = False, executable: bool = True) -> Path:
    """The first 20 bytes of an ELF64 header: magic, class, data, version, padding, type,
    machine. Enough for elf_machine; nothing could execute it."""
    order = ">" if big_endian else "<"
    head = b"\x7fELF" + bytes([2, 2 if big_endian else 1, 1, 0]) + bytes(8)
    path.write_bytes(head + struct.pack(order + "HH", 2, machine) + bytes(44))
    if executable:
        path.chmod(0o755)
    return path


def _foreign(tmp_path: Path) -> tuple[Path, str]:
    """An executable ELF of an architecture that is not this host's."""
    if host_machine() == "aarch64":
        return _elf(tmp_path / "runner_x86", 62), "x86_64"
    return _elf(tmp_path / "runner_arm64", 183), "aarch64"


def test_elf_machine_of_a_real_host_binary():
    true = Path("/bin/true").resolve()
    assert elf_machine(true) == host_machine()
    if host_machine() == "x86_64":
        assert elf_machine(true) == "x86_64"


@pytest.mark.parametrize("code,big,name", [(183, False, "aarch64"), (62, False, "x86_64"),
                                           (40, True, "arm"), (999, False, "elf-machine-999")])
def test_elf_machine_of_crafted_headers(tmp_path, code, big, name):
    assert elf_machine(_elf(tmp_path / "bin", code, big)) == name


@pytest.mark.parametrize("content", [b"#!/bin/sh\necho hi\n", b"\x7fELF", b""])
def test_non_elf_files_have_no_machine(tmp_path, content):
    p = tmp_path / "script"
    p.write_bytes(content)
    assert elf_machine(p) is None


@pytest.mark.parametrize("given,want", [("AMD64", "x86_64"), ("arm64", "aarch64"),
                                        ("arm64-v8a", "aarch64"), ("armeabi-v7a", "arm"),
                                        ("x86_64", "x86_64")])
def test_machine_names_are_normalized(given, want):
    assert normalize_machine(given) == want


def test_missing_binary_is_named(tmp_path):
    missing = tmp_path / "nope" / "executor_runner"
    with pytest.raises(RunnerError, match=re.escape(f"runner 'sme2-on': {missing} does not exist")):
        BinaryRunner("sme2-on", missing)


def test_not_executable_is_an_error(tmp_path):
    p = _elf(tmp_path / "executor_runner", 183, executable=False)
    with pytest.raises(RunnerError, match=r"is not executable"):
        BinaryRunner("sme2-on", p)


def test_missing_lib_dir_is_an_error(tmp_path):
    with pytest.raises(RunnerError, match=r"library folder .*libs does not exist"):
        BinaryRunner("r", Path("/bin/true"), lib_dir=tmp_path / "libs")


def test_foreign_architecture_on_host_names_both(tmp_path):
    path, arch = _foreign(tmp_path)
    runner = BinaryRunner("sme2-on", path, labels={"sme2": "on"})
    assert runner.machine == arch
    # its content, too: another build at the same path is another runner to the gate
    sha = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    assert runner.info.labels == {"path": str(path), "arch": arch, "sha256": sha, "sme2": "on"}
    with pytest.raises(RunnerError) as ei:
        runner.check_host()
    msg = str(ei.value)
    assert f"is an {arch} binary" in msg and f"this host is {host_machine()}" in msg
    runner.check_device("arm64-v8a" if arch == "aarch64" else "x86_64")  # fits its own kind


def test_host_binary_and_scripts_run_on_host(tmp_path):
    BinaryRunner("true", Path("/bin/true")).check_host()
    script = tmp_path / "runner.sh"
    script.write_text("#!/bin/sh\nexit 0\n")
    script.chmod(0o755)
    runner = BinaryRunner("script", script)
    assert runner.machine is None and runner.info.labels["arch"] == "script"
    runner.check_host()
    with pytest.raises(RunnerError, match="not an ELF executable"):
        runner.check_device("arm64-v8a")


def test_command_uses_upstream_flags_with_warmup_folded_in(tmp_path):
    runner = BinaryRunner("off", Path("/bin/true"))
    req = RunRequest(pte=Path("/d/m.pte"), etdump=Path("/d/r.etdump"), threads=2, runs=30,
                     warmup=5, inputs=Path("/d/in.bin"), outputs=Path("/d/out.bin"))
    assert runner.command(req) == ["/bin/true", "--model_path", "/d/m.pte",
                                   "--etdump_path", "/d/r.etdump", "--num_executions", "35",
                                   "--cpu_threads", "2"]
    assert runner.takes_tensor_files is False


def test_device_files_are_binary_then_libraries(tmp_path):
    libs = tmp_path / "libs"
    libs.mkdir()
    for name in ("libb.so", "liba.so.1", "README"):
        (libs / name).write_text("x")
    runner = BinaryRunner("r", Path("/bin/true"), lib_dir=libs)
    assert runner.device_files() == [Path("/bin/true"), libs / "liba.so.1", libs / "libb.so"]
    assert BinaryRunner("r", Path("/bin/true")).device_files() == [Path("/bin/true")]


GFLAGS_NO_TRACER = "ERROR: unknown command line flag 'etdump_path'\n"


@pytest.mark.parametrize("stderr,expected", [
    (GFLAGS_NO_TRACER, "was built without the event tracer "
                       "(EXECUTORCH_ENABLE_EVENT_TRACER=ON needed)"),
    ("ERROR: unknown command line flag 'cpu_threads'", "does not accept the flag --cpu_threads"),
    ("ERROR: unknown command line flag 'ignore_eos'", "does not accept the flag --ignore_eos (a "
     "llama_main older than ExecuTorch 1.2, which added it)"),
    ("E 00:00:00.1 executorch:method.cpp:88] Backend XnnpackBackend is not registered.",
     "was built without the XNNPACK delegate"),
    ("E executorch:method.cpp:824] Missing operator: [3] aten::hardswish.out",
     "has no kernel for operator aten::hardswish.out"),
    ("E executorch:executor_runner.cpp:240] Failed to open ETDump file at /x/y.etdump.",
     "could not create its ETDump file"),
    ("Segmentation fault", None),
])
def test_explain_failure(stderr, expected):
    got = explain_failure(stderr)
    assert (got is None) if expected is None else (expected in got)


def test_detect_no_event_tracer_only_for_etdump_path():
    assert detect_no_event_tracer("I log\n" + GFLAGS_NO_TRACER)
    assert not detect_no_event_tracer("ERROR: unknown command line flag 'warmup'")


FAKE_UPSTREAM = """#!{python}
import sys
args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
assert set(args) == {{"--model_path", "--etdump_path", "--num_executions", "--cpu_threads"}}, args
open(args["--etdump_path"], "wb").write(args["--num_executions"].encode())
"""


def test_host_device_runs_a_binary_runner(tmp_path):
    script = tmp_path / "executor_runner"
    script.write_text(FAKE_UPSTREAM.format(python=sys.executable))
    script.chmod(0o755)
    req = RunRequest(pte=tmp_path / "m.pte", etdump=tmp_path / "out" / "r.etdump", runs=4,
                     warmup=2, timeout_s=60)
    out = HostDevice().run(BinaryRunner("fake-upstream", script), req)
    assert out.etdump.read_bytes() == b"6"  # warm-up + timed runs in one --num_executions
