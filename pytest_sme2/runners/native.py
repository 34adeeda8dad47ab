"""pytest-sme2's own C++ runner (``runners/native/runner.cpp``), built on demand with CMake
against the installed executorch wheel and cached.

Cache key = runner.cpp + CMakeLists.txt + executorch version + compiler (path and version) +
machine. A hit checks two files and runs nothing. Concurrent pytest-xdist workers take a per-key
file lock; the build happens in a temporary folder that is renamed into place, so nobody ever
runs a half-linked binary. Each cache entry holds the binary and ``build.json`` (labels, the
shared libraries it links, build time); the build tree is not kept.

``target="aarch64-linux-gnu"`` cross-builds the same sources for an emulated Arm64 device
(pytest_sme2.emulation): a generated CMake toolchain file, the aarch64-linux-gnu cross compiler,
and the aarch64 executorch wheel of the installed version. Its key adds the target, the cross
compiler and the wheel (version and folder: the binary's RUNPATH names that folder).
"""

from __future__ import annotations

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

from pytest_sme2.errors import Sme2Error
from pytest_sme2.buildcache import cached_build, sources_hash
from pytest_sme2.runners.base import RunnerError, RunnerInfo, RunRequest
from pytest_sme2.versions import package_version

SOURCE_DIR = Path(__file__).parent / "native"
SOURCES = ("runner.cpp", "CMakeLists.txt")
BINARY = "sme2_runner"
MANIFEST = "build.json"
BUILD_TYPE = "Release"
STEP_TIMEOUT_S = 900.0
HOST = "host"
CROSS_TARGETS = ("aarch64-linux-gnu",)
TOOLCHAIN_FILE = "toolchain.cmake"
XNNPACK_LIB = "libexecutorch_backend_xnnpack.so"


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


def _find_cmake() -> str:
    cmake = shutil.which("cmake")
    if not cmake:
        raise RunnerError("the native runner is built with CMake (>= 3.19), which is not on PATH; "
                          "install cmake or use --sme2-runner python")
    return cmake


def find_toolchain() -> Toolchain:
    cmake = _find_cmake()
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
    h = sources_hash(SOURCE_DIR, SOURCES, "the native runner", RunnerError)
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
        return _cached_build(cache_dir, key, force, progress, what,
                             lambda out, failed: _build_cross_into(out, cross, key, failed))
    tc = find_toolchain()
    key = cache_key(tc)
    what = f"{tc.compiler_label}, executorch {package_version('executorch')}"
    return _cached_build(cache_dir, key, force, progress, what,
                         lambda out, failed: _build_into(out, tc, key, failed))


def _cached_build(cache_dir: Path, key: str, force: bool,
                  progress: Callable[[str], None] | None, what: str,
                  build: Callable[[Path, Path], dict]) -> Path:
    say = progress or (lambda msg: None)

    def fill(out: Path) -> dict:
        say(f"building the native runner ({what}) ...")
        return build(out, cache_dir / f"build-{key}.failed.log")

    binary, manifest = cached_build(
        cache_dir / key, lambda folder: folder / BINARY if _is_built(folder) else None, fill,
        force)
    if manifest is not None:
        say(f"built the native runner in {manifest['build_seconds']:.1f} s: {binary}")
    return binary


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
    return cache_dir / key / BINARY if _is_built(cache_dir / key) else None


def _cmake_build(out: Path, tc: Toolchain, compiler_args: list[str], executorch_dir: Path,
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
    _step("configure", configure, log, failed_log)
    _step("build", [tc.cmake, "--build", str(build), "--parallel"], log, failed_log)
    seconds = time.perf_counter() - t0
    shutil.copy2(build / BINARY, out / BINARY)
    libs = [ln for ln in (build / "runtime-libs.txt").read_text().splitlines() if ln.strip()]
    return seconds, libs, log


def _write_manifest(out: Path, tc: Toolchain, manifest: dict, log: list[str]) -> dict:
    manifest["cmake"] = subprocess.run([tc.cmake, "--version"], capture_output=True,
                                       text=True).stdout.split("\n")[0]
    manifest["compiler_version"] = tc.cxx_version
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    (out / "build.log").write_text("".join(log))
    shutil.rmtree(out / "build")
    return manifest


def _build_into(out: Path, tc: Toolchain, key: str, failed_log: Path) -> dict:
    seconds, libs, log = _cmake_build(out, tc, [f"-DCMAKE_CXX_COMPILER={tc.cxx}"],
                                      executorch_cmake_dir(), failed_log)
    return _write_manifest(out, tc, {
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
        "build_seconds": round(seconds, 3),
    }, log)


# --- cross builds (emulated Arm64 targets) --------------------------------------------------

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
    from pytest_sme2.emulation.tools import compiler_version, find_cross_compiler
    from pytest_sme2.emulation.wheel import cached_executorch_dir, target_executorch_dir

    if target == "android":             # a phone's bionic programs: an NDK build, not ours
        raise RunnerError("the native runner is not built for Android phones here (that needs "
                          "an NDK build, docs/native-runner.md): pass one with --runner "
                          "NAME=/path/to/executor_runner,libs=DIR")
    if target not in CROSS_TARGETS:
        raise RunnerError(f"unknown native runner target {target!r}; known: "
                          f"{', '.join((HOST, *CROSS_TARGETS))}")
    cc, cxx = find_cross_compiler()
    version = package_version("executorch")
    folder = target_executorch_dir(version, progress) if fetch else cached_executorch_dir(version)
    if folder is None:
        raise RunnerError(f"the aarch64 executorch {version} wheel is not cached yet")
    toolchain = Toolchain(_find_cmake(), cxx, compiler_version(cxx), shutil.which("ninja"))
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


def _build_cross_into(out: Path, cross: CrossBuild, key: str, failed_log: Path) -> dict:
    toolchain_file = out / TOOLCHAIN_FILE  # kept with the binary: how it was made
    toolchain_file.write_text(toolchain_file_text(cross))
    seconds, libs, log = _cmake_build(out, cross.toolchain,
                                      [f"-DCMAKE_TOOLCHAIN_FILE={toolchain_file}"],
                                      cross.cmake_dir, failed_log)
    return _write_manifest(out, cross.toolchain, {
        "key": key,
        "target": cross.target,
        "labels": {
            "executorch": cross.executorch_version,
            "compiler": cross.toolchain.compiler_label,
            "build_type": BUILD_TYPE,
            "machine": cross.machine,
            "sme2": wheel_sme2_label(cross.executorch_dir / "lib"),
            "source": "executorch wheel (aarch64)",
        },
        "libs": libs,
        "build_seconds": round(seconds, 3),
    }, log)


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
    hwcap_mask: str | None = None       # see runners.base.Runner

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
                  progress: Callable[[str], None] | None = None,
                  target: str = HOST) -> NativeRunner:
    """Build (or reuse) the native runner for ``target`` and describe it."""
    return NativeRunner.from_build(build_native_runner(cache_dir, force, progress, target))
