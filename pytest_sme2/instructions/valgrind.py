"""valgrind for instruction counts: finding it (3.18 or newer), the symbol of
``Method::execute`` to toggle collection on, the callgrind command line, and the counting
processes run side by side with one-line failures (killed, unknown instructions, time-outs).
What is counted, and why: :mod:`pytest_sme2.instructions.count`."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Sequence

from pytest_sme2.errors import Sme2Error
from pytest_sme2.instructions.callgrind import Costs, read_profiles

VALGRIND_PACKAGE = "valgrind"           # the Debian/Ubuntu package that provides it
MIN_VALGRIND = (3, 18)      # glibc 2.34 (pthread moved into libc.so.6) is supported from 3.18
METHOD_EXECUTE = "executorch::runtime::Method::execute()"
METHOD_EXECUTE_MANGLED = "_ZN10executorch7runtime6Method7executeEv"
THREAD_START = "start_thread"           # glibc's entry of every thread it creates
DEFAULT_TIMEOUT_S = 1800.0


class InstructionCountError(Sme2Error):
    pass


# -- valgrind ----------------------------------------------------------------------------------


@lru_cache(maxsize=8)
def _version_of(valgrind: str) -> str:
    try:
        out = subprocess.run([valgrind, "--version"], capture_output=True, text=True,
                             timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise InstructionCountError(f"cannot run {valgrind} --version ({e}); install the "
                                    f"Debian package '{VALGRIND_PACKAGE}'") from None
    text = (out.stdout or out.stderr).strip()
    return text.splitlines()[0] if text else ""


def find_valgrind() -> tuple[str, str]:
    """(path, version) of a valgrind that can count, or InstructionCountError in one line."""
    path = shutil.which("valgrind")
    if path is None:
        raise InstructionCountError(
            "instructions are counted with valgrind, which is not on PATH: install the Debian "
            f"package '{VALGRIND_PACKAGE}' (apt-get install {VALGRIND_PACKAGE}) or measure "
            "time only")
    text = _version_of(path)
    m = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    if not m:
        raise InstructionCountError(f"{path} --version printed {text[:60]!r}, not a valgrind "
                                    f"version; install the Debian package '{VALGRIND_PACKAGE}'")
    version = tuple(int(g) for g in m.groups() if g is not None)
    if version[:2] < MIN_VALGRIND:
        need = ".".join(map(str, MIN_VALGRIND))
        raise InstructionCountError(
            f"valgrind {m.group(0)} ({path}) is too old to count instructions ({need} or newer "
            f"needed): install a newer Debian package '{VALGRIND_PACKAGE}'")
    return path, m.group(0)


def _nm_symbols(path: Path, dynamic: bool) -> str | None:
    nm = shutil.which("nm")
    if nm is None:
        return None
    argv = [nm, "--defined-only", *(["-D"] if dynamic else []), str(path)]
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout if out.returncode == 0 else ""


def _demangle(symbol: str) -> str | None:
    cxxfilt = shutil.which("c++filt")
    if cxxfilt is None:
        return None
    try:
        out = subprocess.run([cxxfilt, symbol], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    name = out.stdout.strip()
    return name if out.returncode == 0 and name and name != symbol else None


def execute_symbol(binary: Path, libs: Sequence[Path] = ()) -> str:
    """The name callgrind gives ``Method::execute``, checked against the library that defines
    it (``nm -D --defined-only``, demangled with ``c++filt``): libexecutorch.so of the wheel, or
    the binary itself for a static build. Without binutils the known name is assumed."""
    candidates = [(Path(p), True) for p in libs if Path(p).name.startswith("libexecutorch.so")]
    candidates.append((Path(binary), False))
    looked = []
    for path, dynamic in candidates:
        symbols = _nm_symbols(path, dynamic)
        if symbols is None:                        # no nm: trust the known spelling
            return METHOD_EXECUTE
        looked.append(path.name)
        if re.search(rf"\s{METHOD_EXECUTE_MANGLED}$", symbols, re.M):
            return _demangle(METHOD_EXECUTE_MANGLED) or METHOD_EXECUTE
    raise InstructionCountError(
        f"{', '.join(looked)} define no {METHOD_EXECUTE} ({METHOD_EXECUTE_MANGLED}); "
        "instructions per execution cannot be told from loading")


# -- one counting run ---------------------------------------------------------------------------


def callgrind_argv(valgrind: str, symbol: str, out_file: Path, log_file: Path) -> list[str]:
    return [valgrind, "--tool=callgrind", "--cache-sim=no", "--branch-sim=no",
            "--separate-threads=yes", "--collect-atstart=no",
            f"--toggle-collect={symbol}", f"--toggle-collect={THREAD_START}",
            f"--callgrind-out-file={out_file}", f"--log-file={log_file}"]


_KILLED = re.compile(r"Process terminating with default action of signal (\d+) \((\w+)\)")
_VEX = re.compile(r"(vex \S+: unhandled instruction bytes[^\n]*|valgrind: Unrecognised "
                  r"instruction[^\n]*)")


@dataclass
class ValgrindProcess:
    executions: int
    folder: Path
    proc: subprocess.Popen | None = None
    stdout: str = ""
    stderr: str = ""


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1][:300] if lines else "(no stderr)"


def _failure(name: str, model: Path, p: ValgrindProcess) -> InstructionCountError:
    log = ""
    try:
        log = (p.folder / "valgrind.log").read_text(errors="replace")
    except OSError:
        pass
    code = p.proc.returncode if p.proc else None
    m = _KILLED.search(log)
    if (code is not None and code < 0) or m:
        sig = m.group(2) if m else signal.Signals(-code).name
        vex = _VEX.search(log)
        why = f" ({vex.group(1).strip()})" if vex else ""
        return InstructionCountError(
            f"runner {name!r} on {model.name} was killed by {sig} under valgrind{why}; "
            f"stderr: {_last_line(p.stderr)}")
    return InstructionCountError(
        f"runner {name!r} on {model.name} under valgrind exited with status {code}: "
        f"{_last_line(p.stderr or log)}")


def run_all(processes: list[ValgrindProcess], argvs: list[list[str]], timeout_s: float, name: str,
             model: Path) -> None:
    """Start every process, then wait for all (they run in parallel: each is one host thread
    under valgrind, and the counts do not depend on timing)."""
    try:
        for p, argv in zip(processes, argvs):
            try:
                p.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          start_new_session=True)
            except OSError as e:
                raise InstructionCountError(f"cannot start {argv[0]} ({e.strerror})") from None
        deadline = time.monotonic() + timeout_s
        for p in processes:
            try:
                out, err = p.proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise InstructionCountError(
                    f"runner {name!r} on {model.name} under valgrind gave no count within "
                    f"{timeout_s:g} s; killed") from None
            p.stdout, p.stderr = out.decode(errors="replace"), err.decode(errors="replace")
    finally:
        for p in processes:
            if p.proc is not None and p.proc.poll() is None:
                try:
                    os.killpg(p.proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                p.proc.communicate()            # reaps it and closes its pipes
    for p in processes:
        if p.proc.returncode != 0:
            raise _failure(name, model, p)


def process_costs(folder: Path) -> tuple[Costs, Costs]:
    """(calling thread, every other thread) of one process."""
    profiles = read_profiles(folder.glob("callgrind.out*"))
    return (Costs.of(p for p in profiles if p.thread == 1),
            Costs.of(p for p in profiles if p.thread != 1))
