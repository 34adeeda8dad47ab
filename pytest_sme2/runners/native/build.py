"""pytest-sme2's own C++ runner built on demand, for the host or a device's target, and cached:
the CMake steps and the cache are :mod:`.cmake`'s, a cross build for an Arm64 Linux target
:mod:`.cross`'s; the build for this machine is here.

The host build is against the installed executorch wheel. Its cache key = runner.cpp +
CMakeLists.txt + executorch version + compiler (path and version) + machine. A hit checks two
files and runs nothing."""

from __future__ import annotations

import platform
from pathlib import Path
from typing import Callable

from pytest_sme2.errors import Sme2Error
from pytest_sme2._util.buildcache import sources_hash
from pytest_sme2.runners.base import RunnerError
from pytest_sme2.runners.native.cmake import (BINARY, BUILD_TYPE, HOST, SOURCE_DIR, SOURCES,
                                              Toolchain, cached_runner_build, cmake_build,
                                              default_cache_dir, executorch_cmake_dir,
                                              find_toolchain, is_built, write_manifest)
from pytest_sme2.runners.native.cross import build_cross_into, cross_cache_key, find_cross_build
from pytest_sme2._util.versions import package_version


def build_native_runner(cache_dir: Path | None = None, force: bool = False,
                        progress: Callable[[str], None] | None = None,
                        target: str = HOST) -> Path:
    """Path of the cached native runner binary, configuring and building it first if needed.
    ``target``: "host", or "aarch64-linux-gnu" for an emulated Arm64 device."""
    cache_dir = Path(cache_dir) if cache_dir else default_cache_dir()
    if target != HOST:
        cross = find_cross_build(target, progress)
        key = cross_cache_key(cross)
        what = (f"{target}, {cross.toolchain.compiler_label}, aarch64 executorch "
                f"{cross.executorch_version} wheel")
        return cached_runner_build(cache_dir, key, force, progress, what,
                             lambda out, failed: build_cross_into(out, cross, key, failed))
    tc = find_toolchain()
    key = cache_key(tc)
    what = f"{tc.compiler_label}, executorch {package_version('executorch')}"
    return cached_runner_build(cache_dir, key, force, progress, what,
                         lambda out, failed: build_host_into(out, tc, key, failed))


def cached_native_runner(cache_dir: Path | None = None, target: str = HOST) -> Path | None:
    """The cached binary for ``target`` if it is built, without building or downloading."""
    cache_dir = Path(cache_dir) if cache_dir else default_cache_dir()
    if target == HOST:
        key = cache_key(find_toolchain())
    else:
        try:
            key = cross_cache_key(find_cross_build(target, fetch=False))
        except Sme2Error:  # no cross compiler, wheel not fetched: not built either
            return None
    return cache_dir / key / BINARY if is_built(cache_dir / key) else None


# -- the build for this machine ---------------------------------------------------------------

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
