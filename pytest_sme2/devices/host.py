"""The machine pytest runs on: runners are local processes."""

from __future__ import annotations

import re
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path

from pytest_sme2.devices.bandwidth import (BUFFER_MB, REPEATS, CopyBandwidth, measure,
                                           run_probe)
from pytest_sme2.devices.base import DeviceBase
from pytest_sme2.devices.facts import DeviceFacts, host_facts
from pytest_sme2.devices.kinds import HOST
from pytest_sme2.errors import Sme2Error
from pytest_sme2.device_programs.hwcaps import MAPS_OUT_ENV, SAMPLE_OUT_ENV
from pytest_sme2.runners.base import Runner, RunnerError, RunOutcome, RunRequest
from pytest_sme2.device_programs.build import build_target_helpers
from pytest_sme2.runners.binary import explain_failure, missing_etdump

STDERR_TAIL_LINES = 8


# ExecuTorch's info-level logging says nothing about a failure and would push the lines that do
# out of the tail: "I 00:00:00.000587 executorch:cpuinfo_utils.cpp:71] ..." from a C++ build,
# "[cpuinfo_utils.cpp:71] ..." / "[threadpool.cpp:66] ..." start-up lines from the Python one.
_RUNTIME_CHATTER = re.compile(r"^(I \d\d:\d\d:\d\d\.\d+ executorch:|"
                              r"\[(cpuinfo_utils|threadpool)\.cpp:\d+\] )")


def stderr_tail(text: str, lines: int = STDERR_TAIL_LINES) -> str:
    kept = [ln for ln in text.strip().splitlines() if ln.strip()]
    kept = ([ln for ln in kept if not _RUNTIME_CHATTER.match(ln)] or kept)[-lines:]
    return " | ".join(kept) if kept else "(no stderr)"


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()
    for pipe in (proc.stdout, proc.stderr):   # unread: closed here, not left to the collector
        if pipe is not None:
            pipe.close()


def sample_kernels(samples: Path, maps: Path, out: Path, runner: str) -> Path:
    """Map a local process's samples (files it wrote at exit) to kernels; the CSV at ``out``.
    The libraries are where the address map says (this machine, or QEMU's guest paths)."""
    from pytest_sme2.analysis.kernel_sample import (  # pandas: only sample_kernels() needs it
        sampled_kernels, write_kernel_sample_csv)

    for p, what in ((samples, "kernel samples"), (maps, "address map")):
        if not p.is_file():
            raise RunnerError(f"runner {runner!r} wrote no {what} at {p}: the preload library "
                              "did not run in its process, or the process did not exit normally")
    return write_kernel_sample_csv(sampled_kernels(samples, maps), out)


@dataclass
class HostDevice(DeviceBase):
    spec: str = HOST.name
    target: str = "host"
    trace_kernels: bool = False
    _preload_lib: tuple[Path | None] | None = field(default=None, init=False, repr=False)

    @cached_property
    def _cached_facts(self) -> DeviceFacts:
        return host_facts()

    def facts(self) -> DeviceFacts:
        return self._cached_facts

    @cached_property
    def _bandwidth(self) -> CopyBandwidth:
        try:
            probe = build_target_helpers("host").copy_probe
        except Sme2Error as e:
            return CopyBandwidth(None, source=f"the copy-bandwidth probe could not be built: {e}")
        try:
            return measure(self.facts(), lambda threads: run_probe(
                [str(probe), str(BUFFER_MB), str(threads), str(REPEATS)], "this machine"))
        except RuntimeError as e:
            return CopyBandwidth(None, source=str(e))

    def copy_bandwidth(self) -> CopyBandwidth:
        """This machine's copy bandwidth, measured once per machine (cached)."""
        return self._bandwidth

    @property
    def samples_kernels(self) -> bool:
        """Where this machine's C compiler builds the preload library (cached)."""
        return self._preload() is not None

    def _preload(self) -> Path | None:
        if self._preload_lib is None:
            try:
                self._preload_lib = (build_target_helpers("host").preload,)
            except Sme2Error:
                self._preload_lib = (None,)
        return self._preload_lib[0]

    def run(self, runner: Runner, request: RunRequest) -> RunOutcome:
        runner.check_host()   # a foreign-architecture binary: say so before exec fails
        if runner.hwcap_mask:
            raise RunnerError(f"runner {runner.info.name!r} has mask={runner.hwcap_mask}: hiding "
                              "SME/SME2 from a process is done on an Arm64 Linux target "
                              "(--device qemu); on this host it would change nothing")
        if request.kernel_sample is None:
            return run_local(runner.info.name, request, runner.command(request))
        return self._run_sampled(runner, request)

    def _run_sampled(self, runner: Runner, request: RunRequest) -> RunOutcome:
        preload = self._preload() if runner.preloads else None
        if preload is None:
            raise RunnerError(f"runner {runner.info.name!r}: kernel sampling on the host needs "
                              "a native runner and a C compiler for the preload library")
        stem = request.etdump.with_suffix("")
        samples, maps = Path(f"{stem}.samples.txt"), Path(f"{stem}.maps.txt")
        for p in (samples, maps):
            p.unlink(missing_ok=True)
        env = {**os.environ, "LD_PRELOAD": str(preload), SAMPLE_OUT_ENV: str(samples),
               MAPS_OUT_ENV: str(maps)}
        outcome = run_local(runner.info.name, request, runner.command(request), env=env)
        assert request.kernel_sample is not None
        found = sample_kernels(samples, maps, request.kernel_sample, runner.info.name)
        return replace(outcome, kernel_sample=found)


def run_local(name: str, request: RunRequest, argv: list[str],
              env: dict[str, str] | None = None, where: str = "") -> RunOutcome:
    """Run ``argv`` as a local process for ``request`` (a runner on the host, or the emulator
    that runs one): time limit, a fresh ETDump, and one-line errors naming runner and model.
    ``where`` follows the model name in errors (e.g. " under QEMU -cpu max")."""
    request.etdump.parent.mkdir(parents=True, exist_ok=True)
    request.etdump.unlink(missing_ok=True)  # a stale trace must never be read as this run's
    t0 = time.perf_counter()
    try:
        # A session of its own, so a timeout kills whatever the runner started too.
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True, env=env)
    except OSError as e:
        raise RunnerError(f"runner {name!r}: cannot start {argv[0]} ({e.strerror})") from None
    try:
        out, err = proc.communicate(timeout=request.timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise RunnerError(f"runner {name!r} on {request.pte.name}{where}: no result within "
                          f"{request.timeout_s:g} s; killed (raise --sme2-timeout or lower "
                          "--runs)") from None
    except BaseException:  # Ctrl-C: leave no runner behind
        _kill_group(proc)
        raise
    # errors="replace": a runner echoing a corrupt file's bytes must not crash the reader
    stdout, stderr = out.decode(errors="replace"), err.decode(errors="replace")
    wall = time.perf_counter() - t0
    if proc.returncode < 0:
        sig = signal.Signals(-proc.returncode).name
        raise RunnerError(f"runner {name!r} on {request.pte.name}{where} was killed by {sig}; "
                          f"stderr: {stderr_tail(stderr)}")
    if proc.returncode != 0:
        cause = explain_failure(stderr)
        what = f"{cause} (exited with status {proc.returncode})" if cause else \
            f"exited with status {proc.returncode}"
        raise RunnerError(f"runner {name!r} on {request.pte.name}{where} {what}; "
                          f"stderr: {stderr_tail(stderr)}")
    if request.writes_etdump and (not request.etdump.is_file()
                                  or request.etdump.stat().st_size == 0):
        raise RunnerError(f"runner {name!r} on {request.pte.name}{where} succeeded but wrote no "
                          f"ETDump at {request.etdump} ({missing_etdump(stdout)})")
    return RunOutcome(request.etdump, wall, stdout, stderr)
