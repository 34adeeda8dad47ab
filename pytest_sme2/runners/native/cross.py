"""The native runner cross-built for an Arm64 Linux target (``aarch64-linux-gnu``: QEMU, and
phones through the bundled glibc loader, :mod:`pytest_sme2.runners.native.bundle`): a generated
CMake toolchain file, the aarch64-linux-gnu cross compiler, and the aarch64 executorch wheel of
the installed version. Its key adds the target, the cross compiler and the wheel (version and
folder: the binary's RUNPATH names that folder)."""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from pytest_sme2._util.buildcache import sources_hash
from pytest_sme2.runners.base import RunnerError
from pytest_sme2.runners.native.cmake import (BUILD_TYPE, HOST, SOURCE_DIR, SOURCES,
                                              Toolchain, cmake_build, find_cmake, write_manifest)
from pytest_sme2._util.versions import package_version
from pytest_sme2.emulation.tools import compiler_version, find_cross_compiler
from pytest_sme2.emulation.wheel import cached_executorch_dir, target_executorch_dir

CROSS_TARGETS = ("aarch64-linux-gnu",)
TOOLCHAIN_FILE = "toolchain.cmake"
XNNPACK_LIB = "libexecutorch_backend_xnnpack.so"


@dataclass(frozen=True)
class CrossBuild:
    """What a cross build of the runner is made with."""
    target: str                # "aarch64-linux-gnu"
    toolchain: Toolchain       # cmake, the cross g++ and its version, ninja
    cc: str                    # the cross gcc (CMake's toolchain file names both)
    executorch_dir: Path       # the target wheel's executorch/ folder (include/, lib/)
    executorch_version: str

    @property
    def machine(self) -> str:
        return self.target.split("-", 1)[0]

    @property
    def cmake_dir(self) -> Path:
        return self.executorch_dir / "lib" / "cmake" / "executorch"


def find_cross_build(target: str, progress: Callable[[str], None] | None = None,
                     fetch: bool = True) -> CrossBuild:
    """Tools and wheel for ``target``; ``fetch=False`` never downloads (RunnerError instead)."""

    if target == "android":             # a phone that is not arm64: no build of ours runs there
        raise RunnerError("the native runner runs on arm64 phones (built for aarch64-linux-gnu "
                          "and started through its bundled glibc loader), and this phone is "
                          "not arm64: pass an executor_runner built for its ABI with --runner "
                          "NAME=/path/to/executor_runner,libs=DIR (docs/android.md)")
    if target not in CROSS_TARGETS:
        raise RunnerError(f"unknown native runner target {target!r}; known: "
                          f"{', '.join((HOST, *CROSS_TARGETS))}")
    cc, cxx = find_cross_compiler()
    version = package_version("executorch")
    folder = target_executorch_dir(version, progress) if fetch else cached_executorch_dir(version)
    if folder is None:
        raise RunnerError(f"the aarch64 executorch {version} wheel is not cached yet")
    toolchain = Toolchain(find_cmake(), cxx, compiler_version(cxx), shutil.which("ninja"))
    return CrossBuild(target, toolchain, cc, Path(os.path.realpath(folder)), version)


def toolchain_file_text(cross: CrossBuild) -> str:
    return (f"# pytest-sme2: cross build for {cross.target}\n"
            "set(CMAKE_SYSTEM_NAME Linux)\n"
            f"set(CMAKE_SYSTEM_PROCESSOR {cross.machine})\n"
            f"set(CMAKE_C_COMPILER {cross.cc})\n"
            f"set(CMAKE_CXX_COMPILER {cross.toolchain.cxx})\n")


def cross_cache_key(cross: CrossBuild) -> str:
    h = sources_hash(SOURCE_DIR, SOURCES, "the native runner", RunnerError)
    for part in (cross.target, cross.executorch_version, str(cross.executorch_dir),
                 cross.toolchain.cxx, cross.toolchain.cxx_version, toolchain_file_text(cross),
                 BUILD_TYPE):
        h.update(part.encode() + b"\0")
    return h.hexdigest()[:16]


def wheel_sme2_label(lib_dir: Path) -> str:
    """What the target wheel's XNNPACK holds, read from its symbol names. Kernels present is
    not kernels used: XNNPACK picks them only where the CPU reports SME2."""
    try:
        data = (lib_dir / XNNPACK_LIB).read_bytes()
    except OSError:
        return "unknown"
    kernels = set(re.findall(rb"kai_run_\w*_sme2_\w*", data))
    if kernels:
        return (f"kernels present ({len(kernels)} KleidiAI SME2 micro-kernels in the wheel's "
                "XNNPACK)")
    return "absent (no KleidiAI SME2 micro-kernels in the wheel's XNNPACK)"


def build_cross_into(out: Path, cross: CrossBuild, key: str, failed_log: Path) -> dict:
    toolchain_file = out / TOOLCHAIN_FILE  # kept with the binary: how it was made
    toolchain_file.write_text(toolchain_file_text(cross))
    seconds, libs, log = cmake_build(out, cross.toolchain,
                                      [f"-DCMAKE_TOOLCHAIN_FILE={toolchain_file}"],
                                      cross.cmake_dir, failed_log)
    return write_manifest(out, cross.toolchain, {
        "key": key,
        "target": cross.target,
        "labels": {
            "executorch": cross.executorch_version,
            "compiler": cross.toolchain.compiler_label,
            "build_type": BUILD_TYPE,
            "build": key,       # as the host build's: see runners/native/build.py
            "machine": cross.machine,
            "sme2": wheel_sme2_label(cross.executorch_dir / "lib"),
            "source": "executorch wheel (aarch64)",
        },
        "libs": libs,
        "build_seconds": round(seconds, 3),
    }, log)


