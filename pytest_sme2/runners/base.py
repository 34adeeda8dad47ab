"""What every runner takes and gives. A runner turns a RunRequest into an argv that a device
executes; the device (host, Android) owns processes, files and time limits."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from pytest_sme2.errors import Sme2Error


class RunnerError(Sme2Error):
    pass


@dataclass(frozen=True)
class RunRequest:
    pte: Path
    etdump: Path
    threads: int = 1
    runs: int = 30
    warmup: int = 3
    inputs: Path | None = None      # tensor file (pytest_sme2.tensorfile) of the inputs
    outputs: Path | None = None     # where to save the last run's outputs, if wanted
    timeout_s: float = 600.0
    # Where to write the executed-kernels CSV, on devices that can trace execution (QEMU).
    kernel_trace: Path | None = None

    @property
    def executions(self) -> int:
        """Warm-up runs are traced too; analysis drops the first ``warmup`` runs."""
        return self.warmup + self.runs


@dataclass(frozen=True)
class RunOutcome:
    etdump: Path
    wall_s: float
    stdout: str
    stderr: str
    kernel_trace: Path | None = None    # executed kernels (CSV), when the device traced them


@dataclass(frozen=True)
class RunnerInfo:
    """Identity of a runner as recorded with results: name, kind and build labels."""

    name: str
    kind: str
    labels: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"name": self.name, "kind": self.kind, "labels": dict(self.labels)}


class Runner(Protocol):
    info: RunnerInfo
    # A name from pytest_sme2.hwcaps.MASKS: the device hides those CPU features from this
    # runner's process (same binary, SME2 off). None: the process sees the CPU as it is.
    hwcap_mask: str | None

    def command(self, request: RunRequest) -> list[str]:
        """The argv that runs ``request`` and writes ``request.etdump``. A remote device calls
        it with a request whose paths are already device paths, then replaces ``argv[0]`` with
        the pushed copy of ``device_files()[0]``."""
        ...

    def device_files(self) -> list[Path]:
        """Host files a remote device needs: the executable first, then its shared libraries.
        Raises RunnerError for runners that can only run on the host."""
        ...
