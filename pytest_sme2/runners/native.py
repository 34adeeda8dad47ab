"""pytest-sme2's own C++ runner (``runners/native/runner.cpp``), built on demand with CMake
against the installed executorch wheel and cached.

Cache key = runner.cpp + CMakeLists.txt + executorch version + compiler (path and version) +
machine. A hit checks two files and runs nothing. Concurrent pytest-xdist workers take a per-key
file lock; the build happens in a temporary folder that is renamed into place, so nobody ever
runs a half-linked binary. Each cache entry holds the binary and ``build.json`` (labels, the
shared libraries it links, build time); the build tree is not kept.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import platform
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from pytest_sme2.locking import file_lock
from pytest_sme2.runners.base import RunnerError, RunnerInfo, RunRequest
from pytest_sme2.versions import package_version

SOURCE_DIR = Path(__file__).parent / "native"
SOURCES = ("runner.cpp", "CMakeLists.txt")
BINARY = "sme2_runner"
MANIFEST = "build.json"
BUILD_TYPE = "Release"
STEP_TIMEOUT_S = 900.0


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pytest-sme2" / "native-runner"




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


def find_toolchain() -> Toolchain:
    cmake = shutil.which("cmake")
    if not cmake:
        raise RunnerError("the native runner is built with CMake (>= 3.19), which is not on PATH; "
                          "install cmake or use --sme2-runner python")
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


def cache_key(tc: Toolchain) -> str:
    h = hashlib.sha256()
    for name in SOURCES:
        try:
            h.update((SOURCE_DIR / name).read_bytes())
        except OSError:
            raise RunnerError(f"the native runner's source {SOURCE_DIR / name} is missing from "
                              "this installation of pytest-sme2 (reinstall it with its package "
                              "data)") from None
    for part in (package_version("executorch"), tc.cxx, tc.cxx_version, platform.machine(),
                 BUILD_TYPE):
        h.update(part.encode() + b"\0")
    return h.hexdigest()[:16]




def _is_built(folder: Path) -> bool:
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


def _step(stage: str, argv: list[str], log: list[str], log_path: Path) -> None:
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


def build_native_runner(cache_dir: Path | None = None, force: bool = False,
                        progress: Callable[[str], None] | None = None) -> Path:
    """Path of the cached native runner binary, configuring and building it first if needed."""
    cache_dir = Path(cache_dir) if cache_dir else default_cache_dir()
    tc = find_toolchain()
    key = cache_key(tc)
    folder = cache_dir / key
    if not force and _is_built(folder):
        return folder / BINARY
    with file_lock(cache_dir / f".{key}.lock"):
        if not force and _is_built(folder):  # another worker built it while we waited
            return folder / BINARY
        say = progress or (lambda msg: None)
        say(f"building the native runner ({tc.compiler_label}, executorch "
            f"{package_version('executorch')}) ...")
        tmp = cache_dir / f".tmp-{key}-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        try:
            manifest = _build_into(tmp, tc, key, cache_dir / f"build-{key}.failed.log")
            if folder.exists():
                shutil.rmtree(folder)
            os.rename(tmp, folder)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        say(f"built the native runner in {manifest['build_seconds']:.1f} s: {folder / BINARY}")
    return folder / BINARY


def _build_into(out: Path, tc: Toolchain, key: str, failed_log: Path) -> dict:
    build = out / "build"
    log: list[str] = []
    t0 = time.perf_counter()
    configure = [tc.cmake, "-S", str(SOURCE_DIR), "-B", str(build),
                 f"-DCMAKE_BUILD_TYPE={BUILD_TYPE}", f"-DCMAKE_CXX_COMPILER={tc.cxx}",
                 f"-Dexecutorch_DIR={executorch_cmake_dir()}"]
    if tc.ninja:
        configure += ["-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={tc.ninja}"]
    _step("configure", configure, log, failed_log)
    _step("build", [tc.cmake, "--build", str(build), "--parallel"], log, failed_log)
    seconds = time.perf_counter() - t0
    shutil.copy2(build / BINARY, out / BINARY)
    libs = [ln for ln in (build / "runtime-libs.txt").read_text().splitlines() if ln.strip()]
    manifest = {
        "key": key,
        "labels": {
            "executorch": package_version("executorch"),
            "compiler": tc.compiler_label,
            "build_type": BUILD_TYPE,
            "machine": platform.machine(),
            # The wheel's XNNPACK build flags are not published, and x86 has no SME2 at all:
            # the build cannot tell, so it does not claim.
            "sme2": "unknown",
            "source": "executorch wheel",
        },
        "libs": libs,
        "cmake": subprocess.run([tc.cmake, "--version"], capture_output=True,
                                text=True).stdout.split("\n")[0],
        "compiler_version": tc.cxx_version,
        "build_seconds": round(seconds, 3),
    }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    (out / "build.log").write_text("".join(log))
    shutil.rmtree(build)
    return manifest


@dataclass(frozen=True)
class NativeRunner:
    """Runs a binary built from runner.cpp. ``libs`` are the shared libraries it links by
    RUNPATH: on the host the RUNPATH (``$ORIGIN`` first, then the package's lib folder) finds
    them in place; a device that pushes ``device_files()`` into one folder makes ``$ORIGIN``
    find them there. libc/libstdc++/libgcc_s are system libraries and never pushed. A binary
    from a static source build (docs/native-runner.md) has no ``libs``."""

    binary: Path
    info: RunnerInfo = field(default_factory=lambda: RunnerInfo("native", "native"))
    libs: tuple[Path, ...] = ()

    @classmethod
    def from_build(cls, binary: Path, name: str = "native") -> NativeRunner:
        """The runner for a binary with ``build.json`` beside it (as build_native_runner leaves)."""
        binary = Path(binary)
        if not binary.is_file():
            raise RunnerError(f"native runner binary {binary} does not exist")
        try:
            manifest = json.loads((binary.parent / MANIFEST).read_text())
        except (OSError, ValueError):
            manifest = {}
        labels = {str(k): str(v) for k, v in manifest.get("labels", {}).items()}
        return cls(binary, RunnerInfo(name, "native", labels),
                   tuple(Path(p) for p in manifest.get("libs", [])))

    def command(self, request: RunRequest) -> list[str]:
        argv = [str(self.binary), "--model_path", str(request.pte),
                "--etdump_path", str(request.etdump), "--num_executions", str(request.runs),
                "--warmup", str(request.warmup), "--cpu_threads", str(request.threads)]
        if request.inputs:
            argv += ["--input_file", str(request.inputs)]
        if request.outputs:
            argv += ["--output_file", str(request.outputs)]
        return argv

    def device_files(self) -> list[Path]:
        return [self.binary, *self.libs]


def native_runner(cache_dir: Path | None = None, force: bool = False,
                  progress: Callable[[str], None] | None = None) -> NativeRunner:
    """Build (or reuse) the native runner and describe it."""
    return NativeRunner.from_build(build_native_runner(cache_dir, force, progress))
