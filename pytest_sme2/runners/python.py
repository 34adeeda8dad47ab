"""The in-process ExecuTorch Python runtime, run in a child process per setting: the thread pool
must be sized before the model loads (resetting it later leaves XNNPACK with a dangling pool),
and a crash in the runtime must not take the pytest session down."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from pathlib import Path

from pytest_sme2.runners.base import RunnerError, RunnerInfo, RunRequest
from pytest_sme2.versions import package_version




@dataclass(frozen=True)
class PythonRunner:
    info: RunnerInfo = field(default_factory=lambda: RunnerInfo(
        "python", "python", {"runtime": "executorch.pybindings",
                             "executorch": package_version("executorch")}))
    python: str = sys.executable

    def command(self, request: RunRequest) -> list[str]:
        argv = [self.python, "-m", "pytest_sme2.runners.python_child",
                "--pte", str(request.pte), "--etdump", str(request.etdump),
                "--threads", str(request.threads), "--runs", str(request.runs),
                "--warmup", str(request.warmup)]
        if request.inputs:
            argv += ["--inputs", str(request.inputs)]
        if request.outputs:
            argv += ["--outputs", str(request.outputs)]
        return argv

    def device_files(self) -> list[Path]:
        raise RunnerError("runner 'python' runs only on the host (it is the ExecuTorch Python "
                          "runtime); use the 'native' runner or an executor_runner binary on a "
                          "remote device")
