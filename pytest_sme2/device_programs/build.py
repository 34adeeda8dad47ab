"""Build the target helpers (the preload library, the SME2 probe and the copy-bandwidth probe)
with the target's C compiler, cached under ``~/.cache/pytest-sme2/target-helpers/<target>-<key>``.

Key = both sources + the compile commands + the compiler (path and version) + target. Like the
native runner: a per-key file lock, a temporary folder renamed into place, a hit runs nothing.

Targets: ``aarch64-linux-gnu`` (QEMU, and phones through the bundled glibc loader; Debian's
cross gcc), ``android-arm64`` (bionic programs, a user's NDK build of executor_runner: the NDK's
``aarch64-linux-android<API>-clang``, with ANDROID_NDK or ANDROID_NDK_HOME set) and ``host``
(this machine's C compiler: sampling the host's runner).
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from pytest_sme2._util.buildcache import cache_root, cached_build, sources_hash
from pytest_sme2.emulation import EmulationError
from pytest_sme2.device_programs import SOURCE_DIR
from pytest_sme2.emulation.tools import find_cross_compiler, compiler_version

TARGETS = ("aarch64-linux-gnu", "android-arm64", "host")
PRELOAD_LIB = "libpytest_sme2_preload.so"
EXECUTE_CLOCK_LIB = "libpytest_sme2_execute_clock.so"
PROBE = "sme2_probe"
COPY_PROBE = "copy_bandwidth"
SOURCES = ("preload.c", "sme2_probe.c", "copy_bandwidth.c", "execute_clock.c")
MANIFEST = "helpers.json"
NDK_ENVS = ("ANDROID_NDK", "ANDROID_NDK_HOME")
ANDROID_API = 28   # Android 9: the oldest API level pytest-sme2 documents for arm64 phones
STEP_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class TargetHelpers:
    preload: Path         # the .so to preload (hwcap mask, maps, sampler: preload.c)
    probe: Path           # the probe executable
    copy_probe: Path      # the copy-bandwidth probe (copy_bandwidth.c)
    execute_clock: Path   # times Method::execute in a runner we cannot change (execute_clock.c)


def default_cache_dir() -> Path:
    return cache_root() / "target-helpers"


def android_clang(ndk: Path, api: int = ANDROID_API, host_tag: str | None = None) -> Path:
    """The NDK's target-specific clang driver (the NDK ships x86_64 host tools, also on macOS)."""
    host_tag = host_tag or f"{platform.system().lower()}-x86_64"
    return (ndk / "toolchains" / "llvm" / "prebuilt" / host_tag / "bin"
            / f"aarch64-linux-android{api}-clang")


def find_target_cc(target: str) -> str:
    """The C compiler for ``target``; EmulationError naming what is missing."""
    if target == "aarch64-linux-gnu":
        return find_cross_compiler()[0]
    if target == "host":

        cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
        if not cc:
            raise EmulationError("building the preload library for the host needs a C compiler "
                                 "(cc or gcc on PATH, or CC)")
        return cc
    if target == "android-arm64":
        ndk = next((os.environ[e] for e in NDK_ENVS if os.environ.get(e)), None)
        if not ndk:
            raise EmulationError("building the target helpers for android-arm64 needs an Android "
                                 "NDK: set ANDROID_NDK (or ANDROID_NDK_HOME) to its folder")
        clang = android_clang(Path(ndk))
        if not (clang.is_file() and os.access(clang, os.X_OK)):
            raise EmulationError(f"ANDROID_NDK={ndk} has no {clang.name} (looked for {clang}); "
                                 "point ANDROID_NDK at an NDK r23 or newer")
        return str(clang)
    raise EmulationError(f"unknown target {target!r} for the target helpers; known: "
                         f"{', '.join(TARGETS)}")


def helper_commands(cc: str, out: Path, src: Path = SOURCE_DIR) -> dict[str, list[str]]:
    """Output file name -> compile command. The preload library is a plain shared object that
    only needs libc and libdl (dlsym RTLD_NEXT, timer_create); the probe is dynamically linked so
    the library can be preloaded into it."""
    return {
        PRELOAD_LIB: [cc, "-O2", "-shared", "-fPIC", "-o", str(out / PRELOAD_LIB),
                      str(src / "preload.c"), "-ldl"],
        PROBE: [cc, "-O2", "-o", str(out / PROBE), str(src / "sme2_probe.c")],
        COPY_PROBE: [cc, "-O2", "-pthread", "-o", str(out / COPY_PROBE),
                     str(src / "copy_bandwidth.c")],
        EXECUTE_CLOCK_LIB: [cc, "-O2", "-shared", "-fPIC", "-o", str(out / EXECUTE_CLOCK_LIB),
                            str(src / "execute_clock.c"), "-ldl"],
    }


def helpers_cache_key(target: str, cc: str, cc_version: str) -> str:
    h = sources_hash(SOURCE_DIR, SOURCES, "the target helpers", EmulationError)
    # Commands with placeholder folders: the flags count, not where this copy is installed.
    commands = helper_commands(cc, Path("OUT"), Path("SRC"))
    for part in (target, cc, cc_version, json.dumps(commands, sort_keys=True)):
        h.update(part.encode() + b"\0")
    return h.hexdigest()[:16]


def _compiler_version(cc: str) -> str:
    return compiler_version(cc)


def _helpers_in(folder: Path) -> TargetHelpers | None:
    helpers = TargetHelpers(folder / PRELOAD_LIB, folder / PROBE, folder / COPY_PROBE,
                            folder / EXECUTE_CLOCK_LIB)
    if (helpers.preload.is_file() and helpers.execute_clock.is_file()
            and all(os.access(p, os.X_OK) for p in (helpers.probe, helpers.copy_probe))
            and (folder / MANIFEST).is_file()):
        return helpers
    return None


def cached_target_helpers(target: str = "aarch64-linux-gnu",
                          cache_dir: Path | None = None) -> TargetHelpers | None:
    """The built helpers for ``target`` if cached (never builds); None otherwise."""
    try:
        cc = find_target_cc(target)
        key = helpers_cache_key(target, cc, _compiler_version(cc))
    except EmulationError:
        return None
    return _helpers_in(Path(cache_dir or default_cache_dir()) / f"{target}-{key}")


def build_target_helpers(target: str = "aarch64-linux-gnu", cache_dir: Path | None = None,
                         progress: Callable[[str], None] | None = None) -> TargetHelpers:
    """The preload library and the probe for ``target``, compiled first if not cached."""
    cache_dir = Path(cache_dir) if cache_dir else default_cache_dir()
    cc = find_target_cc(target)
    cc_version = _compiler_version(cc)
    key = helpers_cache_key(target, cc, cc_version)
    folder = cache_dir / f"{target}-{key}"
    say = progress or (lambda msg: None)

    def fill(out: Path) -> bool:
        say(f"building the target helpers for {target} ({cc_version}) ...")
        for name, argv in helper_commands(cc, out).items():
            _compile(name, argv, target)
        manifest = {"target": target, "key": key, "compiler": cc,
                    "compiler_version": cc_version,
                    "commands": helper_commands(cc, Path("OUT"), Path("SRC"))}
        (out / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        return True

    helpers, built = cached_build(folder, _helpers_in, fill)
    if built:
        say(f"built the target helpers: {folder}")
    return helpers


def _compile(name: str, argv: list[str], target: str) -> None:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=STEP_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise EmulationError(f"compiling {name} for {target} failed: {e}") from None
    if proc.returncode != 0:
        lines = [ln.strip() for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
        first = next((ln for ln in lines if "error" in ln), lines[-1] if lines else "no output")
        raise EmulationError(f"compiling {name} for {target} failed: {first[:300]} "
                             f"(command: {' '.join(argv)})")
