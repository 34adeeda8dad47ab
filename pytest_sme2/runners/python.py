"""The in-process ExecuTorch Python runtime, run in a child process per setting: the thread pool
must be sized before the model loads (resetting it later leaves XNNPACK with a dangling pool),
and a crash in the runtime must not take the pytest session down.

Each run's process is forked from a server that imported torch and the runtime once
(:mod:`pytest_sme2.runners.fork_server`): a fresh interpreter pays that import — seconds — on
every run. Where no server can run, each run starts a fresh interpreter, and says so once."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from pytest_sme2.runners.base import RunnerBase, RunnerError, RunRequest
from pytest_sme2.results.device import RunnerInfo
from pytest_sme2.runners.fork_server import CLIENT, ForkServer, shared_server
from pytest_sme2._util.versions import package_version


@dataclass(frozen=True)
class PythonRunner(RunnerBase):
    info: RunnerInfo = field(default_factory=lambda: RunnerInfo(
        "python", "python", {"runtime": "executorch.pybindings",
                             "executorch": package_version("executorch")}))
    python: str = sys.executable
    hwcap_mask: str | None = None
    times_untraced: bool = True     # see runners.base.Runner
    probes: bool = True             # --probe (python_child)
    brings_own_operators: bool = False  # the wheel's, imported by the child before the load
    fork: bool = True               # False: a fresh interpreter per run, as before the server
    progress: Callable[[str], None] | None = field(default=None, compare=False, repr=False)
    server: ForkServer = field(default_factory=shared_server, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.server.python != self.python:  # the server must be the interpreter asked for
            object.__setattr__(self, "server", shared_server(self.python))

    def child_args(self, request: RunRequest) -> list[str]:
        argv = ["--pte", str(request.pte), "--etdump", str(request.etdump),
                "--threads", str(request.threads), "--runs", str(request.runs),
                "--warmup", str(request.warmup)]
        if request.data:
            argv += ["--data", str(request.data)]
        if request.untraced:
            argv += ["--trace-runs", str(request.trace_runs),
                     "--trace-warmup", str(request.trace_warmup)]
        if request.probe:
            argv += ["--probe", str(request.probe), "--probe-runs", str(request.probe_runs)]
        return argv + request.feed_args("--inputs", "--outputs")

    def command(self, request: RunRequest) -> list[str]:
        """A client of the fork server (a process the device can time, kill and read like any
        runner), or a fresh interpreter when there is no server."""
        address = self._server_address()
        if address is None:
            return [self.python, "-m", "pytest_sme2.runners.python_child",
                    *self.child_args(request)]
        return [self.python, "-S", str(CLIENT), address, *self.child_args(request)]

    def _server_address(self) -> str | None:
        if not self.fork:
            return None
        address = self.server.address()
        if address is None and not self.server.problem_told and self.progress:  # said once
            self.server.problem_told = True
            self.progress(f"runner {self.info.name!r}: {self.server.problem}; each run starts "
                          "a fresh interpreter instead (seconds per run)")
        return address

    def close(self) -> None:
        """Stop the fork server (it also stops when this process ends)."""
        self.server.stop()

    def serving(self) -> tuple[int, ...]:
        """The fork server that forks this runner's runs."""
        return (self.server.pid,) if self.fork and self.server.pid is not None else ()

    def device_files(self) -> list[Path]:
        raise RunnerError("runner 'python' runs only on the host (it is the ExecuTorch Python "
                          "runtime); use the 'native' runner or an executor_runner binary on a "
                          "remote device")
