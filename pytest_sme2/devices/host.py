"""The machine pytest runs on: runners are local processes."""

from __future__ import annotations

import signal
import subprocess
import time
from dataclasses import dataclass
from functools import cached_property

from pytest_sme2.devices.facts import DeviceFacts, host_facts
from pytest_sme2.runners.base import Runner, RunnerError, RunOutcome, RunRequest

STDERR_TAIL_LINES = 8


def stderr_tail(text: str, lines: int = STDERR_TAIL_LINES) -> str:
    kept = [ln for ln in text.strip().splitlines() if ln.strip()][-lines:]
    return " | ".join(kept) if kept else "(no stderr)"


@dataclass
class HostDevice:
    spec: str = "host"

    @cached_property
    def _cached_facts(self) -> DeviceFacts:
        return host_facts()

    def facts(self) -> DeviceFacts:
        return self._cached_facts

    def run(self, runner: Runner, request: RunRequest) -> RunOutcome:
        name = runner.info.name
        check_host = getattr(runner, "check_host", None)
        if check_host is not None:  # a foreign-architecture binary: say so before exec fails
            check_host()
        request.etdump.parent.mkdir(parents=True, exist_ok=True)
        request.etdump.unlink(missing_ok=True)  # a stale trace must never be read as this run's
        argv = runner.command(request)
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=request.timeout_s)
        except subprocess.TimeoutExpired:
            raise RunnerError(f"runner {name!r} on {request.pte.name}: no result within "
                              f"{request.timeout_s:g} s; killed (raise the time limit or "
                              "lower --runs)") from None
        except OSError as e:
            raise RunnerError(f"runner {name!r}: cannot start {argv[0]} ({e.strerror})") from None
        wall = time.perf_counter() - t0
        if proc.returncode < 0:
            sig = signal.Signals(-proc.returncode).name
            raise RunnerError(f"runner {name!r} on {request.pte.name} was killed by {sig}; "
                              f"stderr: {stderr_tail(proc.stderr)}")
        if proc.returncode != 0:
            from pytest_sme2.runners.binary import explain_failure

            cause = explain_failure(proc.stderr)
            what = f"{cause} (exited with status {proc.returncode})" if cause else \
                f"exited with status {proc.returncode}"
            raise RunnerError(f"runner {name!r} on {request.pte.name} {what}; "
                              f"stderr: {stderr_tail(proc.stderr)}")
        if not request.etdump.is_file() or request.etdump.stat().st_size == 0:
            raise RunnerError(f"runner {name!r} on {request.pte.name} succeeded but wrote no "
                              f"ETDump at {request.etdump} (was it built with the event tracer?)")
        return RunOutcome(request.etdump, wall, proc.stdout, proc.stderr)
