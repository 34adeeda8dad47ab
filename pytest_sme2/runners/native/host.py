"""The native runner built for this machine against the installed executorch wheel.

Cache key = runner.cpp + CMakeLists.txt + executorch version + compiler (path and version) +
machine. A hit checks two files and runs nothing."""

from __future__ import annotations

import platform
from pathlib import Path

from pytest_sme2._util.buildcache import sources_hash
from pytest_sme2.runners.base import RunnerError
from pytest_sme2.runners.native.cmake import (BUILD_TYPE, SOURCE_DIR, SOURCES, Toolchain,
                                              cmake_build, executorch_cmake_dir, write_manifest)
from pytest_sme2._util.versions import package_version


def cache_key(tc: Toolchain) -> str:
    h = sources_hash(SOURCE_DIR, SOURCES, "the native runner", RunnerError)
    for part in (package_version("executorch"), tc.cxx, tc.cxx_version, platform.machine(),
                 BUILD_TYPE):
        h.update(part.encode() + b"\0")
    return h.hexdigest()[:16]





def build_host_into(out: Path, tc: Toolchain, key: str, failed_log: Path) -> dict:
    seconds, libs, log = cmake_build(out, tc, [f"-DCMAKE_CXX_COMPILER={tc.cxx}"],
                                      executorch_cmake_dir(), failed_log)
    return write_manifest(out, tc, {
        "key": key,
        "labels": {
            "executorch": package_version("executorch"),
            "compiler": tc.compiler_label,
            "build_type": BUILD_TYPE,
            # The build's key (runner.cpp, CMakeLists, compiler, executorch): the gate tells a
            # runner built from other code from the same runner.
            "build": key,
            "machine": platform.machine(),
            # The wheel's XNNPACK build flags are not published, and x86 has no SME2 at all:
            # the build cannot tell, so it does not claim.
            "sme2": "unknown",
            "source": "executorch wheel",
        },
        "libs": libs,
        "build_seconds": round(seconds, 3),
    }, log)


