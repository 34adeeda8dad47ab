"""pytest-sme2's own C++ runner (``runner.cpp`` and ``CMakeLists.txt`` in this folder): built
on demand with CMake for the host (:mod:`.build`) or cross-built for an Arm64 Linux target
(:mod:`.cross`), cached (:mod:`.cmake`, :mod:`.build`), and run (:mod:`.runner`)."""

from pytest_sme2.runners.native.build import build_native_runner, cache_key, cached_native_runner
from pytest_sme2.runners.native.cmake import (BINARY, HOST, MANIFEST, SOURCE_DIR, Toolchain,
                                              default_cache_dir, first_error_line,
                                              find_toolchain)
from pytest_sme2.runners.native.cross import (CROSS_TARGETS, CrossBuild, cross_cache_key,
                                              find_cross_build, toolchain_file_text,
                                              wheel_sme2_label)
from pytest_sme2.runners.native.runner import NativeRunner, native_runner

__all__ = ["BINARY", "CROSS_TARGETS", "CrossBuild", "HOST", "MANIFEST", "NativeRunner",
           "SOURCE_DIR", "Toolchain", "build_native_runner", "cache_key", "cached_native_runner",
           "cross_cache_key", "default_cache_dir", "find_cross_build", "find_toolchain",
           "first_error_line", "native_runner", "toolchain_file_text", "wheel_sme2_label"]
