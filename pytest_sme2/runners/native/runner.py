"""The native runner as a :class:`~pytest_sme2.runners.base.Runner`."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from pytest_sme2.programs.kernel_libraries import KERNEL_LIBRARIES, host_load_order
from pytest_sme2.runners.base import RunnerBase, RunnerError, RunRequest
from pytest_sme2.results.device import RunnerInfo
from pytest_sme2.runners.native.build import build_native_runner
from pytest_sme2.runners.native.cmake import HOST, MANIFEST


@dataclass(frozen=True)
class NativeRunner(RunnerBase):
    """Runs a binary built from runner.cpp. ``libs`` are the shared libraries it links by
    RUNPATH: on the host the RUNPATH (``$ORIGIN`` first, then the package's lib folder) finds
    them in place; a device that pushes ``device_files()`` into one folder makes ``$ORIGIN``
    find them there. libc/libstdc++/libgcc_s are system libraries and never pushed. A binary
    from a static source build (docs/native-runner.md) has no ``libs``.

    A program that calls operators of the wheel's operator libraries (``llama::custom_sdpa``)
    gets them with ``--kernel_lib`` from this host's installation: only a build for the host
    can load them (:mod:`pytest_sme2.programs.kernel_libraries`)."""

    binary: Path
    info: RunnerInfo = field(default_factory=lambda: RunnerInfo("native", "native"))
    libs: tuple[Path, ...] = ()
    hwcap_mask: str | None = None       # see runners.base.Runner
    target: str = HOST                  # what it was built for (build.json's "target")
    preloads = True
    times_untraced = True               # --trace_executions (runner.cpp)
    probes = True                       # --probe_path (runner.cpp)
    brings_own_operators = False        # the wheel's, loaded on the host (--kernel_lib)

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
                   tuple(Path(p) for p in manifest.get("libs", [])),
                   target=str(manifest.get("target", HOST)))

    def command(self, request: RunRequest) -> list[str]:
        argv = [str(self.binary), "--model_path", str(request.pte),
                "--etdump_path", str(request.etdump), "--num_executions", str(request.runs),
                "--warmup", str(request.warmup), "--cpu_threads", str(request.threads)]
        if request.data:
            argv += ["--data_path", str(request.data)]
        for lib in self._kernel_libs(request):
            argv += ["--kernel_lib", str(lib)]
        if request.untraced:
            argv += ["--trace_executions", str(request.trace_runs),
                     "--trace_warmup", str(request.trace_warmup)]
        if request.probe:
            argv += ["--probe_path", str(request.probe),
                     "--probe_executions", str(request.probe_runs)]
        return argv + request.feed_args("--input_file", "--output_file")

    def _kernel_libs(self, request: RunRequest) -> tuple[Path, ...]:
        if not request.kernel_libraries:
            return ()
        if self.target != HOST:     # devices refuse such a program before this
            raise RunnerError(f"runner {self.info.name!r} is built for {self.target} and "
                              "cannot load this host's operator libraries "
                              f"({', '.join(request.kernel_libraries)})")
        wanted = [lib for lib in KERNEL_LIBRARIES if lib.name in request.kernel_libraries]
        return host_load_order(wanted)

    def device_files(self) -> list[Path]:
        return [self.binary, *self.libs]


def native_runner(cache_dir: Path | None = None, force: bool = False,
                  progress: Callable[[str], None] | None = None,
                  target: str = HOST) -> NativeRunner:
    """Build (or reuse) the native runner for ``target`` and describe it."""
    return NativeRunner.from_build(build_native_runner(cache_dir, force, progress, target))
