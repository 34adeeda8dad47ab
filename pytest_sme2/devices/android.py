"""An Android phone over adb (adbutils talking to an adb server, local or on another machine).

Spec: ``android`` (the one attached device), ``android:SERIAL``, ``android:SERIAL@HOST:PORT``
(a device on another machine's adb server; ``android:@HOST:PORT`` for its only device);
``android:*`` and ``android:*@HOST:PORT`` name every ready device of that server and are expanded
into one ``android:SERIAL[@HOST:PORT]`` spec each before a session opens any (:func:`expand_all`).

A run stages files in one per-session folder, ``/data/local/tmp/pytest-sme2-<session>/``:
``runner-<digest>/`` holds the executable and its libraries (two builds of one runner, e.g. SME2
on and off, never overwrite each other's libraries), ``model-<sha>/`` and ``inputs-<digest>/``
the model and inputs under their own names, ``out/`` the ETDump and outputs. Files whose sha256
on the device already matches are not pushed again. Nothing outside the session folder is ever
written or removed. One benchmark at a time per device, across pytest-xdist workers too: a
host-side file lock keyed by the device is held for the whole run.

What a device runs (``target``, what the native runner is built for): a real phone runs bionic
programs, target ``android`` — the native runner is not built for it here (that needs an NDK;
pass an NDK build of ``executor_runner`` with ``--runner``). A device can name another target
with the property ``ro.pytest_sme2.target``; only pytest-sme2's fake phones do: ``host`` (the
fake runs the host's own programs) or ``aarch64-linux-gnu`` (it runs glibc aarch64 programs
under QEMU), so the cross-built native runner and its libraries are pushed there.

SME2 off in one binary (a runner's ``hwcap_mask``): the hwcap mask library
(pytest_sme2/target/hwcap_mask.c) built for the device's programs — ``android-arm64`` with the
NDK (``ANDROID_NDK``) for a phone, ``aarch64-linux-gnu`` for the glibc fake — is pushed to
``helpers-<sha>/`` and preloaded: ``LD_PRELOAD=<it> PYTEST_SME2_HWCAP2_CLEAR=<bits>``. Where it
can be built, every native/binary run preloads it (clearing nothing unless masked), so SME2-on
and SME2-off processes differ in one environment variable, as on ``--device qemu``; where it
cannot, unmasked runs go without it and a masked runner fails with one line saying why."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
import shlex
import signal
import socket
import struct
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import adbutils
from adbutils.errors import AdbError, AdbTimeout

from pytest_sme2.devices.android_facts import (FACTS_SCRIPT, TARGET_PROP, THERMAL_SCRIPT,
                                               THERMAL_STATE_SCRIPT, check_mask, cpu_mask,
                                               fastest_cpus, parse_facts, parse_thermal,
                                               parse_thermal_state)
from pytest_sme2.devices.base import DeviceError
from pytest_sme2.devices.facts import DeviceFacts
from pytest_sme2.devices.host import stderr_tail
from pytest_sme2.errors import Sme2Error
from pytest_sme2.hwcaps import HWCAP2_CLEAR_ENV, MASKS, mask_bits
from pytest_sme2.locking import file_lock
from pytest_sme2.runners.base import Runner, RunnerError, RunOutcome, RunRequest
from pytest_sme2.tensorfile import sidecar
from pytest_sme2.thermal import ThermalState


DEVICE_TMP = "/data/local/tmp"
LOCK_DIR: Path | None = None            # None: the system temp folder (tests point it elsewhere)
_SESSION_DIR = re.compile(r"/data/local/tmp/pytest-sme2-[A-Za-z0-9_-]{1,40}")
QUERY_TIMEOUT_S = 30.0                  # adb inactivity limit for short queries
KILL_GRACE_S = 2                        # `timeout -k`: SIGKILL this long after SIGTERM
ADB_GRACE_S = 30.0                      # the device-side timeout must always fire first
PUSH_CHUNK = 64 * 1024                  # sync DATA payloads may not exceed 64 KiB
ANDROID_TARGET = "android"              # a real phone: bionic programs (NDK builds)
# The device's target -> the target the hwcap mask library is built for (same C library).
HELPER_TARGETS = {ANDROID_TARGET: "android-arm64", "aarch64-linux-gnu": "aarch64-linux-gnu"}


@dataclass(frozen=True)
class AndroidSpec:
    serial: str | None
    host: str | None                    # None: ANDROID_ADB_SERVER_HOST or 127.0.0.1
    port: int | None                    # None: ANDROID_ADB_SERVER_PORT or 5037


def parse_spec(spec: str) -> AndroidSpec:
    kind, _, rest = spec.partition(":")
    if kind != "android":
        raise DeviceError(f"--device {spec!r} is not an Android spec")
    serial, at, server = rest.partition("@")   # serials may hold ':' (127.0.0.1:5555)
    host = port = None
    if at:
        host, _, port_text = server.rpartition(":")
        if not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise DeviceError(f"--device {spec!r}: the adb server must be HOST:PORT, e.g. "
                              "android:SERIAL@buildbox:5037")
        port = int(port_text)
    return AndroidSpec(serial or None, host, port)


def _server_address(parsed: AndroidSpec) -> tuple[str, int]:
    host = parsed.host or os.environ.get("ANDROID_ADB_SERVER_HOST") or "127.0.0.1"
    port = parsed.port or int(os.environ.get("ANDROID_ADB_SERVER_PORT") or 5037)
    return host, port


def state_problem(serial: str, state: str) -> str | None:
    """What to do about a device that adb lists in ``state``; None when it is usable."""
    if state == "device":
        return None
    if state == "unauthorized":
        return (f"Android device {serial} is unauthorized: unlock it and accept the 'Allow USB "
                "debugging?' RSA key prompt, then run again")
    if state == "offline":
        return (f"Android device {serial} is offline: reconnect it (replug the cable or run "
                "`adb reconnect offline`) and run again")
    return (f"Android device {serial} is in state {state!r}, not ready for commands; boot it "
            "normally and run again")


ALL = "*"                               # android:* — every authorised device of a server


def _list_server(parsed: AndroidSpec
                 ) -> tuple[adbutils.AdbClient, dict[str, str]]:
    """The adb server ``parsed`` names and its devices (serial -> state)."""
    host, port = _server_address(parsed)
    if parsed.host is not None:
        # adbutils starts a LOCAL server when it cannot connect: probe a remote one first.
        try:
            socket.create_connection((host, port), timeout=3).close()
        except OSError as e:
            raise DeviceError(f"cannot reach the adb server at {host}:{port} "
                              f"({e.strerror or e}); start it there with `adb -a -P {port} "
                              "nodaemon server` or fix --device") from None
    client = adbutils.AdbClient(host=host, port=port)
    try:
        listed = {info.serial: info.state for info in client.list()}
    except (AdbError, OSError, EOFError, subprocess.SubprocessError) as e:   # start-server too
        raise DeviceError(f"cannot talk to the adb server at {host}:{port} ({e}); is adb "
                          "installed and working (`adb devices`)?") from None
    return client, listed


def expand_all(spec: str) -> tuple[list[str], list[str]]:
    """``android:*`` (or ``android:*@HOST:PORT``): one spec per attached device of that adb
    server that is ready for commands, in the server's order, and one line per device left
    out (unauthorized, offline) saying what to do. No ready device at all: DeviceError."""
    parsed = parse_spec(spec)
    server = f"@{parsed.host}:{parsed.port}" if parsed.host is not None else ""
    listed = _list_server(parsed)[1]
    ready = [f"android:{s}{server}" for s, st in listed.items() if st == "device"]
    skipped = [f"--device {spec}: left out {p}" for s, st in listed.items()
               if (p := state_problem(s, st))]
    if not ready:
        where = f"the adb server at {parsed.host}:{parsed.port}" if server else "adb"
        raise DeviceError(f"--device {spec}: {where} lists no device ready for commands"
                          + (f" ({_listing(listed)})" if listed else "")
                          + "; connect and authorise one, or name the devices to use")
    return ready, skipped


def open_android(spec: str, *, taskset: str | None = "auto",
                 session_id: str | None = None) -> "AndroidDevice":
    """Resolve ``spec`` against the adb server's device list; DeviceError says what to do."""
    parsed = parse_spec(spec)
    if parsed.serial == ALL:
        raise DeviceError(f"--device {spec} names every device of an adb server, which only a "
                          "pytest session runs on; name one here: android:SERIAL")
    client, listed = _list_server(parsed)
    serial = parsed.serial
    if serial is None:
        if not listed:
            raise DeviceError("no Android device is attached (adb lists none); connect one or "
                              "use --device host")
        if len(listed) > 1:
            raise DeviceError(f"more than one Android device is attached ({_listing(listed)}); "
                              "pick one with --device android:SERIAL, or use them all with "
                              "--device 'android:*'")
        serial = next(iter(listed))
    if serial not in listed:
        raise DeviceError(f"Android device {serial!r} is not attached; attached: "
                          f"{_listing(listed) or 'none'}")
    problem = state_problem(serial, listed[serial])
    if problem:
        raise DeviceError(problem)
    return AndroidDevice(spec, serial, client, taskset=taskset, session_id=session_id)


def _listing(listed: dict[str, str]) -> str:
    return ", ".join(s if st == "device" else f"{s} ({st})" for s, st in listed.items())


_sha_cache: dict[tuple[str, int, int], str] = {}


def file_sha256(path: Path) -> str:
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _sha_cache:
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        _sha_cache[key] = h.hexdigest()
    return _sha_cache[key]


@dataclass(frozen=True)
class _Push:
    local: Path
    remote: str
    mode: int
    sha: str


@dataclass(frozen=True)
class _Stage:
    pushes: list[_Push]
    exe: str
    runner_dir: str
    request: RunRequest                 # the request with device paths
    preload: str | None = None          # the pushed hwcap mask library, if preloaded
    hwcap2_clear: int = 0               # AT_HWCAP2 bits it clears


def device_lock(key: str):
    """Exclusive use of one device by one process on this host (pytest-xdist workers)."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", key)
    return file_lock(Path(LOCK_DIR or tempfile.gettempdir()) / f"pytest-sme2-adb-{safe}.lock")


def _explain(stderr: str) -> str | None:
    """A known cause from the binary runner's failure explainer (a phrase that follows
    "runner 'X' ..."), when that module is there and recognises the stderr."""
    try:
        from pytest_sme2.runners.binary import explain_failure
    except ImportError:
        return None
    try:
        return explain_failure(stderr)
    except Exception:  # noqa: BLE001 - a hint must never hide the real failure
        return None


class AndroidDevice:
    trace_kernels = False    # an emulated phone's trace would live on its host: not read here

    def __init__(self, spec: str, serial: str, client: adbutils.AdbClient, *,
                 taskset: str | None = "auto", session_id: str | None = None):
        self.spec = spec
        self.serial = serial
        self.taskset = taskset
        self._client = client
        self._dev = client.device(serial)
        sid = session_id or os.environ.get("PYTEST_XDIST_TESTRUNUID") or secrets.token_hex(6)
        sid = re.sub(r"[^A-Za-z0-9_-]", "", sid)[:24] or secrets.token_hex(6)
        self.session_dir = f"{DEVICE_TMP}/pytest-sme2-{sid}"
        if not _SESSION_DIR.fullmatch(self.session_dir):   # guards every rm -rf below
            raise DeviceError(f"bad session folder {self.session_dir!r}")
        self._lock_key = f"{client.host}-{client.port}-{serial}"
        self._facts: DeviceFacts | None = None
        self._mask_lib: tuple[Path | None, str] | None = None

    def __repr__(self) -> str:
        return f"AndroidDevice({self.serial!r})"

    # -- adb plumbing ------------------------------------------------------------------------

    def _lost(self, during: str) -> DeviceError:
        """The device stopped answering. A revoked authorization needs the prompt accepted;
        anything else (gone, offline while adb retries) is a disconnection."""
        try:
            state = {i.serial: i.state for i in self._client.list()}.get(self.serial)
        except (AdbError, OSError, EOFError):
            state = None
        if state == "unauthorized":
            return DeviceError(state_problem(self.serial, state) or "")
        return DeviceError(f"device {self.serial} disconnected {during}; reconnect it and run "
                           "again")

    @contextlib.contextmanager
    def _link(self, during: str) -> Iterator[None]:
        """adbutils reports a dropped device as a bare EOFError, socket errors or AdbError."""
        try:
            yield
        except AdbTimeout:
            raise DeviceError(f"device {self.serial} stopped answering {during}; reconnect it "
                              "and run again") from None
        except (EOFError, OSError, AdbError):
            raise self._lost(during) from None

    def _sh(self, cmd: str, timeout: float = QUERY_TIMEOUT_S) -> adbutils.ShellReturn:
        return self._dev.shell2(cmd, timeout=timeout, v2=True)

    def _query(self, cmd: str, what: str) -> str:
        with self._link(f"while reading its {what}"):
            try:
                res = self._sh(cmd)
            except AdbTimeout:
                raise DeviceError(f"device {self.serial} did not answer within "
                                  f"{QUERY_TIMEOUT_S:g} s while reading its {what}; reconnect "
                                  "it and run again") from None
        return res.stdout

    # -- facts -------------------------------------------------------------------------------

    def facts(self) -> DeviceFacts:
        if self._facts is None:
            self._facts = parse_facts(self._query(FACTS_SCRIPT, "facts"), self.serial)
        return self._facts

    @property
    def target(self) -> str:
        """What the native runner is built for to run here: ``android`` for a phone, or what
        the device names with ``ro.pytest_sme2.target`` (module docstring)."""
        return self.facts().extra.get("target") or ANDROID_TARGET

    def mask_library(self) -> tuple[Path | None, str]:
        """The hwcap mask library built for this device's programs, or (None, why not).
        Built (or found in the cache) once per device."""
        if self._mask_lib is None:
            target = self.target
            helper = HELPER_TARGETS.get(target)
            if helper is None:
                self._mask_lib = (None, f"device {self.serial} runs {target} programs "
                                        f"({TARGET_PROP}={target}), which have no Arm64 hwcaps "
                                        "to hide")
            else:
                from pytest_sme2.target.build import build_target_helpers

                try:
                    self._mask_lib = (build_target_helpers(helper).hwcap_mask, "")
                except Sme2Error as e:
                    self._mask_lib = (None, str(e))
        return self._mask_lib

    def thermal(self) -> dict[str, float]:
        """Current thermal zone temperatures in degrees C (recorded around each benchmark)."""
        return parse_thermal(self._query(THERMAL_SCRIPT, "temperatures"))

    def thermal_state(self) -> ThermalState:
        """CPU temperatures and throttling, as --sme2-cooldown judges them
        (:mod:`pytest_sme2.thermal`)."""
        return parse_thermal_state(self._query(THERMAL_STATE_SCRIPT, "thermal state"))

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
        for f in files + [request.pte] + ([request.inputs] if request.inputs else []):
            if not f.is_file():
                raise RunnerError(f"runner {name!r}: {f} does not exist on the host")
        check = getattr(runner, "check_device", None)
        if callable(check):             # BinaryRunner: an x86_64 binary on an arm64 phone
            check(self.facts().abi)
        hide = getattr(runner, "hwcap_mask", None)
        preload, why_not = self.mask_library()
        if hide and preload is None:
            raise RunnerError(f"runner {name!r} hides {MASKS[hide][1] if hide in MASKS else hide}"
                              f" from its process (mask={hide}) with a preloaded library, which "
                              f"device {self.serial} cannot have: {why_not}")
        clear = mask_bits(hide) if hide else 0
        mask = self.cpu_mask(request.threads)
        request.etdump.parent.mkdir(parents=True, exist_ok=True)
        request.etdump.unlink(missing_ok=True)   # a stale trace must never be read as this run's
        if request.outputs:
            request.outputs.unlink(missing_ok=True)
        with device_lock(self._lock_key):
            stage = self._plan(files, request, preload, clear)
            with self._link("while copying files to it"):
                self._stage(stage)
            res, wall = self._execute(runner, stage, mask)
            self._check_exit(name, request, stage, res, wall)
            with self._link("while copying results from it"):
                self._pull(stage.request.etdump.as_posix(), request.etdump, required=(
                    f"runner {name!r} on {request.pte.name} succeeded but wrote no ETDump at "
                    f"{stage.request.etdump} on device {self.serial} (was it built with the "
                    "event tracer?)"))
                if request.outputs and stage.request.outputs:
                    remote = stage.request.outputs.as_posix()
                    self._pull(remote, request.outputs, required=(
                        f"runner {name!r} on {request.pte.name} wrote no outputs file at "
                        f"{remote} on device {self.serial}"))
                    self._pull(f"{remote}.json", sidecar(request.outputs), required=None)
        return RunOutcome(request.etdump, wall, res.stdout, res.stderr)

    def _plan(self, files: list[Path], request: RunRequest, preload: Path | None = None,
              clear: int = 0) -> _Stage:
        shas = [file_sha256(f) for f in files]
        digest = hashlib.sha256("".join(f"{f.name}\0{s}\0" for f, s in zip(files, shas))
                                .encode()).hexdigest()[:16]
        runner_dir = f"{self.session_dir}/runner-{digest}"
        pushes = [_Push(f, f"{runner_dir}/{f.name}", 0o755, s) for f, s in zip(files, shas)]
        pte_sha = file_sha256(request.pte)
        pte = f"{self.session_dir}/model-{pte_sha[:16]}/{request.pte.name}"
        pushes.append(_Push(request.pte, pte, 0o644, pte_sha))
        inputs = None
        if request.inputs:
            group = [request.inputs] + [p for p in [sidecar(request.inputs)] if p.is_file()]
            sums = [file_sha256(p) for p in group]
            tag = hashlib.sha256("".join(sums).encode()).hexdigest()[:16]
            inputs = f"{self.session_dir}/inputs-{tag}/{request.inputs.name}"
            pushes += [_Push(p, f"{self.session_dir}/inputs-{tag}/{p.name}", 0o644, s)
                       for p, s in zip(group, sums)]
        out = f"{self.session_dir}/out"
        device_request = RunRequest(
            pte=PurePosixPath(pte), etdump=PurePosixPath(f"{out}/{request.etdump.name}"),
            threads=request.threads, runs=request.runs, warmup=request.warmup,
            inputs=PurePosixPath(inputs) if inputs else None,
            outputs=PurePosixPath(f"{out}/{request.outputs.name}") if request.outputs else None,
            timeout_s=request.timeout_s)  # type: ignore[arg-type]  # device paths are POSIX
        preload_remote = None
        if preload is not None:
            sha = file_sha256(preload)
            preload_remote = f"{self.session_dir}/helpers-{sha[:16]}/{preload.name}"
            pushes.append(_Push(preload, preload_remote, 0o644, sha))
        for p in pushes:
            self._inside(p.remote)
        return _Stage(pushes, pushes[0].remote, runner_dir, device_request, preload_remote,
                      clear)

    def _inside(self, remote: str) -> str:
        """Every path we write or remove must be inside the session folder."""
        parts = PurePosixPath(remote).parts
        if not remote.startswith(self.session_dir + "/") or ".." in parts:
            raise DeviceError(f"refusing to touch {remote!r} outside {self.session_dir}")
        return remote

    def _stage(self, stage: _Stage) -> None:
        """One round trip: make the folders, clear out/ (no stale ETDump), list remote hashes,
        keep runner files executable; then push only what differs."""
        q = shlex.quote
        dirs = sorted({str(PurePosixPath(p.remote).parent) for p in stage.pushes})
        out = self._inside(f"{self.session_dir}/out")
        execs = " ".join(q(p.remote) for p in stage.pushes if p.mode == 0o755)
        cmd = (f"mkdir -p {' '.join(q(d) for d in dirs)} && rm -rf {q(out)} && mkdir -p {q(out)}"
               f" && {{ chmod 755 {execs} 2>/dev/null; true; }} && for f in "
               f"{' '.join(q(p.remote) for p in stage.pushes)}; do "
               'h=$(sha256sum "$f" 2>/dev/null) && echo "${h%% *}" || echo -; done')
        try:
            res = self._sh(cmd)
        except AdbTimeout:
            raise DeviceError(f"device {self.serial} did not answer within "
                              f"{QUERY_TIMEOUT_S:g} s while preparing {self.session_dir}; "
                              "reconnect it and run again") from None
        if res.returncode != 0:
            raise DeviceError(f"cannot prepare {self.session_dir} on device {self.serial}: "
                              f"{stderr_tail(res.stderr)}")
        remote = res.stdout.split()
        if len(remote) != len(stage.pushes):
            remote = ["-"] * len(stage.pushes)
        for push, have in zip(stage.pushes, remote):
            if have != push.sha:
                self._push(push)

    def _push(self, push: _Push) -> None:
        """sync SEND written out here: adbutils' push raises a bare "FAIL" and drops the
        device's reason (no space left, permission denied), which is the useful part."""
        with self._dev.open_transport(timeout=QUERY_TIMEOUT_S) as c:
            c.send_command("sync:")
            c.check_okay()
            target = f"{push.remote},{0o100000 | push.mode}".encode()
            c.conn.sendall(b"SEND" + struct.pack("<I", len(target)) + target)
            with open(push.local, "rb") as fh:
                for chunk in iter(lambda: fh.read(PUSH_CHUNK), b""):
                    c.conn.sendall(b"DATA" + struct.pack("<I", len(chunk)) + chunk)
            c.conn.sendall(b"DONE" + struct.pack("<I", int(time.time())))
            status = c.read_exact(8)
            if status[:4] == b"OKAY":
                return
            if status[:4] != b"FAIL":
                raise AdbError(f"unexpected sync reply {status[:4]!r}")
            reason = c.read_exact(struct.unpack("<I", status[4:])[0]).decode("utf-8", "replace")
        raise DeviceError(f"cannot push {push.local.name} to {push.remote} on device "
                          f"{self.serial}: {reason}; free space on /data/local/tmp or check "
                          "the device")

    def _command(self, runner: Runner, stage: _Stage, mask: str | None, limit: float) -> str:
        argv = list(runner.command(stage.request))
        argv[0] = stage.exe
        q = shlex.quote
        secs = f"{limit:.3f}".rstrip("0").rstrip(".")
        pin = f"taskset {q(mask)} " if mask else ""
        env = f"LD_LIBRARY_PATH={q(stage.runner_dir)} "
        if stage.preload:
            env += f"LD_PRELOAD={q(stage.preload)} {HWCAP2_CLEAR_ENV}={stage.hwcap2_clear:#x} "
        return (f"cd {q(stage.runner_dir)} && {env}"
                f"timeout -k {KILL_GRACE_S} {secs} {pin}{' '.join(q(a) for a in argv)}")

    def _execute(self, runner: Runner, stage: _Stage,
                 mask: str | None) -> tuple[adbutils.ShellReturn, float]:
        req = stage.request
        limit = max(req.timeout_s, 0.1)
        cmd = self._command(runner, stage, mask, limit)
        t0 = time.perf_counter()
        with self._link("during the run"):
            try:
                # adbutils' timeout is inactivity only: `timeout` on the device bounds wall time.
                res = self._sh(cmd, timeout=limit + KILL_GRACE_S + ADB_GRACE_S)
            except AdbTimeout:
                raise self._timed_out(runner.info.name, req) from None
        return res, time.perf_counter() - t0

    def _timed_out(self, name: str, req: RunRequest) -> RunnerError:
        return RunnerError(f"runner {name!r} on {req.pte.name}: no result within "
                           f"{req.timeout_s:g} s on device {self.serial}; killed (raise "
                           "--sme2-timeout or lower --runs)")

    def _check_exit(self, name: str, request: RunRequest, stage: _Stage,
                    res: adbutils.ShellReturn, wall: float) -> None:
        rc = res.returncode
        if rc == 0:
            return
        where = f"runner {name!r} on {request.pte.name}"
        tail = stderr_tail(res.stderr)
        if rc == 124 or (rc == 128 + signal.SIGKILL and wall >= request.timeout_s):
            raise self._timed_out(name, request)
        if rc in (126, 127):
            why = "is not executable there" if rc == 126 else "was not found there"
            raise RunnerError(f"{where}: cannot start {stage.exe} on device {self.serial} "
                              f"(it {why}; is it built for {self.facts().abi or 'this ABI'}?); "
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

    def _pull(self, remote: str, local: Path, required: str | None) -> None:
        """A checked pull: adbutils' sync.pull of a missing file makes an empty directory."""
        self._inside(remote)
        info = self._dev.sync.stat(remote)
        if not (info.mode & 0o170000 == 0o100000 and info.size > 0):
            if required:
                raise RunnerError(required)
            return
        part = local.with_name(local.name + ".part")
        got = self._dev.sync.pull_file(remote, part)
        if got != info.size:
            part.unlink(missing_ok=True)
            raise DeviceError(f"pulling {remote} from device {self.serial} stopped after {got} "
                              f"of {info.size} bytes; reconnect it and run again")
        part.replace(local)

    def cleanup(self) -> bool:
        """Remove the session folder; False if the device could not be reached."""
        with device_lock(self._lock_key):
            try:
                res = self._sh(f"rm -rf {shlex.quote(self.session_dir)}")
            except (EOFError, OSError, AdbError):
                return False
        return res.returncode == 0
