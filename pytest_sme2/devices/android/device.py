"""An Android phone over adb: facts, thermal state, and runs.

What a phone runs (``target``, what the native runner is built for): any arm64 phone runs our
runner cross-built for ``aarch64-linux-gnu`` against the aarch64 ExecuTorch wheel, started
through the glibc loader it brings with it (:mod:`pytest_sme2.runners.native.bundle`): no NDK.
A user's NDK build of ``executor_runner`` (a bionic program) runs directly, as before. A phone
whose ABI is not arm64 has no target of ours (an ``--runner`` build for its ABI still runs).
pytest-sme2's fake phones name their target with ``ro.pytest_sme2.target``: ``host`` (the fake
runs the host's own programs) or ``aarch64-linux-gnu`` (QEMU, :mod:`pytest_sme2.fakephone`).

SME2 off in one binary (a runner's ``hwcap_mask``): the preload library
(pytest_sme2/device_programs/preload.c) hides SME/SME2 from the runner's process. A bundled
runner gets it through the loader's ``--preload``; a bionic runner through ``LD_PRELOAD``, when
the library can be built for bionic (``ANDROID_NDK``). Every run preloads it where it can, so
SME2-on and SME2-off processes differ in one environment variable; a masked run whose process
never asked for its hwcaps fails with one line (the mask did not apply). The same library
samples the program counter when a request asks for kernel samples (``RunRequest.kernel_sample``)
and copies the address map, both pulled and mapped on the host.

One benchmark at a time per device, across pytest-xdist workers too: a host-side file lock keyed
by the device is held for the whole run.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import shlex
import signal
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath

import adbutils
from adbutils.errors import AdbError, AdbTimeout

from pytest_sme2.devices.android.adb import QUERY_TIMEOUT_S, AdbLink
from pytest_sme2.devices.android.facts import (FACTS_SCRIPT, TARGET_PROP, THERMAL_SCRIPT,
                                               THERMAL_STATE_SCRIPT, check_mask, cpu_mask,
                                               fastest_cpus, parse_facts, parse_thermal,
                                               parse_thermal_state)
from pytest_sme2.devices.android.pinning import pinned_command, read_pinning
from pytest_sme2.devices.android.staging import (CACHE_DIR, DEVICE_TMP, Push,
                                                 check_inside, check_session_dir, file_sha256,
                                                 prune_command, runner_folder, stage)
from pytest_sme2.devices.base import DeviceBase, check_operators
from pytest_sme2.devices.facts import DeviceFacts
from pytest_sme2.devices.host import stderr_tail
from pytest_sme2.errors import Sme2Error
from pytest_sme2.device_programs.hwcaps import (HWCAP2_CLEAR_ENV, MAPS_OUT_ENV, MASKS,
                                                SAMPLE_OUT_ENV, mask_bits, mask_problem)
from pytest_sme2._util.locking import file_lock
from pytest_sme2.runners.native.bundle import (GlibcBundle, glibc_bundle, is_glibc_program,
                                              loader_failed)
from pytest_sme2.runners.base import Runner, RunnerError, RunOutcome, RunRequest
from pytest_sme2.readers.pte_data import program_digest
from pytest_sme2.readers.tensorfile import sidecar
from pytest_sme2.results.records import ThermalState
from pytest_sme2.device_programs.build import build_target_helpers
from pytest_sme2.emulation.tools import find_sysroot
from pytest_sme2.runners.binary import missing_etdump, explain_failure
from pytest_sme2.analysis.addresses import files_resolver

LOCK_DIR: Path | None = None            # None: the system temp folder (tests point it elsewhere)
KILL_GRACE_S = 2                        # `timeout -k`: SIGKILL this long after SIGTERM
ADB_GRACE_S = 30.0                      # the device-side timeout must always fire first
ANDROID_TARGET = "android"              # bionic programs only: an NDK build of executor_runner
GLIBC_TARGET = "aarch64-linux-gnu"      # our runner, started through its own glibc loader
ARM64_ABI = "arm64-v8a"
# The device's target -> the target the preload library of its own (bionic) programs is built
# for; a glibc program always gets the aarch64-linux-gnu one (it brings its C library along).
HELPER_TARGETS = {ANDROID_TARGET: "android-arm64", GLIBC_TARGET: "android-arm64"}
FALLBACK = ("or pass an NDK build of executor_runner with --runner NAME=/path/to/executor_runner"
            ",libs=DIR (docs/android.md)")


def device_lock(key: str):
    """Exclusive use of one device by one process on this host (pytest-xdist workers)."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", key)
    return file_lock(Path(LOCK_DIR or tempfile.gettempdir()) / f"pytest-sme2-adb-{safe}.lock")


@dataclass(frozen=True)
class Launch:
    """How one run starts on the phone: the files in the runner's cache folder, the folder, and
    whether the bundled glibc loader starts the runner."""

    pushes: list[Push]
    folder: str
    bundle: GlibcBundle | None          # a glibc runner: started through its bundled loader
    preload: str | None                 # the device path of the preload library, if any
    # The runner's data files (a llama_main's tokenizer): host path -> path on the phone, in
    # the runner's folder; the command's arguments that name them are given these.
    data: dict[str, str] = field(default_factory=dict)

    @property
    def through_loader(self) -> bool:
        return self.bundle is not None


class AndroidDevice(DeviceBase):
    trace_kernels = False    # an emulated phone's trace would live on its host: not read here

    def __init__(self, spec: str, serial: str, client: adbutils.AdbClient, *,
                 taskset: str | None = "auto", session_id: str | None = None):
        self.spec = spec
        self.serial = serial
        self.taskset = taskset
        self.adb = AdbLink(client, serial)
        sid = session_id or os.environ.get("PYTEST_XDIST_TESTRUNUID") or secrets.token_hex(6)
        sid = re.sub(r"[^A-Za-z0-9_-]", "", sid)[:24] or secrets.token_hex(6)
        self.session_dir = check_session_dir(f"{DEVICE_TMP}/pytest-sme2-{sid}")
        self._lock_key = f"{client.host}-{client.port}-{serial}"
        self._facts: DeviceFacts | None = None
        self._preload: dict[bool, tuple[Path | None, str]] = {}

    def __repr__(self) -> str:
        return f"AndroidDevice({self.serial!r})"

    # -- facts -------------------------------------------------------------------------------

    def facts(self) -> DeviceFacts:
        if self._facts is None:
            self._facts = parse_facts(self.adb.query(FACTS_SCRIPT, "facts"), self.serial)
        return self._facts

    @property
    def target(self) -> str:
        """What the native runner is built for to run here (module docstring)."""
        facts = self.facts()
        if facts.target:
            return facts.target
        return GLIBC_TARGET if facts.abi == ARM64_ABI else ANDROID_TARGET

    @property
    def samples_kernels(self) -> bool:
        """Our runner (a glibc program) can take the preload library here."""
        return self.target == GLIBC_TARGET and self.preload_library(glibc=True)[0] is not None

    def preload_library(self, glibc: bool) -> tuple[Path | None, str]:
        """The preload library for a glibc program (started through its bundled loader) or for
        the phone's other programs (bionic: an NDK build), or (None, why not). Built (or found
        in the cache) once per device and kind."""
        if glibc not in self._preload:
            target = self.target
            helper = GLIBC_TARGET if glibc else HELPER_TARGETS.get(target)
            if helper is None:
                self._preload[glibc] = (None, f"device {self.serial} runs {target} programs "
                                              f"({TARGET_PROP}={target}), which have no Arm64 "
                                              "hwcaps to hide")
            else:
                try:
                    self._preload[glibc] = (build_target_helpers(helper).preload, "")
                except Sme2Error as e:
                    self._preload[glibc] = (None, str(e))
        return self._preload[glibc]

    def thermal(self) -> dict[str, float]:
        """Current thermal zone temperatures in degrees C (recorded around each benchmark)."""
        return parse_thermal(self.adb.query(THERMAL_SCRIPT, "temperatures"))

    def thermal_state(self) -> ThermalState:
        """CPU temperatures and throttling, as --sme2-cooldown judges them
        (:mod:`pytest_sme2.devices.thermal`)."""
        return parse_thermal_state(self.adb.query(THERMAL_STATE_SCRIPT, "thermal state"))

    def cpu_mask(self, threads: int) -> str | None:
        """The taskset mask for a run: None (no pinning), the fastest cores, or the user's."""
        if self.taskset in (None, "", "none"):
            return None
        facts = self.facts()
        if self.taskset == "auto":
            known = {int(c): k for c, k in facts.extra.get("cpu_max_khz", {}).items()}
            return cpu_mask(fastest_cpus(known, threads)) if known else None
        return check_mask(self.taskset, facts.cores, self.serial)

    # -- running -----------------------------------------------------------------------------

    def run(self, runner: Runner, request: RunRequest) -> RunOutcome:
        name = runner.info.name
        files = runner.device_files()   # RunnerError for host-only runners
        if not files:
            raise RunnerError(f"runner {name!r} names no executable to push to the device")
        for f in (files + [request.pte] + ([request.inputs] if request.inputs else [])
                  + runner.data_files()):
            if not f.is_file():
                raise RunnerError(f"runner {name!r}: {f} does not exist on the host")
        runner.check_device(self.facts().abi)
        check_operators(runner, request, f"device {self.serial}")
        clear = mask_bits(runner.hwcap_mask) if runner.hwcap_mask else 0
        launch = self._launch(runner, files, request)
        request.etdump.parent.mkdir(parents=True, exist_ok=True)
        for stale in (request.etdump, request.outputs, request.kernel_sample):
            if stale is not None:       # a stale file must never be read as this run's
                stale.unlink(missing_ok=True)
        device_request = self._device_request(request)
        mask = self.cpu_mask(request.threads)
        with device_lock(self._lock_key):
            pushes = launch.pushes + self._data_pushes(request, device_request)
            folders = (launch.folder, str(device_request.pte.parent))
            pushed = stage(self.adb, pushes, f"{self.session_dir}/out", folders)
            res, wall = self._execute(runner, launch, device_request, mask, clear)
            self._check_exit(name, request, launch, res, wall)
            problem = (mask_problem(res.stderr, clear) if clear else None) or (
                read_pinning(self.adb, self.session_dir, mask) if mask else None)
            if problem:
                raise RunnerError(f"runner {name!r} on device {self.serial}: {problem}")
            with self.adb.link("while copying results from it"):
                self._pull_results(name, request, device_request, res.stdout)
                sample = self._pull_sample(name, request, device_request, launch)
        return RunOutcome(request.etdump, wall, res.stdout, res.stderr, kernel_sample=sample,
                          pushed=(pushed.pushed, pushed.pushed_bytes, pushed.seconds,
                                  pushed.present))

    def _launch(self, runner: Runner, files: list[Path], request: RunRequest) -> Launch:
        """The bundle (an aarch64 glibc runner: its loader and glibc come along) or the files
        as they are (a bionic or host program), with the preload library where there is one."""
        name = runner.info.name
        glibc = is_glibc_program(files[0])
        preload, why_not = self.preload_library(glibc)
        if runner.hwcap_mask and preload is None:
            hidden = MASKS[runner.hwcap_mask][1] if runner.hwcap_mask in MASKS else \
                runner.hwcap_mask
            raise RunnerError(f"runner {name!r} hides {hidden} from its process "
                              f"(mask={runner.hwcap_mask}) with a preloaded library, which "
                              f"device {self.serial} cannot have: {why_not}")
        if request.kernel_sample is not None and preload is None:
            raise RunnerError(f"runner {name!r}: kernel sampling needs the preload library, "
                              f"which device {self.serial} cannot have: {why_not}")
        bundle = None
        if glibc:
            if self.facts().abi != ARM64_ABI:
                raise RunnerError(f"runner {name!r} is an arm64 program and device "
                                  f"{self.serial} is {self.facts().abi or 'not arm64'}; use an "
                                  "arm64 phone, or pass an executor_runner built for its ABI "
                                  "with --runner NAME=/path/to/executor_runner,libs=DIR")

            try:
                sysroot_lib = find_sysroot() / "lib"
            except Sme2Error as e:
                raise RunnerError(f"runner {name!r} needs the aarch64 glibc to run on device "
                                  f"{self.serial}: {e}") from None
            bundle = glibc_bundle(files, sysroot_lib, preload)
            files = list(bundle.files)
        elif preload is not None:
            files = files + [preload]
        data = runner.data_files()
        folder, pushes = runner_folder(files + data)
        return Launch(pushes, folder, bundle,
                      f"{folder}/{preload.name}" if preload is not None else None,
                      {str(f): f"{folder}/{f.name}" for f in data})

    def _device_request(self, request: RunRequest) -> RunRequest:
        """``request`` with the paths the phone sees (the model and inputs by content, outputs
        in the session's ``out/``)."""
        out = PurePosixPath(self.session_dir, "out")
        # The program's folder is named by both files' content: a .pte with another .ptd is
        # another program.
        pte_sha = program_digest(file_sha256(request.pte),
                                 file_sha256(request.data) if request.data else None)
        program = PurePosixPath(CACHE_DIR, f"model-{pte_sha[:16]}")   # kept between sessions
        inputs = None
        if request.inputs:
            inputs = PurePosixPath(self.session_dir, f"inputs-{self._inputs_tag(request)}",
                                   request.inputs.name)
        # replace(), not a new RunRequest: every other field (threads, runs, an LLM's
        # generation) reaches the phone as the caller asked.
        # The machine-state probe's program: kept like a program, by its content.
        probe = PurePosixPath(CACHE_DIR, f"probe-{file_sha256(request.probe)[:16]}",
                              request.probe.name) if request.probe else None
        return replace(
            request,
            pte=program / request.pte.name,
            data=program / request.data.name if request.data else None, probe=probe,
            etdump=out / request.etdump.name, inputs=inputs,
            outputs=out / request.outputs.name if request.outputs else None,
            kernel_trace=None,
            kernel_sample=out / "samples.txt" if request.kernel_sample else None,
        )  # type: ignore[arg-type]  # device paths are POSIX paths

    @staticmethod
    def _inputs_tag(request: RunRequest) -> str:
        assert request.inputs is not None
        group = [request.inputs] + [p for p in [sidecar(request.inputs)] if p.is_file()]
        return hashlib.sha256("".join(file_sha256(p) for p in group).encode()).hexdigest()[:16]

    def _data_pushes(self, request: RunRequest, device: RunRequest) -> list[Push]:
        # The program's folder is named by its content: checked on the phone by size.
        # The program, its weights beside it and the machine-state probe's program: each once
        # per content.
        pushes = [Push(local, str(remote), 0o644, file_sha256(local), True)
                  for local, remote in ((request.pte, device.pte), (request.data, device.data),
                                        (request.probe, device.probe)) if local and remote]
        if request.inputs and device.inputs:
            folder = device.inputs.parent
            group = [request.inputs] + [p for p in [sidecar(request.inputs)] if p.is_file()]
            pushes += [Push(p, str(folder / p.name), 0o644, file_sha256(p)) for p in group]
        for p in pushes:
            check_inside(p.remote, (self.session_dir, CACHE_DIR))
        return pushes

    def _command(self, runner: Runner, launch: Launch, request: RunRequest, mask: str | None,
                 limit: float, clear: int) -> str:
        q = shlex.quote
        argv = [launch.data.get(a, a) for a in runner.command(request)]
        env = {}
        if launch.preload is not None:
            env[HWCAP2_CLEAR_ENV] = f"{clear:#x}"    # the 0x: read as hex, never as decimal
        if request.kernel_sample is not None:
            out = request.kernel_sample.parent
            env[SAMPLE_OUT_ENV] = str(request.kernel_sample)
            env[MAPS_OUT_ENV] = str(out / "maps.txt")
        if launch.bundle is not None:
            # The loader's --preload, never LD_PRELOAD: the phone's own tools (timeout,
            # taskset: bionic) would try to load a glibc library.
            argv = launch.bundle.argv(launch.folder, argv)
        else:
            argv[0] = f"{launch.folder}/{Path(argv[0]).name}"
            preload = {"LD_PRELOAD": launch.preload} if launch.preload is not None else {}
            env = {"LD_LIBRARY_PATH": launch.folder, **preload, **env}
        secs = f"{limit:.3f}".rstrip("0").rstrip(".")
        assignments = " ".join(f"{k}={q(v)}" for k, v in env.items())
        prefix = f"cd {q(launch.folder)} && {assignments} timeout -k {KILL_GRACE_S} {secs}"
        if mask:        # pinned, and its threads' affinity read back (pinning.py)
            return pinned_command(prefix, mask, argv, f"{self.session_dir}/out", request.threads)
        return f"{prefix} {' '.join(q(a) for a in argv)}"

    def _execute(self, runner: Runner, launch: Launch, request: RunRequest, mask: str | None,
                 clear: int) -> tuple[adbutils.ShellReturn, float]:
        limit = max(request.timeout_s, 0.1)
        cmd = self._command(runner, launch, request, mask, limit, clear)
        t0 = time.perf_counter()
        with self.adb.link("during the run"):
            try:
                # adbutils' timeout is inactivity only: `timeout` on the device bounds wall time.
                res = self.adb.sh(cmd, timeout=limit + KILL_GRACE_S + ADB_GRACE_S)
            except AdbTimeout:
                raise self._timed_out(runner.info.name, request) from None
        return res, time.perf_counter() - t0

    def _timed_out(self, name: str, req: RunRequest) -> RunnerError:
        return RunnerError(f"runner {name!r} on {req.pte.name}: no result within "
                           f"{req.timeout_s:g} s on device {self.serial}; killed (raise "
                           "--sme2-timeout or lower --runs)")

    def _check_exit(self, name: str, request: RunRequest, launch: Launch,
                    res: adbutils.ShellReturn, wall: float) -> None:
        rc = res.returncode
        if rc == 0:
            return
        where = f"runner {name!r} on {request.pte.name}"
        tail = stderr_tail(res.stderr)
        if rc == 124 or (rc == 128 + signal.SIGKILL and wall >= request.timeout_s):
            raise self._timed_out(name, request)
        if launch.through_loader and loader_failed(rc, res.stderr):
            raise RunnerError(f"{where}: the bundled glibc loader could not start the runner on "
                              f"device {self.serial} (step: start "
                              f"{launch.folder}/ld-linux-aarch64.so.1, exit status {rc}; SELinux "
                              "on /data/local/tmp, a seccomp filter or a kernel older than "
                              f"glibc's minimum can refuse it) {FALLBACK}; stderr: {tail}")
        if rc in (126, 127):
            why = "is not executable there" if rc == 126 else "was not found there"
            exe = PurePosixPath(launch.folder, launch.pushes[0].local.name)
            raise RunnerError(f"{where}: cannot start {exe} on device {self.serial} (it {why}; "
                              f"is it built for {self.facts().abi or 'this ABI'}?); "
                              f"stderr: {tail}")
        if 128 < rc < 128 + 65:
            try:
                what = f"was killed by {signal.Signals(rc - 128).name}"
            except ValueError:
                what = f"was killed by signal {rc - 128}"
        else:
            what = f"exited with status {rc}"
        hint = _explain(res.stderr)
        if hint:                        # the cause first, the status and stderr as evidence
            raise RunnerError(f"{where} {hint} ({what} on device {self.serial}); stderr: {tail}")
        raise RunnerError(f"{where} {what} on device {self.serial}; stderr: {tail}")

    def _pull_results(self, name: str, request: RunRequest, device: RunRequest,
                      stdout: str) -> None:

        if request.writes_etdump:   # none when it traced no run (timed untraced only)
            self.adb.pull(self._inside(device.etdump.as_posix()), request.etdump, required=(
                f"runner {name!r} on {request.pte.name} succeeded but wrote no ETDump at "
                f"{device.etdump} on device {self.serial} ({missing_etdump(stdout)})"))
        if request.outputs and device.outputs:
            remote = self._inside(device.outputs.as_posix())
            self.adb.pull(remote, request.outputs, required=(
                f"runner {name!r} on {request.pte.name} wrote no outputs file at {remote} on "
                f"device {self.serial}"))
            self.adb.pull(f"{remote}.json", sidecar(request.outputs), required=None)

    def _pull_sample(self, name: str, request: RunRequest, device: RunRequest,
                     launch: Launch) -> Path | None:
        """The sampled kernels, mapped on the host through the files we pushed."""
        if request.kernel_sample is None or device.kernel_sample is None:
            return None
        from pytest_sme2.analysis.kernel_sample import (  # pandas: only _pull_sample() needs it
            sampled_kernels, write_kernel_sample_csv)

        stem = request.kernel_sample.with_suffix("")
        samples, maps = Path(f"{stem}.samples.txt"), Path(f"{stem}.maps.txt")
        missing = (f"runner {name!r} on {request.pte.name} wrote no {{}} on device "
                   f"{self.serial}: the preload library did not run in its process, or the "
                   "process did not exit normally")
        self.adb.pull(self._inside(device.kernel_sample.as_posix()), samples,
                      required=missing.format("kernel samples"))
        self.adb.pull(self._inside(str(device.kernel_sample.parent / "maps.txt")), maps,
                      required=missing.format("address map"))
        found = sampled_kernels(samples, maps, symbols=files_resolver(
            {Path(p.remote).name: p.local for p in launch.pushes}))
        return write_kernel_sample_csv(found, request.kernel_sample)

    def _inside(self, remote: str) -> str:
        return check_inside(remote, (self.session_dir, CACHE_DIR))

    def cleanup(self) -> bool:
        """Remove the session folder and all but the most recently used runner folders of the
        cache; False if the device could not be reached."""
        with device_lock(self._lock_key):
            try:
                res = self.adb.sh(f"rm -rf {shlex.quote(self.session_dir)}; {prune_command()}")
            except (EOFError, OSError, AdbError):
                return False
        return res.returncode == 0


def _explain(stderr: str) -> str | None:
    """A known cause from the binary runner's failure explainer (a phrase that follows
    "runner 'X' ..."), when it recognises the stderr."""
    try:
        return explain_failure(stderr)
    except Exception:  # noqa: BLE001 - a hint must never hide the real failure
        return None


__all__ = ["ANDROID_TARGET", "AndroidDevice", "CACHE_DIR", "DEVICE_TMP", "GLIBC_TARGET",
           "QUERY_TIMEOUT_S", "device_lock", "file_sha256", "loader_failed"]
