"""An emulated Arm64 Linux CPU with SME2: runners execute under QEMU user mode.

Spec: ``qemu`` (``-cpu max``: SME and SME2 on), ``qemu:CPU`` with any QEMU CPU model
(``qemu:neoverse-v1``, ``qemu:max,sme=off``), or ``qemu:CLASS`` for a device class QEMU has no
CPU model of: ``qemu:sme1`` is ``-cpu max`` with SME2 hidden from every process of the device
(the probe that reads its facts included), SME kept: SME without SME2, the class of the 2026
Snapdragon flagship (:data:`CLASSES`). Runners must be aarch64 Linux programs: the native
runner is cross-built for the target against the aarch64 ExecuTorch wheel
(``pytest-sme2 setup qemu`` provisions QEMU, the cross compiler and the wheel).

What it gives that no other device here can: SME2 code really runs, so which micro-kernels
executed is *proven* — every run is traced (QEMU's translated-code log, the guest's address map,
the libraries' symbol tables; :mod:`pytest_sme2.analysis.kernel_trace`) — and SME2 can be hidden
from one process of the same binary (:mod:`pytest_sme2.device_programs.hwcaps`). What it cannot
give: speed.
Emulated times say nothing about SME2's speed-up (SME2-on fp32 often runs *slower* than off), so
every result is marked ``emulated`` and speed-up thresholds are not asserted on it.

Each run preloads the same library (preload.c: clearing nothing unless the runner has a mask
or the device class hides a feature), so SME2-on and SME2-off processes differ in one environment
variable and nothing else. A hidden feature's code still runs under QEMU: a kernel of it that a
process whose hwcaps hide it executes is a dispatch bug, which the kernel trace catches
(:class:`pytest_sme2.analysis.kernels.DispatchBugError`).
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
import subprocess
import tempfile

from pytest_sme2.devices.base import DeviceBase, DeviceError, check_operators
from pytest_sme2.devices.facts import DeviceFacts, host_facts
from pytest_sme2.devices.kinds import QEMU
from pytest_sme2.devices.host import run_local, sample_kernels
from pytest_sme2.device_programs.hwcaps import (HWCAP2_CLEAR_ENV, MAPS_OUT_ENV, SAMPLE_OUT_ENV,
                                                SME2_FAMILY, mask_bits, mask_problem, sme_flags)
from pytest_sme2.errors import Sme2Error
from pytest_sme2.runners.base import Runner, RunnerError, RunOutcome, RunRequest
from pytest_sme2.device_programs import parse_probe
from pytest_sme2._util.versions import package_version
from pytest_sme2.emulation.tools import find_qemu, guest_env
from pytest_sme2.device_programs.build import build_target_helpers
from pytest_sme2.runners.binary import elf_machine

TARGET = "aarch64-linux-gnu"
DEFAULT_CPU = "max"
KEEP_LOG_ENV = "PYTEST_SME2_KEEP_QEMU_LOG"   # keep the (large) translated-code log for debugging




@dataclass(frozen=True)
class DeviceClass:
    """A device class QEMU has no CPU model of: a CPU model with AT_HWCAP2 bits hidden from
    every process of the device."""

    cpu: str
    hidden: int         # AT_HWCAP2 bits every process of the device is denied
    what: str


# ``qemu:NAME``: a class, not a CPU model (QEMU has no CPU named so).
CLASSES: dict[str, DeviceClass] = {
    "sme1": DeviceClass(DEFAULT_CPU, SME2_FAMILY, "SME2 hidden from every process (SME "
                                                  "without SME2)"),
}


@dataclass(frozen=True)
class QemuSpec:
    """A ``qemu[:CPU|:CLASS]`` spec, parsed once: the CPU model, the AT_HWCAP2 bits hidden from
    every process, and the class's name ("" for a CPU model)."""

    cpu: str
    hidden: int = 0
    device_class: str = ""


def parse_spec(spec: str) -> QemuSpec:
    """The QEMU CPU model (and hidden features) a ``qemu[:CPU]`` or ``qemu:CLASS`` spec names."""
    kind, sep, cpu = spec.partition(":")
    if kind != QEMU.name:
        raise DeviceError(f"--device {spec!r} is not a QEMU spec")
    cpu = cpu.strip()
    if sep and not cpu:
        raise DeviceError(f"--device {spec!r}: name a QEMU CPU model after ':' (e.g. qemu:max), "
                          f"a device class ({', '.join(f'qemu:{c}' for c in CLASSES)}) or use "
                          "--device qemu")
    if cpu in CLASSES:
        known = CLASSES[cpu]
        return QemuSpec(known.cpu, known.hidden, cpu)
    return QemuSpec(cpu or DEFAULT_CPU)


@dataclass
class QemuDevice(DeviceBase):
    spec: str = QEMU.name
    trace_kernels: bool = True          # record which kernels executed, every run
    samples_kernels: bool = True        # the preload library runs in every process
    cpu: str = field(init=False)
    hidden: int = field(init=False)     # AT_HWCAP2 bits every process is denied (qemu:sme1)
    device_class: str = field(init=False)
    target: str = field(default=TARGET, init=False)

    def __post_init__(self) -> None:
        parsed = parse_spec(self.spec)
        self.cpu, self.hidden, self.device_class = parsed.cpu, parsed.hidden, parsed.device_class

    def __repr__(self) -> str:
        hidden = f", hidden={self.hidden:#x}" if self.hidden else ""
        return f"QemuDevice(cpu={self.cpu!r}{hidden})"

    @property
    def _where(self) -> str:
        """``-cpu max`` and, for a class, what it hides: how errors name the emulated CPU."""
        return f"-cpu {self.cpu}" + (f" (qemu:{self.device_class}: AT_HWCAP2 & "
                                     f"~{self.hidden:#x})" if self.hidden else "")

    # -- what the emulator needs (provisioned by `pytest-sme2 setup qemu`) --------------------

    @cached_property
    def tools(self):
        return find_qemu()

    @cached_property
    def helpers(self):
        return build_target_helpers(TARGET)

    def _qemu_argv(self, argv: list[str], env: dict[str, str],
                   log: Path | None = None) -> list[str]:
        # -d in_asm logs each block of guest code as QEMU translates it, i.e. as execution
        # first reaches it: the record of what ran (kernel_trace reads it).
        trace = ["-d", "in_asm", "-D", str(log)] if log is not None else []
        return self.tools.command(trace + argv, cpu=self.cpu, env=env)

    # -- facts, read inside the guest --------------------------------------------------------

    @cached_property
    def _facts(self) -> DeviceFacts:
        # A class's hidden features are hidden from the probe too: the facts are what every
        # process of the device sees.
        env = {"LD_PRELOAD": str(self.helpers.preload),
               HWCAP2_CLEAR_ENV: hex(self.hidden)} if self.hidden else {}
        argv = self._qemu_argv([str(self.helpers.probe)], env)
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise DeviceError(f"--device {self.spec}: cannot run the target probe under "
                              f"{self.tools.qemu} ({e}); run `pytest-sme2 setup qemu`") from None
        probe = parse_probe(proc.stdout)
        if proc.returncode != 0 or "hwcap2" not in probe:
            why = (proc.stderr.strip().splitlines() or ["no output"])[-1][:200]
            raise DeviceError(f"--device {self.spec}: QEMU could not run the target probe with "
                              f"{self._where} ({why}); check the CPU model "
                              f"(`{self.tools.qemu} -cpu help`)")
        hwcap2 = int(probe["hwcap2"])
        if hwcap2 & self.hidden:
            raise DeviceError(f"--device {self.spec}: the probe still saw AT_HWCAP2 {hwcap2:#x} "
                              f"with {self.hidden:#x} hidden: the preload library did not apply, "
                              "so this class cannot be emulated here; run `pytest-sme2 setup "
                              "qemu` again")
        sme, sme2 = sme_flags(hwcap2)
        host = host_facts()
        what = f", {CLASSES[self.device_class].what}" if self.device_class else ""
        extra = {"device_class": self.device_class,
                 "hidden_hwcap2": hex(self.hidden)} if self.hidden else {}
        return DeviceFacts(
            kind=QEMU.name, serial=f"qemu-{self.device_class or self.cpu}",
            model=f"QEMU {self.tools.version} user mode, -cpu {self.cpu}{what}",
            cpu=f"QEMU {self.cpu} (emulated Arm64)", abi="arm64-v8a",
            os=f"Linux user mode on {host.os or platform.system()}",
            kernel=str(probe.get("kernel", "")), cores=int(probe.get("cpus", 0)),
            sme=sme, sme2=sme2, executorch=package_version("executorch"),
            emulated=QEMU.emulated,
            extra={"qemu_version": self.tools.version, "qemu_cpu": self.cpu,
                   "qemu": str(self.tools.qemu), "hwcap": hex(int(probe.get("hwcap", 0))),
                   "hwcap2": hex(hwcap2), "sme_source": "auxv (inside the guest)",
                   **extra, "host_cpu": host.cpu, "host_abi": host.abi})

    def facts(self) -> DeviceFacts:
        return self._facts

    # -- running ------------------------------------------------------------------------------

    def run(self, runner: Runner, request: RunRequest) -> RunOutcome:
        name = runner.info.name
        self._check_runner(runner)
        check_operators(runner, request, f"--device {self.spec}")
        # The device class's hidden features, and the runner's mask on top.
        clear = self.hidden | (mask_bits(runner.hwcap_mask) if runner.hwcap_mask else 0)
        env = {"LD_PRELOAD": str(self.helpers.preload), HWCAP2_CLEAR_ENV: hex(clear)}
        stem = request.etdump.with_suffix("")
        log = maps = samples = None
        if self.trace_kernels or request.kernel_sample is not None:
            maps = Path(f"{stem}.maps.txt")
            maps.unlink(missing_ok=True)
            env[MAPS_OUT_ENV] = str(maps)
        if self.trace_kernels:
            log = Path(f"{stem}.qemu-in_asm.log")
            if "%" in str(log):
                # QEMU's -D reads the name as a format ("%d" becomes its pid, any other "%"
                # is refused): write the log under a name of our own beside it.
                log = log.with_name(f"qemu-in_asm-{os.getpid()}-{id(request):x}.log")
                if "%" in str(log):     # in the folder's own name: the temporary folder

                    log = Path(tempfile.gettempdir(), log.name)
            log.unlink(missing_ok=True)
        if request.kernel_sample is not None:
            samples = Path(f"{stem}.samples.txt")
            samples.unlink(missing_ok=True)
            env[SAMPLE_OUT_ENV] = str(samples)

        try:
            via_e, inherited = guest_env(env)
        except Sme2Error as e:
            raise RunnerError(f"runner {name!r} under QEMU {self._where}: {e}") from None
        argv = self._qemu_argv(runner.command(request), via_e, log)
        try:
            outcome = run_local(name, request, argv, where=f" under QEMU {self._where}",
                                env={**os.environ, **inherited} if inherited else None)
        except RunnerError as e:
            if "killed by SIGILL" in str(e):
                raise RunnerError(
                    f"{e} — the emulated CPU (-cpu {self.cpu}) lacks an instruction the binary "
                    "uses: use a CPU model that has it (--device qemu is -cpu max) or build the "
                    "runner for this one") from None
            raise
        problem = mask_problem(outcome.stderr, clear) if clear else None
        if problem:
            raise RunnerError(f"runner {name!r} under QEMU {self._where}: {problem}")
        sampled = None
        if samples is not None and maps is not None and request.kernel_sample is not None:
            sampled = sample_kernels(samples, maps, request.kernel_sample, name)
        traced = self._kernel_trace(request, log, maps) if log and maps else None
        return RunOutcome(outcome.etdump, outcome.wall_s, outcome.stdout, outcome.stderr,
                          traced, sampled)

    def _kernel_trace(self, request: RunRequest, log: Path, maps: Path) -> Path:
        from pytest_sme2.analysis.kernel_trace import (  # pandas: only _kernel_trace() needs it
            executed_kernels, write_kernel_trace_csv)

        out = request.kernel_trace or Path(f"{request.etdump.with_suffix('')}.kernels.csv")
        try:
            trace = executed_kernels(log, maps)
            write_kernel_trace_csv(trace, out)
        finally:
            if not os.environ.get(KEEP_LOG_ENV):
                log.unlink(missing_ok=True)   # ~4-20 MB per run; the CSV keeps what it proved
        return out

    def _check_runner(self, runner: Runner) -> None:
        """Only aarch64 Linux programs run here; say which runner and what to use instead."""

        name = runner.info.name
        if runner.info.kind == "python":
            raise RunnerError(f"runner {name!r} is the host's Python runtime and cannot run on "
                              f"--device {self.spec}; use the native runner (cross-built for "
                              "aarch64) or an aarch64 executor_runner")
        exe = runner.device_files()[0]
        machine = elf_machine(exe)
        if machine != "aarch64":
            raise RunnerError(f"runner {name!r}: {exe} is {machine or 'not an ELF program'}, "
                              f"and --device {self.spec} runs aarch64 Linux programs; build it "
                              "for aarch64 (the native runner is cross-built automatically)")
