"""Each commit's export session, without paying Python, torch and ExecuTorch's start-up per
commit: a pre-warmed exporter process imports pytest, torch, ``executorch.exir``, the XNNPACK
partitioner and this plugin once, then forks a child per commit that goes into the commit's
worktree, puts it first on ``sys.path`` and runs the pytest selection in-process.

The child imports the *commit's* code: the server imports none of the user's modules (no
conftest, no model file, no test module), so nothing of a commit is cached when it forks, and
every child is a fresh fork of that same state — what one commit registers never reaches the
next. Protocol on the server's stdin/stdout, one JSON line each way: ``{"cwd", "args", "log"}``
in; ``{"pid"}`` when forked, ``{"status"}`` when it ended (negative: killed by that signal).
The child's stdout and stderr go to ``log``. The server exits when its stdin closes.

:class:`FreshSessions` is the first version's way, a new ``python -m pytest`` per commit
(``--fresh-exports``): for a project whose conftest cannot share a parent process."""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import json
import os
import select
import signal
import subprocess
import sys
import sysconfig
import traceback
from pathlib import Path
from typing import NoReturn

from pytest_sme2.errors import Sme2Error

READY = "bisect-exporter ready"
# What every commit's session imports (the start-up each would pay), imported once before any
# fork; none of them is the user's code. Installed pytest plugins (entry points) are added by
# :func:`installed_plugins`.
WARM = ("pytest", "torch", "executorch.exir",
        "executorch.backends.xnnpack.partition.xnnpack_partitioner", "pandas",
        "pytest_sme2.plugin", "pytest_sme2.plugin.collector", "pytest_sme2.programs.export",
        "pytest_sme2.measure.session", "pytest_sme2.report.markdown.render")
START_TIMEOUT_S = 180.0


class SessionTimeout(Exception):
    """The commit's session ran past its time."""


class FreshSessions:
    """A fresh ``python -m pytest`` per commit."""

    def session(self, args: list[str], cwd: Path, log: Path, timeout_s: float) -> int:
        with open(log, "w") as out:
            try:
                return subprocess.run([sys.executable, "-m", "pytest", *args], cwd=cwd,
                                      stdout=out, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, timeout=timeout_s).returncode
            except subprocess.TimeoutExpired:
                raise SessionTimeout from None

    def close(self) -> None:
        pass


class WarmExporter:
    """The pre-warmed exporter process (see the module docstring), started at once so that it
    imports while the first worktree is checked out."""

    def __init__(self, cwd: Path, warm: tuple[str, ...] = WARM):
        self.proc = subprocess.Popen([sys.executable, "-m", "pytest_sme2.bisect.exporter",
                                      *warm],
                                     cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, bufsize=1)
        self.ready = False

    def _line(self, timeout_s: float) -> str:
        ready, _, _ = select.select([self.proc.stdout], [], [], max(timeout_s, 0.0))
        if not ready:
            raise SessionTimeout
        line = self.proc.stdout.readline()
        if not line:
            raise Sme2Error(f"the bisect's exporter process ended (exit {self.proc.wait()}): "
                            "rerun with --fresh-exports")
        return line.strip()

    def session(self, args: list[str], cwd: Path, log: Path, timeout_s: float) -> int:
        if not self.ready:
            if self._line(START_TIMEOUT_S) != READY:
                raise Sme2Error("the bisect's exporter process did not start: rerun with "
                                "--fresh-exports")
            self.ready = True
        self.proc.stdin.write(json.dumps({"cwd": str(cwd), "args": args, "log": str(log)})
                              + "\n")
        pid = json.loads(self._line(30.0))["pid"]
        try:
            return json.loads(self._line(timeout_s))["status"]
        except SessionTimeout:
            os.killpg(pid, signal.SIGKILL)      # the child leads its own group
            self._line(30.0)
            raise

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()


def open_sessions(cwd: Path, fresh: bool = False) -> FreshSessions | WarmExporter:
    """The pre-warmed exporter, or fresh sessions when asked or where forking a process that
    imported torch is not safe (macOS: the Objective-C runtime; Windows: no fork)."""
    if fresh or not sys.platform.startswith("linux"):
        return FreshSessions()
    return WarmExporter(cwd)


# -- the server process -----------------------------------------------------------------------

def _child(request: dict) -> NoReturn:
    status = 3
    try:
        os.setpgrp()
        fd = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.chdir(request["cwd"])
        sys.path.insert(0, request["cwd"])
        sys.argv = ["pytest", *request["args"]]
        status = int(sys.modules["pytest"].main(request["args"]))
    except BaseException:               # noqa: BLE001 - the child's last word, then its exit
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(status)


def installed_plugins() -> list[str]:
    """The modules of the pytest plugins installed in site-packages (pytest imports them at
    every start); a plugin installed from a checkout (editable: the user's own project, maybe)
    is left for each commit to import."""
    installed = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
    out = []
    for ep in importlib.metadata.entry_points(group="pytest11"):
        module = ep.value.split(":")[0]
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            continue
        if spec and spec.origin and any(spec.origin.startswith(p + os.sep) for p in installed):
            out.append(module)
    return out


def _first_export() -> None:
    """Lower a two-layer toy to an ExecuTorch program, as an export does: a process's first
    lowering pays ~10 s of lazy imports and one-time set-up (measured here at load 7: 13.8 s
    first, 3.9 s the next), paid here once instead of in every commit's child. On one intra-op
    thread, so that no OpenMP pool exists to be forked; nothing is loaded or run (no runtime,
    no XNNPACK thread pool)."""
    torch = sys.modules["torch"]
    exir = sys.modules["executorch.exir"]
    partitioner = sys.modules["executorch.backends.xnnpack.partition.xnnpack_partitioner"]
    toy = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()).eval()
    inputs = (torch.randn(2, 8),)
    edge = exir.to_edge_transform_and_lower(torch.export.export(toy, inputs),
                                            partitioner=[partitioner.XnnpackPartitioner()])
    edge.to_executorch()


def serve(warm: tuple[str, ...] = WARM) -> None:
    """Import ``warm`` (by default also the installed pytest plugins, and lower a toy once),
    then fork a child per request; each child gets back the parent's intra-op threads."""
    for name in [*warm, *(installed_plugins() if warm == WARM else [])]:
        try:
            importlib.import_module(name)
        except Exception:               # noqa: BLE001 - the child imports it and says why
            pass
    threads = None
    if warm == WARM and "torch" in sys.modules:
        threads = sys.modules["torch"].get_num_threads()
        sys.modules["torch"].set_num_threads(1)
        try:
            _first_export()
        except Exception:               # noqa: BLE001 - a warm-up only: the child exports
            pass

    print(READY, flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            if threads:
                sys.modules["torch"].set_num_threads(threads)
            _child(request)
        print(json.dumps({"pid": pid}), flush=True)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"status": os.waitstatus_to_exitcode(status)}), flush=True)


if __name__ == "__main__":
    serve(tuple(sys.argv[1:]) or WARM)
