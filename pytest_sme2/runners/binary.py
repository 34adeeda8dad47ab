"""A user's own upstream-compatible ``executor_runner`` build, e.g. one with SME2 on and one with
it off. Only upstream flags are passed (``--model_path --etdump_path --num_executions
--cpu_threads``). Upstream has no warm-up flag, so warm-up runs are simply the first
``warmup`` of ``warmup + runs`` executions: the ETDump holds them all and the analysis drops the
first ``warmup``, as for the other runners. Upstream fills inputs with ones and has no outputs
file in our format, so ``RunRequest.inputs``/``outputs`` are not passed (``takes_tensor_files``
is False: callers that compare outputs must skip such runners)."""

from __future__ import annotations

import os
import platform
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path

from pytest_sme2._util.fsutil import file_sha256
from pytest_sme2.runners.base import RunnerBase, RunnerError, RunRequest
from pytest_sme2.results.device import RunnerInfo
from pytest_sme2.analysis.llm_observer import parse_observer

# ELF e_machine values (System V gABI) for the architectures a benchmark binary can have.
ELF_MACHINES = {3: "x86", 8: "mips", 40: "arm", 62: "x86_64", 183: "aarch64", 243: "riscv"}
_MACHINE_ALIASES = {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64", "armv8l": "aarch64",
                    "i386": "x86", "i686": "x86"}


def normalize_machine(name: str) -> str:
    """``platform.machine()``, ``uname -m`` and ABI spellings mapped to the ELF names above."""
    n = name.strip().lower()
    if n.startswith("armv7") or n == "armeabi-v7a":
        return "arm"
    if n == "arm64-v8a":
        return "aarch64"
    return _MACHINE_ALIASES.get(n, n)


def elf_machine(path: Path) -> str | None:
    """Architecture of an ELF file from its header (e.g. ``"aarch64"``, ``"x86_64"``), or None
    when the file is not ELF (a script). Unknown machine codes read ``"elf-machine-<n>"``."""
    with open(path, "rb") as fh:
        head = fh.read(20)
    if len(head) < 20 or head[:4] != b"\x7fELF":
        return None
    # e_ident[EI_DATA] says the byte order of every later field; e_machine is at offset 18.
    order = {1: "<", 2: ">"}.get(head[5])
    if order is None:
        return None
    (code,) = struct.unpack_from(order + "H", head, 18)
    return ELF_MACHINES.get(code, f"elf-machine-{code}")


def host_machine() -> str:
    return normalize_machine(platform.machine())


# Upstream executor_runner declares --etdump_path only when built with the event tracer; gflags
# then rejects it with exactly this wording and exit status 1.
_UNKNOWN_FLAG = re.compile(r"unknown command line flag '([A-Za-z0-9_]+)'")
_MISSING_OP = re.compile(r"Missing operator: \[\d+\] (\S+)")


def detect_no_event_tracer(stderr: str) -> bool:
    return any(m.group(1) == "etdump_path" for m in _UNKNOWN_FLAG.finditer(stderr))


# Flags our llama_main runner passes that upstream's main.cpp gained late (read in its history).
_LLAMA_MAIN_FLAGS = {"ignore_eos": "ExecuTorch 1.2"}


def missing_etdump(stdout: str) -> str:
    """Why a runner that succeeded may have written no ETDump, for the one line that says so:
    built without the event tracer; a llama_main's own report (its PyTorchObserver line) is
    quoted, so what it measured is not lost."""
    from pytest_sme2.analysis.observed_generation import (  # pandas: only missing_etdump() needs it
        report_line)

    reports = parse_observer(stdout)
    if not reports:
        return "was it built with the event tracer?"
    return ("a llama_main built without the event tracer (ExecuTorch 1.1 or newer, "
            "EXECUTORCH_ENABLE_EVENT_TRACER=ON) writes none, and cannot be analysed per phase; "
            f"its own report: {report_line(reports[-1])}")


def explain_failure(stderr: str) -> str | None:
    """A known cause of an executor_runner failure, phrased to follow "runner 'X' ...", or None.
    Devices put it before the stderr tail, e.g. "runner 'sme2-on' was built without the event
    tracer (EXECUTORCH_ENABLE_EVENT_TRACER=ON needed): <stderr tail>"."""
    if detect_no_event_tracer(stderr):
        return "was built without the event tracer (EXECUTORCH_ENABLE_EVENT_TRACER=ON needed)"
    if m := _UNKNOWN_FLAG.search(stderr):
        if m.group(1) in _LLAMA_MAIN_FLAGS:
            return (f"does not accept the flag --{m.group(1)} (a llama_main older than "
                    f"{_LLAMA_MAIN_FLAGS[m.group(1)]}, which added it)")
        return (f"does not accept the flag --{m.group(1)} (not an upstream-compatible "
                "executor_runner, or an older one)")
    if "Backend XnnpackBackend is not registered" in stderr:
        return ("was built without the XNNPACK delegate (EXECUTORCH_BUILD_XNNPACK=ON, linked "
                "whole-archive, needed)")
    if m := _MISSING_OP.search(stderr):
        return (f"has no kernel for operator {m.group(1)} (link the optimized and quantized "
                "kernel libraries)")
    if "Failed to open ETDump file" in stderr:
        return "could not create its ETDump file (does the folder exist on the device?)"
    return None


@dataclass(frozen=True)
class BinaryRunner(RunnerBase):
    """An executor_runner binary given by path. ``lib_dir`` holds shared libraries it needs on a
    remote device (pushed beside it); ``labels`` describe the build, e.g. {"sme2": "on"}."""

    name: str
    path: Path
    lib_dir: Path | None = None
    labels: dict[str, str] = field(default_factory=dict)
    hwcap_mask: str | None = None              # see runners.base.Runner
    info: RunnerInfo = field(init=False)
    machine: str | None = field(init=False)   # ELF architecture, None for a script
    takes_tensor_files = False                 # inputs are ones; no outputs file
    preloads = True

    def __post_init__(self) -> None:
        # Absolute: a relative path without a slash ("./r" becomes "r") would be looked up on
        # PATH when executed, not where it was checked.
        path = Path(self.path).expanduser().absolute()
        if not path.exists():
            raise RunnerError(f"runner {self.name!r}: {path} does not exist; fix the path "
                              "given with --runner")
        if not path.is_file():
            raise RunnerError(f"runner {self.name!r}: {path} is not a file; give the path of "
                              "the executable with --runner")
        if not os.access(path, os.X_OK):
            raise RunnerError(f"runner {self.name!r}: {path} is not executable (chmod +x it)")
        if self.lib_dir is not None and not Path(self.lib_dir).is_dir():
            raise RunnerError(f"runner {self.name!r}: library folder {self.lib_dir} does not "
                              "exist")
        machine = elf_machine(path)
        # The executable's content: the gate tells another build at the same path apart.
        labels = {"path": str(path), "arch": machine or "script",
                  "sha256": file_sha256(path)[:16], **self.labels}
        object.__setattr__(self, "path", path)
        object.__setattr__(self, "machine", machine)
        object.__setattr__(self, "info", RunnerInfo(self.name, "binary", labels))

    def check_host(self) -> None:
        """Raise unless this binary can run on this machine: a foreign-architecture binary
        would only fail with "Exec format error". Scripts (non-ELF) are allowed."""
        host = host_machine()
        if self.machine is not None and self.machine != host:
            raise RunnerError(
                f"runner {self.name!r}: {self.path} is an {self.machine} binary and this host is "
                f"{host}; run it on a device of that architecture (e.g. --device android) "
                "or build it for the host")

    def check_device(self, abi: str) -> None:
        """Raise unless this binary fits a device of architecture ``abi`` (e.g. arm64-v8a)."""
        want = normalize_machine(abi)
        if self.machine is None:
            raise RunnerError(f"runner {self.name!r}: {self.path} is not an ELF executable; "
                              f"only ELF binaries can be pushed to a device")
        if self.machine != want:
            raise RunnerError(f"runner {self.name!r}: {self.path} is an {self.machine} binary "
                              f"and the device is {want}")

    def command(self, request: RunRequest) -> list[str]:
        if request.generation is not None:
            raise RunnerError(f"runner {self.name!r} is an executor_runner: it has no token loop "
                              "for an LLM generation; use the native or python runner, or a "
                              "llama_main (NAME=/path/llama_main,tokenizer=PATH)")
        data = ["--data_path", str(request.data)] if request.data else []  # upstream's flag
        return [str(self.path), "--model_path", str(request.pte), *data,
                "--etdump_path", str(request.etdump),
                "--num_executions", str(request.executions),  # warm-up included, see module doc
                "--cpu_threads", str(request.threads)]

    def device_files(self) -> list[Path]:
        libs = sorted(p for p in Path(self.lib_dir).iterdir()
                      if p.is_file() and ".so" in p.name) if self.lib_dir else []
        return [self.path, *libs]
