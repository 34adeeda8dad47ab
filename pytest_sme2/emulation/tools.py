"""Find the host tools an emulated Arm64 target runs and builds with: QEMU user mode and the
aarch64-linux-gnu cross compiler (whose glibc sysroot is also QEMU's ``-L`` folder).

QEMU must be 11 or newer: 10.0 emulates SME but not SME2, and bookworm's 7.2 neither
(docs/emulated-sme2.md, "What was tried"). Every failure is one EmulationError line naming the
missing piece and the setup command.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from pytest_sme2._util.buildcache import cache_root
from pytest_sme2.emulation import SETUP_HINT, EmulationError

QEMU_ENV = "PYTEST_SME2_QEMU"        # path of a qemu-aarch64 to use instead of the search
SYSROOT_ENV = "PYTEST_SME2_SYSROOT"  # another aarch64 glibc sysroot (other distributions)
QEMU_BINARY = "qemu-aarch64"
MIN_QEMU = (11, 0)
DEFAULT_SYSROOT = Path("/usr/aarch64-linux-gnu")
LOADER = Path("lib") / "ld-linux-aarch64.so.1"
CROSS_PREFIX = "aarch64-linux-gnu-"

_VERSION = re.compile(r"\bversion\s+(\d+(?:\.\d+)+)")


@dataclass(frozen=True)
class QemuTools:
    qemu: Path            # qemu-aarch64 binary
    version: str          # "11.1.3"
    sysroot: Path         # -L folder: /usr/aarch64-linux-gnu

    def command(self, argv: list[str], cpu: str = "max",
                env: dict[str, str] | None = None) -> list[str]:
        """argv run in the guest: ``qemu-aarch64 -L SYSROOT -cpu CPU [-E K=V ...] argv``.
        ``-E`` sets the guest's environment only (LD_PRELOAD must not reach QEMU itself).
        QEMU splits each ``-E`` at its commas, with no escape: a value holding one would
        arrive cut in pieces, so it is refused here (EmulationError); pass such a value in
        QEMU's own environment, which QEMU hands to the guest (:func:`guest_env`)."""
        cmd = [str(self.qemu), "-L", str(self.sysroot), "-cpu", cpu]
        for key, value in (env or {}).items():
            if "," in value:
                raise EmulationError(f"{key}={value}: QEMU's -E splits at commas and cannot "
                                     "carry this value; pass it in QEMU's environment")
            cmd += ["-E", f"{key}={value}"]
        return cmd + [str(a) for a in argv]


# Set for the guest with -E, never in QEMU's own environment: QEMU (a dynamic build) would
# load the guest's aarch64 library itself.
QEMU_MUST_NOT_SEE = ("LD_PRELOAD", "LD_LIBRARY_PATH")


def guest_env(env: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """``env`` for a guest split in two: what goes through ``-E`` (QEMU splits those at
    commas) and what goes through QEMU's own environment, which it hands to the guest: values
    holding a comma (output paths such as ``out/q.native,sme2=off.maps.txt``). A loader
    variable holding a comma can go neither way: EmulationError naming it."""
    via_e, inherited = {}, {}
    for key, value in env.items():
        if "," not in value:
            via_e[key] = value
        elif key in QEMU_MUST_NOT_SEE:
            raise EmulationError(f"{value}: {key} for the emulated runner cannot hold a comma "
                                 "(QEMU's -E splits at commas); move it to a folder whose path "
                                 "has none (for the preload library: set XDG_CACHE_HOME)")
        else:
            inherited[key] = value
    return via_e, inherited


def qemu_cache_dir() -> Path:
    """Where ``pytest-sme2 setup qemu`` unpacks QEMU: one ``<version>/usr/bin/qemu-aarch64``
    folder per version."""
    return cache_root() / "qemu"


def parse_qemu_version(text: str) -> str | None:
    """'qemu-aarch64 version 11.1.3 (Debian 1:11.1.3+ds-1~bpo13+1)' -> '11.1.3'."""
    m = _VERSION.search(text)
    return m.group(1) if m else None


def version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version))


def has_sme2(version: str) -> bool:
    return version_tuple(version)[:2] >= MIN_QEMU


def qemu_version(qemu: Path) -> str:
    """The version ``qemu --version`` prints; EmulationError when it cannot be run or read."""
    try:
        proc = subprocess.run([str(qemu), "--version"], capture_output=True, text=True,
                              timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise EmulationError(f"cannot run {qemu} --version ({e}); {SETUP_HINT}") from None
    version = parse_qemu_version(proc.stdout)
    if proc.returncode != 0 or version is None:
        first = (proc.stdout + proc.stderr).strip().splitlines()[:1] or ["no output"]
        raise EmulationError(f"{qemu} --version printed no QEMU version ({first[0][:120]}); "
                             f"{SETUP_HINT}")
    return version


def cached_qemus() -> list[Path]:
    """qemu-aarch64 binaries unpacked by setup, newest version first."""
    root = qemu_cache_dir()
    found = [p for p in root.glob(f"*/usr/bin/{QEMU_BINARY}")
             if p.is_file() and parse_qemu_version(f"version {p.parents[2].name}")]
    return sorted(found, key=lambda p: version_tuple(p.parents[2].name), reverse=True)


def _locate_qemu() -> Path:
    wanted = os.environ.get(QEMU_ENV)
    if wanted:  # the user chose one: never fall back to another silently
        path = Path(wanted).expanduser()
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise EmulationError(f"{QEMU_ENV}={wanted}: no such executable; point it at a "
                                 f"{QEMU_BINARY} >= {MIN_QEMU[0]} or unset it and {SETUP_HINT}")
        return path
    cached = cached_qemus()
    if cached:
        return cached[0]
    on_path = shutil.which(QEMU_BINARY)
    if on_path:
        return Path(on_path)
    raise EmulationError(f"no QEMU user mode found ({QEMU_BINARY} >= {MIN_QEMU[0]}: not in "
                         f"${QEMU_ENV}, {qemu_cache_dir()} or on PATH); {SETUP_HINT}")


def find_sysroot() -> Path:
    sysroot = Path(os.environ.get(SYSROOT_ENV) or DEFAULT_SYSROOT)
    if not (sysroot / LOADER).is_file():
        raise EmulationError(f"no aarch64 glibc sysroot: {sysroot / LOADER} is missing (QEMU's "
                             f"-L folder, installed with g++-aarch64-linux-gnu); {SETUP_HINT}")
    return sysroot


def find_qemu_binary() -> tuple[Path, str]:
    """(qemu-aarch64, its version) for a QEMU that emulates SME2; the sysroot is not checked."""
    qemu = _locate_qemu()
    version = qemu_version(qemu)
    if not has_sme2(version):
        raise EmulationError(f"{QEMU_BINARY} {version} at {qemu} cannot emulate SME2 (SME2 "
                             f"needs QEMU >= {MIN_QEMU[0]}; 10.0 has SME only); {SETUP_HINT}")
    return qemu, version


def find_qemu() -> QemuTools:
    """QEMU user mode with SME2 and the sysroot it loads guest programs from."""
    qemu, version = find_qemu_binary()
    return QemuTools(qemu, version, find_sysroot())


def find_cross_compiler() -> tuple[str, str]:
    """(cc, cxx): resolved paths of aarch64-linux-gnu-gcc and -g++."""
    names = [f"{CROSS_PREFIX}gcc", f"{CROSS_PREFIX}g++"]
    found = [shutil.which(n) for n in names]
    missing = [n for n, p in zip(names, found) if not p]
    if missing:
        raise EmulationError(f"no aarch64 cross compiler: {' and '.join(missing)} not on PATH "
                             f"(Debian package g++-aarch64-linux-gnu); {SETUP_HINT}")
    cc, cxx = (os.path.realpath(p) for p in found)  # type: ignore[arg-type]
    return cc, cxx


def compiler_version(compiler: str) -> str:
    """First line of ``compiler --version`` (part of every cache key built with it)."""
    try:
        proc = subprocess.run([compiler, "--version"], capture_output=True, text=True,
                              timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise EmulationError(f"cannot run the compiler {compiler} ({e}); {SETUP_HINT}") from None
    first = (proc.stdout.strip().splitlines() or [""])[0]
    if proc.returncode != 0 or not first:
        raise EmulationError(f"{compiler} --version failed (exit {proc.returncode}); {SETUP_HINT}")
    return first
