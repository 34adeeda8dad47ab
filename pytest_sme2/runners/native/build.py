"""pytest-sme2's own C++ runner built on demand, for the host or a device's target, and
cached (:mod:`.cmake`, :mod:`.host`, :mod:`.cross`)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from pytest_sme2.errors import Sme2Error
from pytest_sme2.runners.native.cmake import (BINARY, HOST, cached_runner_build, default_cache_dir,
                                              find_toolchain, is_built)
from pytest_sme2.runners.native.cross import build_cross_into, cross_cache_key, find_cross_build
from pytest_sme2.runners.native.host import build_host_into, cache_key
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


