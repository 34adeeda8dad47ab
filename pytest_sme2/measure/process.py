"""One runner process read back outside a block's own flow: a load-only or ``pytest-sme2 run``
process (its timed runs, traced runs and start-up), the kernel-sampling evidence process
beside a benchmark, and the machine-state probe a block's process runs beside its own."""

from __future__ import annotations

import math
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

import pandas as pd

from pytest_sme2.analysis.latency import e2e_per_run
from pytest_sme2.analysis.machine_state import PROBE_MODEL
from pytest_sme2.analysis.llm_observer import MARKER as OBSERVER_MARKER
from pytest_sme2.analysis.observed_generation import forwards_only
from pytest_sme2.analysis.runner_summary import parse_summary
from pytest_sme2.analysis.startup import process_startup
from pytest_sme2.analysis.timing import process_runs
from pytest_sme2.devices.base import Device
from pytest_sme2.errors import Sme2Error
from pytest_sme2.measure.settings import BenchSettings
from pytest_sme2.programs.export import export_model
from pytest_sme2.readers.etdump import read_etdump
from pytest_sme2.results import ProcessStartup
from pytest_sme2.runners.base import Runner, RunOutcome, RunRequest


@dataclass(frozen=True)
class MeasuredProcess:
    """One runner process read back: its outcome, its ETDump's events (its timed runs' clock
    where it wrote none), Method::execute ms per timed run (warm-up runs included) and its
    start-up (load, first inference, memory)."""

    outcome: RunOutcome
    events: pd.DataFrame
    e2e_all: pd.Series
    startup: ProcessStartup


def measure_process(runner: Runner, device: Device, request: RunRequest,
                    measuring: Callable[[], AbstractContextManager[None]] | None = None
                    ) -> MeasuredProcess:
    """Run ``request`` once on ``device`` (inside ``measuring``: see ``BenchmarkRun``) and
    read it back: a block's load-only process, ``pytest-sme2 run`` on the command line."""
    with measuring() if measuring else nullcontext():
        outcome = device.run(runner, request)
    events = read_etdump(request.etdump) if request.writes_etdump else None
    summary = parse_summary(outcome.stdout)
    if events is not None and request.generation is not None and summary.generation is None \
            and OBSERVER_MARKER in outcome.stdout:     # a llama_main: its forwards only
        events = forwards_only(events)
    runs = process_runs(events, summary, request.warmup, str(request.etdump))
    e2e_all = e2e_per_run(runs.timed, source=str(request.etdump))
    return MeasuredProcess(outcome, events if events is not None else runs.timed, e2e_all,
                           process_startup(runs.timed, e2e_all, summary))


def process_sme2(device_sme2: bool | None, hwcap_mask: str | None) -> bool | None:
    """SME2 as the runner's process saw it: every mask hides SME2, whatever the device has."""
    return False if hwcap_mask else device_sme2


def process_sme(device_sme: bool | None, hwcap_mask: str | None) -> bool | None:
    """SME as the runner's process saw it: ``mask=sme`` hides it, ``mask=sme2`` keeps it."""
    return False if hwcap_mask == "sme" else device_sme


# CPU time an evidence process aims to sample: at a 250 Hz kernel tick, ~125 samples.
SAMPLE_CPU_S = 0.5
MAX_SAMPLE_EXECUTIONS = 5000
_ARM64_ABIS = ("arm64-v8a", "aarch64", "arm64")


def wants_sample(mode: str, device: Device, runner: Runner) -> bool:
    """Whether a benchmark gets an evidence process: ``on``, everywhere our preload library
    runs in the runner's process; ``auto``, where SME or SME2 can run (an Arm64 device that
    does not report both absent: sampling cannot change a verdict the hwcaps already settle).
    A device with SME but no SME2 is sampled: its SME level, and an SME2 kernel there (a
    dispatch bug), are only seen so."""
    if mode == "off" or not runner.preloads or not device.samples_kernels:
        return False
    facts = device.facts()
    return mode == "on" or (facts.abi in _ARM64_ABIS and
                            (facts.sme2 is not False or facts.sme is not False))


def sample_kernels(runner: Runner, device: Device, request: RunRequest, wall_s: float,
                   csv: Path) -> Path:
    """One evidence process (never a timed block: the timer signal perturbs what it
    samples): as many executions as make about ``SAMPLE_CPU_S`` seconds, judged by the block
    just measured (its wall time per execution, load included, so never too many)."""
    per_execution = max(wall_s / max(request.executions, 1), 1e-6)
    executions = min(MAX_SAMPLE_EXECUTIONS, max(1, math.ceil(SAMPLE_CPU_S / per_execution)))
    one = replace(request, etdump=csv.with_name(csv.name.replace(".sampled.csv",
                                                                ".sample.etdump")),
                  runs=executions, warmup=0, outputs=None, kernel_sample=csv,
                  timeout_s=max(request.timeout_s, 10 * wall_s), trace_runs=0, trace_warmup=0)
    outcome = device.run(runner, one)
    if outcome.kernel_sample is None:
        raise Sme2Error(f"device {device.spec} returned no kernel samples")
    return outcome.kernel_sample


def probe_program(runner: Runner, device: Device, settings: BenchSettings, threads: int,
                  progress: Callable[[str], None] | None = None) -> Path | None:
    """The machine-state probe's program for a block (exported once, cached), or None: not
    asked (--sme2-probe off; auto on an emulated CPU, whose speed means nothing, and at 2 or
    more threads), or a runner that cannot time it in its own process (a user's
    executor_runner).

    Why not at 2 threads: the probe runs on the block's thread pool, and there its small GEMM's
    hand-offs between threads move it on their own. 40 blocks of toy_cnn at 2 threads on this
    VM: probe times from 4.3 to 12.4 us, uncorrelated with the program's (r = -0.13; at 1
    thread r = +0.59, 4.1-4.3 us), so 7 of 20 pairs "straddled" a change of speed that the
    program never saw; an A/A at 2 threads left 671 of 768 pairs out for it."""
    if settings.probe == "off" or not runner.probes or (
            settings.probe == "auto" and (device.facts().emulated or threads > 1)):
        return None
    return export_model(PROBE_MODEL, "fp32", settings.cache_dir, progress=progress).pte
