"""The aarch64 ExecuTorch wheel that emulated-target builds link against.

Only what a C++ build needs is kept (``include/``, ``lib/``, ``share/``: headers, the shared
libraries with KleidiAI SME2 kernels, the CMake config), under
``~/.cache/pytest-sme2/target-wheels/executorch-<version>-aarch64/executorch``. The version is
the installed executorch's: the exported .pte and the target runtime must match. A manifest
records the version read from the wheel's own metadata, and a folder whose manifest names
another version is never used.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Callable

from pytest_sme2._util.buildcache import cache_root, cached_build
from pytest_sme2.emulation import SETUP_HINT, EmulationError
from pytest_sme2._util.versions import package_version

PLATFORM = "manylinux_2_28_aarch64"
KEEP = ("executorch/include/", "executorch/lib/", "executorch/share/")
MANIFEST = "manifest.json"
CMAKE_CONFIG = Path("lib") / "cmake" / "executorch" / "executorch-config.cmake"
DOWNLOAD_TIMEOUT_S = 900.0


def wheels_cache_dir() -> Path:
    return cache_root() / "target-wheels"


def entry_dir(version: str) -> Path:
    return wheels_cache_dir() / f"executorch-{version}-aarch64"


def _wanted_version(version: str | None) -> str:
    version = version or package_version("executorch")
    if version == "missing":
        raise EmulationError("executorch is not installed, so there is no version to fetch the "
                             f"aarch64 wheel of; install pytest-sme2's dependencies and "
                             f"{SETUP_HINT}")
    return version


def cached_executorch_dir(version: str | None = None) -> Path | None:
    """The cached folder of ``version`` (default: installed), None when not cached.
    EmulationError when the folder is there but holds another version or is incomplete."""
    version = _wanted_version(version)
    entry = entry_dir(version)
    if not entry.exists():
        return None
    try:
        manifest = json.loads((entry / MANIFEST).read_text())
    except (OSError, ValueError):
        raise EmulationError(f"{entry}: no readable {MANIFEST}, so its executorch version is "
                             f"unknown; remove the folder and {SETUP_HINT}") from None
    held = manifest.get("version")
    if held != version:
        raise EmulationError(f"{entry} holds the aarch64 wheel of executorch {held}, not "
                             f"{version}; remove the folder and {SETUP_HINT}")
    folder = entry / "executorch"
    if not (folder / CMAKE_CONFIG).is_file():
        raise EmulationError(f"{folder / CMAKE_CONFIG} is missing; remove {entry} and "
                             f"{SETUP_HINT}")
    return folder


def target_executorch_dir(version: str | None = None,
                          progress: Callable[[str], None] | None = None) -> Path:
    """Folder holding include/, lib/ and lib/cmake/executorch of the aarch64 wheel of
    ``version`` (default: the installed executorch's), downloaded with pip on first use."""
    version = _wanted_version(version)
    say = progress or (lambda msg: None)
    try:
        hit = cached_executorch_dir(version)
    except EmulationError as e:
        hit = None
        say(f"replacing the cached aarch64 wheel: {e}")
    if hit:
        return hit
    entry = entry_dir(version)

    def lookup(_: Path) -> Path | None:
        try:
            return cached_executorch_dir(version)
        except EmulationError:   # another version or incomplete: replaced below
            return None

    def fill(out: Path) -> dict:
        say(f"downloading the aarch64 executorch {version} wheel ({PLATFORM}) ...")
        manifest = _unpack(_download(version, out / "download"), version, out)
        (out / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        shutil.rmtree(out / "download")
        return manifest

    folder, manifest = cached_build(entry, lookup, fill)
    if manifest is not None:
        say(f"unpacked {manifest['wheel']} into {entry}")
    return folder


def download_command(version: str, dest: Path) -> list[str]:
    """pip's own resolver picks the wheel; the Python tag is this interpreter's (the C++
    libraries are the same in every cpXY wheel of a release)."""
    py = f"{sys.version_info.major}.{sys.version_info.minor}"
    return [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
            "--platform", PLATFORM, "--python-version", py, "--disable-pip-version-check",
            f"executorch=={version}", "-d", str(dest)]


def _download(version: str, dest: Path) -> Path:
    try:
        proc = subprocess.run(download_command(version, dest), capture_output=True, text=True,
                              timeout=DOWNLOAD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise EmulationError(f"downloading the aarch64 executorch {version} wheel timed out "
                             f"after {DOWNLOAD_TIMEOUT_S:g} s; {SETUP_HINT} again") from None
    wheels = sorted(dest.glob("executorch-*.whl")) if dest.is_dir() else []
    if proc.returncode != 0 or not wheels:
        lines = proc.stderr.strip().splitlines()
        why = ([ln.strip() for ln in lines if ln.startswith("ERROR")] or lines[-1:]
               or ["pip wrote no wheel"])
        raise EmulationError(f"cannot download the aarch64 executorch {version} wheel "
                             f"({PLATFORM}): {why[-1][:200]}; check the network (or that PyPI "
                             f"has that wheel) and {SETUP_HINT}")
    return wheels[0]


def _unpack(wheel: Path, version: str, out: Path) -> dict:
    """Extract the C++ parts of ``wheel`` into ``out/executorch``; the manifest to record."""
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        metadata = next((n for n in names if n.endswith(".dist-info/METADATA")), None)
        held = None
        if metadata:
            for line in zf.read(metadata).decode("utf-8", "replace").splitlines():
                if line.startswith("Version:"):
                    held = line.split(":", 1)[1].strip()
                    break
        if held != version:  # pip resolved something else: never use it as `version`
            raise EmulationError(f"{wheel.name} is executorch {held}, not {version}; "
                                 f"{SETUP_HINT} again")
        for name in names:
            if name.startswith(KEEP) and ".." not in Path(name).parts:
                zf.extract(name, out)
    if not (out / "executorch" / CMAKE_CONFIG).is_file():
        raise EmulationError(f"{wheel.name} ships no executorch/{CMAKE_CONFIG}, so nothing can "
                             "be built against it for aarch64")
    return {"package": "executorch", "version": version, "platform": PLATFORM,
            "wheel": wheel.name, "sha256": hashlib.sha256(wheel.read_bytes()).hexdigest()}
