"""Building pytest-sme2's C++ runner (``runner.cpp`` beside this module) with CMake, and
the build cache both the host and the cross builds fill.

A cache entry is one folder named by its key: the binary and ``build.json`` (labels, the shared
libraries it links, build time); the build tree is not kept. Concurrent pytest-xdist workers
take a per-key file lock; the build happens in a temporary folder that is renamed into place, so
nobody ever runs a half-linked binary (:mod:`pytest_sme2._util.buildcache`)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from pytest_sme2._util.buildcache import cache_root, cached_build
from pytest_sme2.runners.base import RunnerError

SOURCE_DIR = Path(__file__).parent
SOURCES = ("runner.cpp", "CMakeLists.txt")
BINARY = "sme2_runner"
MANIFEST = "build.json"
BUILD_TYPE = "Release"
STEP_TIMEOUT_S = 900.0
HOST = "host"



def default_cache_dir() -> Path:
    return cache_root() / "native-runner"




def executorch_cmake_dir() -> Path:
    """Folder of the wheel's executorch-config.cmake, found without importing executorch."""
    spec = importlib.util.find_spec("executorch")
    roots = list(spec.submodule_search_locations or []) if spec else []
    for root in roots:
        cfg = Path(root) / "lib" / "cmake" / "executorch"
        if (cfg / "executorch-config.cmake").is_file():
            return cfg
    raise RunnerError("the installed executorch package ships no lib/cmake/executorch/"
                      "executorch-config.cmake; the native runner cannot be built against it")


@dataclass(frozen=True)
class Toolchain:
    cmake: str
    cxx: str            # resolved path, passed to CMake so the key and the build agree
    cxx_version: str    # first line of ``cxx --version``
    ninja: str | None

    @property
    def compiler_label(self) -> str:
        # "c++ (Debian 12.2.0-14+deb12u1) 12.2.0" -> "gcc 12.2.0"; clang prints its version
        # after the word "version".
        words = self.cxx_version.split()
        family = "clang" if "clang" in self.cxx_version.lower() else "gcc"
        ver = words[words.index("version") + 1] if "version" in words[:-1] else \
            (words[-1] if words else "?")
        return f"{family} {ver}"


def find_cmake() -> str:
    cmake = shutil.which("cmake")
    if not cmake:
        raise RunnerError("the native runner is built with CMake (>= 3.19), which is not on PATH; "
                          "install cmake or use --runner python")
    return cmake


def find_toolchain() -> Toolchain:
    cmake = find_cmake()
    wanted = os.environ.get("CXX")
    if wanted:
        cxx = shutil.which(wanted)
        if not cxx:  # the user chose a compiler: never fall back to another one silently
            raise RunnerError(f"CXX={wanted} is not an executable on PATH; fix or unset it to "
                              "build the native runner")
    else:
        cxx = shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    if not cxx:
        raise RunnerError("no C++ compiler found (set CXX or install g++/clang++) to build the "
                          "native runner")
    cxx = os.path.realpath(cxx)
    try:
        out = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=60)
        first = (out.stdout.strip().splitlines() or [""])[0]
    except (OSError, subprocess.TimeoutExpired) as e:
        raise RunnerError(f"cannot run the C++ compiler {cxx} ({e})") from None
    return Toolchain(cmake, cxx, first, shutil.which("ninja"))


def is_built(folder: Path) -> bool:
    binary = folder / BINARY
    return binary.is_file() and os.access(binary, os.X_OK) and (folder / MANIFEST).is_file()


# First line worth showing from a failed step: compiler errors, then linker, then CMake.
_ERROR_PATTERNS = [re.compile(p) for p in (
    r"(fatal )?error:", r"undefined reference", r"ld returned", r"CMake Error", r"\berror\b")]


def first_error_line(log: str) -> str:
    lines = [ln.strip() for ln in log.splitlines() if ln.strip()]
    for pattern in _ERROR_PATTERNS:
        for i, ln in enumerate(lines):
            if pattern.search(ln):
                # CMake puts the message on the next line(s): "CMake Error at X:12 (message):"
                if ln.startswith("CMake Error") and ln.endswith(":") and i + 1 < len(lines):
                    return f"{ln} {lines[i + 1]}"[:300]
                return ln[:300]
    return (lines[-1] if lines else "(no output)")[:300]


def run_step(stage: str, argv: list[str], log: list[str], log_path: Path) -> None:
    log.append(f"$ {' '.join(argv)}\n")
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=STEP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        log.append(f"(timed out after {STEP_TIMEOUT_S:g} s)\n")
        proc = None
    if proc is not None:
        log.append(proc.stdout + proc.stderr)
    if proc is None or proc.returncode != 0:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log_path.write_text("".join(log))
        what = "timed out" if proc is None else first_error_line(proc.stdout + proc.stderr)
        raise RunnerError(f"building the native runner failed at the {stage} stage: {what} "
                          f"(full log: {log_path})")


def cached_runner_build(cache_dir: Path, key: str, force: bool,
                  progress: Callable[[str], None] | None, what: str,
                  build: Callable[[Path, Path], dict]) -> Path:
    say = progress or (lambda msg: None)

    def fill(out: Path) -> dict:
        say(f"building the native runner ({what}) ...")
        return build(out, cache_dir / f"build-{key}.failed.log")

    binary, manifest = cached_build(
        cache_dir / key, lambda folder: folder / BINARY if is_built(folder) else None, fill,
        force)
    if manifest is not None:
        say(f"built the native runner in {manifest['build_seconds']:.1f} s: {binary}")
    return binary


def cmake_build(out: Path, tc: Toolchain, compiler_args: list[str], executorch_dir: Path,
                 failed_log: Path) -> tuple[float, list[str], list[str]]:
    """Configure and build into ``out/build``; (seconds, runtime libs, log), binary copied."""
    build = out / "build"
    log: list[str] = []
    t0 = time.perf_counter()
    configure = [tc.cmake, "-S", str(SOURCE_DIR), "-B", str(build),
                 f"-DCMAKE_BUILD_TYPE={BUILD_TYPE}", *compiler_args,
                 f"-Dexecutorch_DIR={executorch_dir}"]
    if tc.ninja:
        configure += ["-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={tc.ninja}"]
    run_step("configure", configure, log, failed_log)
    run_step("build", [tc.cmake, "--build", str(build), "--parallel"], log, failed_log)
    seconds = time.perf_counter() - t0
    shutil.copy2(build / BINARY, out / BINARY)
    libs = [ln for ln in (build / "runtime-libs.txt").read_text().splitlines() if ln.strip()]
    return seconds, libs, log


def write_manifest(out: Path, tc: Toolchain, manifest: dict, log: list[str]) -> dict:
    manifest["cmake"] = subprocess.run([tc.cmake, "--version"], capture_output=True,
                                       text=True).stdout.split("\n")[0]
    manifest["compiler_version"] = tc.cxx_version
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    (out / "build.log").write_text("".join(log))
    shutil.rmtree(out / "build")
    return manifest


