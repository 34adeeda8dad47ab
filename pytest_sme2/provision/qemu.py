"""``pytest-sme2 setup qemu``: provision this host to run an emulated Arm64 SME2 target (and
our runner on phones: the same cross toolchain and wheel). The orchestration lives above the
layers it drives (the emulation toolkit, the runner builds, the device programs).

Each step first checks whether what it makes is already there, so a second run only checks (a
few seconds). The apt steps need root on Debian; anywhere else, or without root, setup prints
the exact commands and stops with one line saying why. It never edits the system's own apt
sources: trixie-backports comes in a file of its own, pinned at priority 1 so apt never
upgrades anything from it; only ``apt-get download`` of ``qemu-user`` asks for it by name (the
package's binaries are static, so they run on bookworm too).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from pytest_sme2._util.versions import package_version
from pytest_sme2.device_programs import parse_probe
from pytest_sme2.device_programs.build import build_target_helpers, cached_target_helpers
from pytest_sme2.device_programs.hwcaps import HWCAP2_CLEAR_ENV, HWCAP2_SME, HWCAP2_SME2, mask_bits
from pytest_sme2.emulation import SETUP_COMMAND, EmulationError
from pytest_sme2.emulation.tools import (CROSS_PREFIX, QEMU_BINARY, find_cross_compiler,
                                         find_qemu, find_qemu_binary, find_sysroot,
                                         qemu_cache_dir, qemu_version)
from pytest_sme2.emulation.wheel import (cached_executorch_dir, download_command, entry_dir,
                                         target_executorch_dir)
from pytest_sme2.errors import Sme2Error
from pytest_sme2.provision import apt
from pytest_sme2.runners.native import build_native_runner, cached_native_runner

TARGET = "aarch64-linux-gnu"
SUITE = "trixie-backports"
SOURCES_FILE = Path("/etc/apt/sources.list.d/pytest-sme2-trixie-backports.sources")
PIN_FILE = Path("/etc/apt/preferences.d/pytest-sme2-trixie-backports")
SOURCES_TEXT = f"""\
# Added by `{SETUP_COMMAND}` for qemu-user (QEMU >= 11 emulates SME2).
# Pinned at priority 1 (preferences.d): only what is asked for by name comes from here.
Types: deb
URIs: http://deb.debian.org/debian
Suites: {SUITE}
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""
PIN_TEXT = f"""\
# Added by `{SETUP_COMMAND}`: nothing from {SUITE} unless asked for by name.
Package: *
Pin: release n={SUITE}
Pin-Priority: 1
"""
QEMU_PACKAGE = "qemu-user"
CROSS_PACKAGE = "g++-aarch64-linux-gnu"
# From the .deb only what runs and its licence: the package holds 40 emulators (470 MB).
QEMU_MEMBERS = (f"./usr/bin/{QEMU_BINARY}", "./usr/share/doc/qemu-user/copyright")


@dataclass(frozen=True)
class Step:
    name: str
    commands: list[str]                      # shell lines: dry-run output, manual instructions
    check: Callable[[], str | None]          # what is already there, or None if the step is due
    run: Callable[[], str]                   # do it; say what was done
    needs: str = ""                          # "root" (apt as root), "apt" (apt, any user) or ""
    elsewhere: str = ""                      # what to do instead on a host without Debian's apt


def _apt(argv: list[str], what: str, cwd: Path | None = None) -> str:
    """Run an apt command; its stdout, or EmulationError with apt's own error line."""
    try:
        proc = apt.run_apt(argv, cwd=cwd)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise EmulationError(f"{what} failed: {e}") from None
    if proc.returncode != 0:
        lines = [ln.strip() for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
        first = next((ln for ln in lines if ln.startswith("E:")), lines[-1] if lines else "")
        raise EmulationError(f"{what} failed (exit {proc.returncode}): {first[:300]}")
    return proc.stdout


# --- what is there ---------------------------------------------------------------------------

def _qemu_there() -> str | None:
    try:
        qemu, version = find_qemu_binary()
    except Sme2Error:
        return None
    return f"QEMU {version} at {qemu}"


def _cross_there() -> str | None:
    try:
        cc, cxx = find_cross_compiler()
        sysroot = find_sysroot()
    except Sme2Error:
        return None
    if not shutil.which("cmake"):
        return None
    return f"{cxx}, sysroot {sysroot}"


def _apt_source_there() -> str | None:
    try:
        sources, pin = SOURCES_FILE.read_text(), PIN_FILE.read_text()
    except OSError:
        return None
    # An admin may point the file at a mirror: the suite and the pin are what matter.
    pin_ok = f"Pin: release n={SUITE}" in pin and "Pin-Priority: 1\n" in pin + "\n"
    if f"Suites: {SUITE}" in sources and pin_ok:
        return f"{SOURCES_FILE}, pinned in {PIN_FILE}"
    return None


def _apt_source_check() -> str | None:
    qemu = _qemu_there()
    return f"not needed: {qemu}" if qemu else _apt_source_there()


def _write_apt_source() -> str:
    SOURCES_FILE.parent.mkdir(parents=True, exist_ok=True)
    PIN_FILE.parent.mkdir(parents=True, exist_ok=True)
    SOURCES_FILE.write_text(SOURCES_TEXT)
    PIN_FILE.write_text(PIN_TEXT)
    return f"wrote {SOURCES_FILE} and {PIN_FILE}"


def _lists_there() -> str | None:
    qemu, cross = _qemu_there(), _cross_there()
    if qemu and cross:
        return "not needed: nothing left to install from apt"
    if (qemu or apt.apt_knows(QEMU_PACKAGE, SUITE)) and (cross or apt.apt_knows(CROSS_PACKAGE)):
        return f"the package lists offer {QEMU_PACKAGE} from {SUITE} and {CROSS_PACKAGE}"
    return None


def _apt_update() -> str:
    _apt(["apt-get", "update"], "apt-get update")
    return "updated"


def _cross_packages() -> list[str]:
    return [CROSS_PACKAGE] + ([] if shutil.which("cmake") else ["cmake"])


def _install_cross() -> str:
    _apt(apt.install_argv(_cross_packages()), f"apt-get install {CROSS_PACKAGE}")
    cc, cxx = find_cross_compiler()
    return f"{cxx}, sysroot {find_sysroot()}"


def _qemu_commands() -> list[str]:
    dest = shlex.quote(str(qemu_cache_dir()))
    return [f'cd "$(mktemp -d)" && apt-get download {QEMU_PACKAGE}/{SUITE}',
            f"V=$(dpkg-deb -f {QEMU_PACKAGE}_*.deb Version | sed -E 's/^[0-9]+://; s/[+~-].*//')",
            f'mkdir -p {dest}/"$V" && dpkg-deb --fsys-tarfile {QEMU_PACKAGE}_*.deb | '
            f'tar -x -C {dest}/"$V" {" ".join(QEMU_MEMBERS)}']


def _fetch_qemu() -> str:
    """apt-get download the .deb, unpack qemu-aarch64 into <cache>/qemu/<version>/."""
    root = qemu_cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".tmp-", dir=root))
    try:
        _apt(["apt-get", "download", f"{QEMU_PACKAGE}/{SUITE}"],
             f"apt-get download {QEMU_PACKAGE}/{SUITE}", cwd=work)
        debs = sorted(work.glob(f"{QEMU_PACKAGE}_*.deb"))
        if not debs:
            raise EmulationError(f"apt-get download {QEMU_PACKAGE}/{SUITE} left no .deb in {work}")
        tree = work / "tree"
        tree.mkdir()
        tar = subprocess.run(f"dpkg-deb --fsys-tarfile {shlex.quote(str(debs[0]))} | tar -x -C "
                             f"{shlex.quote(str(tree))} {' '.join(QEMU_MEMBERS)}",
                             shell=True, capture_output=True, text=True)
        qemu = tree / "usr" / "bin" / QEMU_BINARY
        if tar.returncode != 0 or not qemu.is_file():
            raise EmulationError(f"{debs[0].name} holds no usr/bin/{QEMU_BINARY} "
                                 f"({tar.stderr.strip()[:200]})")
        version = qemu_version(qemu)
        dest = root / version
        shutil.rmtree(dest, ignore_errors=True)
        os.rename(tree, dest)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return f"QEMU {version} at {dest / 'usr' / 'bin' / QEMU_BINARY}"


def _wheel_there() -> str | None:
    try:
        folder = cached_executorch_dir()
    except Sme2Error:
        return None
    return str(folder) if folder else None


def _fetch_wheel() -> str:
    return str(target_executorch_dir())


def _runner_there() -> str | None:
    try:
        binary = cached_native_runner(target=TARGET)
    except Sme2Error:
        return None
    return str(binary) if binary else None


def _build_runner() -> str:
    return str(build_native_runner(target=TARGET))


def _helpers_there() -> str | None:
    helpers = cached_target_helpers(TARGET)
    return str(helpers.probe.parent) if helpers else None


def _build_helpers() -> str:
    return str(build_target_helpers(TARGET).probe.parent)


def setup_steps() -> list[Step]:
    """What ``pytest-sme2 setup qemu`` does, in order."""
    version = package_version("executorch")
    heredoc = "tee {path} > /dev/null <<'EOF'\n{text}EOF"  # tee: works after sudo, > does not
    return [
        Step(f"apt source {SUITE} (pinned at priority 1)",
             [heredoc.format(path=SOURCES_FILE, text=SOURCES_TEXT),
              heredoc.format(path=PIN_FILE, text=PIN_TEXT)],
             _apt_source_check, _write_apt_source, needs="root"),
        Step("apt package lists", ["apt-get update"], _lists_there, _apt_update, needs="root"),
        Step(f"QEMU >= 11 user mode ({QEMU_PACKAGE} from {SUITE})", _qemu_commands(),
             _qemu_there, _fetch_qemu, needs="apt",
             elsewhere=f"get a {QEMU_BINARY} >= 11 (Debian's {QEMU_PACKAGE} from {SUITE} is "
                       f"static: its .deb unpacks anywhere with dpkg-deb or ar+tar) and export "
                       f"PYTEST_SME2_QEMU=/path/to/{QEMU_BINARY}"),
        Step(f"aarch64 cross compiler ({CROSS_PACKAGE})",
             [shlex.join(apt.install_argv(_cross_packages()))], _cross_there,
             _install_cross, needs="root",
             elsewhere=f"install {CROSS_PREFIX}gcc/g++ with an aarch64 glibc sysroot, and cmake; "
                       "export PYTEST_SME2_SYSROOT=<sysroot> unless it is /usr/aarch64-linux-gnu"),
        Step(f"aarch64 executorch {version} wheel",
             [shlex.join(download_command(version, Path("DIR"))) + "  # then unpacked into "
              f"{entry_dir(version)}"], _wheel_there, _fetch_wheel),
        Step(f"native runner for {TARGET} (cmake, {CROSS_PREFIX}g++)", [], _runner_there,
             _build_runner),
        Step(f"target helpers for {TARGET} (preload library, probe; {CROSS_PREFIX}gcc)", [],
             _helpers_there, _build_helpers),
    ]


# --- the check that matters -------------------------------------------------------------------

def verify_sme2() -> str:
    """Run the probe in the guest with -cpu max (SME2 must be seen) and with the hwcap mask
    preloaded (SME and SME2 must be hidden). The line to print; EmulationError otherwise."""
    tools = find_qemu()
    helpers = build_target_helpers(TARGET)

    def hwcap2(env: dict[str, str] | None) -> int:
        argv = tools.command([str(helpers.probe)], env=env)
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise EmulationError(f"running the probe under QEMU failed: {e}") from None
        value = parse_probe(proc.stdout).get("hwcap2")
        if proc.returncode != 0 or not isinstance(value, int):
            raise EmulationError(f"the probe under QEMU {tools.version} printed no hwcap2 (exit "
                                 f"{proc.returncode}: {proc.stderr.strip()[:200]})")
        return value

    seen = hwcap2(None)
    where = f"QEMU {tools.version} at {tools.qemu}"
    if not seen & HWCAP2_SME2:
        raise EmulationError(f"{where}: the guest does not see SME2 with -cpu max (hwcap2 "
                             f"{seen:#x}, bit 37 clear)")
    masked = hwcap2({"LD_PRELOAD": str(helpers.preload),
                     HWCAP2_CLEAR_ENV: hex(mask_bits("sme"))})
    if masked & (HWCAP2_SME | HWCAP2_SME2):
        raise EmulationError(f"{where}: the hwcap mask did not hide SME/SME2 (hwcap2 "
                             f"{masked:#x})")
    return (f"{where}: SME2 seen by the guest (hwcap2 {seen:#x}; with the hwcap mask "
            f"{masked:#x}, SME and SME2 hidden)")


# --- the command ------------------------------------------------------------------------------

def _instructions(i: int, total: int, step: Step, verb: str, sudo: bool,
                  debian: bool) -> list[str]:
    """Lines telling a person what step ``i`` would run (Debian) or needs (elsewhere)."""
    if not debian and step.needs:
        return [f"[{i}/{total}] {step.name}: {step.elsewhere}"] if step.elsewhere else []
    if not step.commands:
        built = "would build it" if verb.startswith("would") else "build it"
        return [f"[{i}/{total}] {step.name}: {built} (no root needed)"]
    prefix = "sudo " if sudo and step.needs == "root" else ""
    # Indented 4 spaces, heredoc bodies not at all: the block pastes into a shell as it is.
    return [f"[{i}/{total}] {step.name}: {verb}:"] + [
        "    " + prefix + cmd for cmd in step.commands]


def run_setup(dry_run: bool, out: Callable[[str], None] = print) -> int:
    """Provision (or, with ``dry_run``, say what would be done); 0 when SME2 is seen in the
    guest, 2 when a step failed or cannot be done here (the last line says why)."""
    steps = setup_steps()
    total = len(steps)
    not_debian = apt.not_debian_reason(SUITE)
    not_root = None if apt.is_root() else f"not root (uid {os.geteuid()}): the apt steps need root"
    sudo = not_debian is None and not_root is not None

    def blocked(step: Step) -> bool:
        return (step.needs == "root" and bool(not_debian or not_root)) or \
            (step.needs == "apt" and bool(not_debian))

    for i, step in enumerate(steps, 1):
        label = f"[{i}/{total}] {step.name}"
        have = step.check()
        if have:
            out(f"{label}: {have}" if have.startswith("not needed") else
                f"{label}: already there ({have})")
            continue
        if dry_run:
            for line in _instructions(i, total, step, "would run", sudo, not_debian is None):
                out(line)
            continue
        if blocked(step):
            # This step and every later one that needs apt: the person runs them, then setup.
            for j, later in enumerate(steps[i - 1:], i):
                if later.needs and (j == i or not later.check()):
                    for line in _instructions(j, total, later, "run", sudo, not_debian is None):
                        out(line)
            out(f"pytest-sme2: cannot provision here: {not_debian or not_root}; do the above, "
                f"then run `{SETUP_COMMAND}` again")
            return 2
        t0 = time.perf_counter()
        try:
            did = step.run()
        except Sme2Error as e:
            out(f"{label}: failed: {e}")
            return 2
        out(f"{label}: done in {time.perf_counter() - t0:.1f} s ({did})")
    if dry_run:
        out("then: run the probe under QEMU with -cpu max and check that the guest sees SME2 "
            "(AT_HWCAP2 bit 37)")
        return 0
    try:
        out(verify_sme2())
    except Sme2Error as e:
        out(f"pytest-sme2: {e}")
        return 2
    return 0
