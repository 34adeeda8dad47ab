"""One benchmark setting, end to end, usable without pytest:
export (cached) -> device runs runner (timed untraced, then traced) -> its clock and ETDump ->
latency statistics and the breakdown -> BlockResult."""

from __future__ import annotations

import hashlib
import re
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Sequence

import pandas as pd

from pytest_sme2.analysis.categories import CategoryRule
from pytest_sme2.analysis.latency import e2e_per_run, latency_stats
from pytest_sme2.analysis.machine_state import find_modes
from pytest_sme2.analysis.startup import load_source, memory_source, process_startup
from pytest_sme2.analysis.phases import analyze_generation
from pytest_sme2.analysis.kernel_sources import KernelSources
from pytest_sme2.analysis.output_values import output_problem
from pytest_sme2.analysis.summary import analyze
from pytest_sme2.analysis.timing import (process_runs, traced_generation,
                                         with_traced_e2e)
from pytest_sme2.measure.generation import (BlockEvidence, PhaseEvidence, analyze_block,
                                            decode_steps, generation_for,
                                            observed_generation, phase_evidence, traffic_of,
                                            with_traced_phases)
from pytest_sme2.devices.base import Device
from pytest_sme2.errors import Sme2Error
from pytest_sme2._util.heartbeat import EVERY_S, Heartbeat
from pytest_sme2.readers.etdump import read_etdump
from pytest_sme2.readers.etrecord import read_etrecord
from pytest_sme2.programs.export import export_model
from pytest_sme2.programs.exported import ExportedModel
from pytest_sme2.measure.artifacts.csv import write_csvs
from pytest_sme2.measure.artifacts.trace import write_generation_trace, write_trace
from pytest_sme2.results import BlockResult, Generation, ProcessStartup, RunContext, Startup
from pytest_sme2.results.machine import Mode
from pytest_sme2.results.timing import LatencyStats, Timing
from pytest_sme2.measure.artifacts.csv import write_timed_runs
from pytest_sme2.measure.artifacts.earlier import ARTIFACTS
from pytest_sme2.measure.artifacts.runs import etdump_record
from pytest_sme2.readers.etdump_runs import write_etdump_runs
from pytest_sme2.analysis.runner_summary import parse_summary
from pytest_sme2.runners.base import Runner, RunRequest
from pytest_sme2.measure.process import (measure_process, probe_program, process_sme,
                                         process_sme2, sample_kernels, wants_sample)
from pytest_sme2.measure.settings import BenchSettings
from pytest_sme2.devices.beside import watch
from pytest_sme2.devices.registry import DeviceSpec
from pytest_sme2.devices.thermal import hold

__all__ = ["BenchSettings", "BenchmarkRun", "artifact_dir", "run_benchmark"]


def artifact_dir(report_dir: Path, label: str) -> Path:
    """A folder name any filesystem and shell accepts, derived from a test id."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", label).strip("_") or "benchmark"
    if len(safe) > 120:  # cut, but kept apart from ids that differ only at the end (devices)
        safe = f"{safe[:111]}-{hashlib.sha256(label.encode()).hexdigest()[:8]}"
    return report_dir / ARTIFACTS / safe


@dataclass
class BenchmarkRun:
    model: str
    dtype: str = "fp32"
    threads: int = 1
    label: str = ""                 # pytest node id, or anything naming the benchmark
    progress: Callable[[str], None] | None = field(default=None, repr=False)
    block: int | None = None        # position in an interleaved comparison
    # The benchmark (test node id) a block labelled apart from it belongs to: a comparison's,
    # confirmation's or A/B block; "": the label is the benchmark's own
    benchmark: str = ""
    save_outputs: bool = False      # keep the last run's outputs (runners that can)
    # The operator category table (None: the built-in one);
    # pytest_sme2.hookspec.category_rules
    # gives the plugins' rules in front of the built-in ones.
    rules: Sequence[CategoryRule] | None = field(default=None, repr=False)
    # Entered around each measured process: the caller holds its own background work still
    # there (a session stops the python runner's fork server while it is still importing).
    measuring: Callable[[], AbstractContextManager[None]] | None = field(default=None,
                                                                          repr=False)
    # The sampled-kernels CSV of this benchmark's evidence process when one already ran (the
    # later blocks of a comparison side share the first block's); None: sample if asked to.
    kernel_sample: Path | None = None
    # An LLM's generation to run (prompt and new tokens); None: a generation when the program
    # is an LLM (the session's --sme2-prompt-tokens/--sme2-new-tokens), else a forward pass.
    generation: Generation | None = None


def run_benchmark(run: BenchmarkRun, runner: Runner, device: Device,
                  settings: BenchSettings) -> BlockResult:
    """One block of ``run``: export (cached), one runner process on ``device``, its ETDump
    analysed (a forward pass, or an LLM's generation), cold loads for a benchmark's first
    block, the seed kit's CSVs and a Perfetto trace beside the ETDump."""
    if run.threads < 1:
        raise Sme2Error(f"threads must be 1 or more, got {run.threads}")
    exported = export_model(run.model, run.dtype, settings.cache_dir, settings.reexport,
                            progress=run.progress)
    generation = generation_for(run.generation, exported.pte, settings.prompt_tokens,
                                settings.new_tokens, run.model)
    # The one place a block asks what it runs: each kind measures, analyses and writes its own.
    block = _ForwardPass(run, runner, device, settings, exported) if generation is None else \
        _Generation(run, runner, device, settings, exported, generation)
    block.measure()
    return block.result()


@dataclass
class _Block:
    """One block being measured: what it runs, and what each step found (set in order by
    :meth:`measure`, :meth:`analyse`, :meth:`result`). A kind (:class:`_ForwardPass`,
    :class:`_Generation`) says how its runs are read, analysed and written out."""

    run: BenchmarkRun
    runner: Runner
    device: Device
    settings: BenchSettings
    exported: ExportedModel
    # An LLM's generation (prompt and new tokens); None for a forward pass.
    generation: Generation | None = None
    # Whether the runner is fed tensor files: a generation makes its own inputs (the prompt)
    # and keeps tokens, not output tensors.
    feeds_tensors = True

    def __post_init__(self) -> None:
        run, runner, settings = self.run, self.runner, self.settings
        self.label = _label(run, runner)
        self.out = artifact_dir(settings.report_dir, self.label)
        self.stem = runner.info.name if run.block is None else \
            f"{runner.info.name}-block{run.block}"
        pte = self.exported.pte
        tensors = runner.takes_tensor_files and self.feeds_tensors
        # Timed untraced, traced apart (same process, after them) where the runner can.
        untraced = runner.times_untraced
        self.request = RunRequest(
            pte=pte, data=self.exported.ptd, etdump=self.out / f"{self.stem}.etdump",
            threads=run.threads,
            runs=settings.runs, warmup=settings.warmup,
            inputs=self.exported.inputs if tensors else None,
            outputs=self.out / f"{self.stem}.outputs.bin" if run.save_outputs and tensors
            else None, timeout_s=settings.timeout_s, generation=self.generation,
            untraced=untraced, trace_runs=settings.trace_runs if untraced and runner.traces
            else 0,
            trace_warmup=settings.warmup if untraced else 0,
            probe=probe_program(runner, self.device, settings, run.threads, run.progress))

    def measure(self) -> None:
        """The block's runner process, held until the device is cool (--sme2-cooldown)."""
        run, device = self.run, self.device
        self.held = hold(device, self.settings.cooldown, run.progress) \
            if self.settings.cooldown else None
        self.before = device.thermal()    # Android zones; the host and QEMU have none (None)
        here = DeviceSpec.parse(device.spec)
        with _measuring(run), _still(run, self.label, f"running on {device.spec}"), \
                watch(here.on_host_cpu and not here.emulated,
                      self.runner.serving()) as self.beside:
            self.outcome = device.run(self.runner, self.request)
        self.after = device.thermal()
        _say_pushed(run, device, self.outcome.pushed)
        self.facts = device.facts()
        self.summary = parse_summary(self.outcome.stdout)     # read once, used by each step
        self.observed = None
        traced = self.traced_events()
        # The timed runs (untraced: the runner's clock) apart from the traced ones (ETDump).
        self.runs = process_runs(traced, self.summary, self.settings.warmup,
                                 str(self.request.etdump))
        self.events = self.runs.traced if self.runs.traced is not None else self.runs.timed
        self.analyse()

    def traced_events(self) -> pd.DataFrame | None:
        """The process's ETDump, read (None: the runner wrote none)."""
        return read_etdump(self.request.etdump) if self.request.writes_etdump else None

    def analyse(self) -> None:
        """The ETDump's analysis with the kernel evidence: a forward pass's (its evidence
        process sampled when asked), or a generation's (its phase-only processes). The
        breakdown, operators and kernels are the traced runs'; the latency the timed runs'."""
        self.etrecord = read_etrecord(self.exported.etrecord) if self.exported.has_etrecord \
            else None
        self.device_sme2 = process_sme2(self.facts.sme2, self.runner.hwcap_mask)
        self.device_sme = process_sme(self.facts.sme, self.runner.hwcap_mask)
        self.generated, self.kernel_trace = None, self.outcome.kernel_trace
        self.analyse_runs()

    def analyse_runs(self) -> None:
        """The kind's analysis of :attr:`events`: sets ``analysis``, ``e2e_all``,
        ``timed_e2e``, the evidence files and, for a generation, ``generated``."""
        raise NotImplementedError

    def startup(self) -> Startup:
        """Load, first inference and memory of this process; more cold loads for a
        benchmark's first block (a comparison's or confirmation's blocks are cold processes
        already; emulated load times say nothing: one is enough there)."""
        run, request, etdump = self.run, self.request, str(self.request.etdump)
        summary = self.summary
        # The whole process: its first execute is the first run (a generation's prefill; a
        # llama_main's first forward, its constant methods' executes left out); untraced, the
        # timed pass's (it loads first; the runner times the loads).
        events = self.observed.process_events if self.observed is not None else self.runs.timed
        startup = Startup(
            pte_bytes=self.exported.pte.stat().st_size,
            ptd_bytes=self.exported.ptd.stat().st_size if self.exported.ptd else None,
            processes=[process_startup(events, e2e_per_run(events, etdump), summary)],
            load_source=load_source(events, summary),
            memory_source=memory_source(summary, self.facts.emulated))
        if run.block is None and not self.facts.emulated:
            for i in range(1, self.settings.loads):
                try:
                    startup.processes.append(_cold_load(
                        run, self.runner, self.device, request,
                        self.out / f"{self.stem}.load{i}.etdump"))
                except Sme2Error as e:   # the block is measured: keep it, say what is missing
                    startup.problem = (f"load-only process {i} of {self.settings.loads - 1} "
                                       f"failed: {e}")
                    if run.progress:
                        run.progress(f"{self.label}: {startup.problem}")
                    break
        return startup

    def artifacts(self) -> Path:
        """The seed kit's CSVs (model_id as the kit names its files) and the Perfetto trace
        of the median timed run (of a generation: the median generation, phases marked)."""
        run, out, stem = self.run, self.out, self.stem
        write_csvs(self.analysis, out, stem,
                   model_id=f"{run.model}_{run.dtype}_t{run.threads}_{stem}")
        write_timed_runs(out / f"{stem}_timed_runs.csv", self.e2e_all, self.warmup_in_e2e(),
                         self.timing().source)
        return self.write_trace(out / f"{stem}.trace.json")

    def warmup_in_e2e(self) -> int:
        """The leading entries of ``e2e_all`` that are warm-up runs."""
        return self.settings.warmup

    def write_trace(self, path: Path) -> Path:
        """The ETDump's record of its runs beside it, and the Perfetto trace at ``path``."""
        etdump = str(self.request.etdump)
        write_etdump_runs(etdump, etdump_record(self.analysis, None, self.runs.separate))
        return write_trace(self.analysis.events, path, warmup=self.analysis.warmup,
                           source=etdump, e2e=self.analysis.e2e_all)

    def timed_stats(self) -> LatencyStats:
        return latency_stats(self.timed_e2e)

    def timing(self) -> Timing:
        """How the block was timed, with the traced runs' median beside the timed one."""
        return with_traced_e2e(self.runs.timing, self.analysis.e2e,
                               self.timed_stats().median_ms)

    def result(self) -> BlockResult:
        run, request, analysis = self.run, self.request, self.analysis
        startup, trace = self.startup(), self.artifacts()
        device = replace(self.facts, spec=self.device.spec)
        meta = self.exported.meta
        # llama_main runs one timed generation per process (--warmup: one before it)
        runs, warmup = (1, self.observed.warmup) if self.observed is not None else \
            (self.settings.runs, self.settings.warmup)
        return BlockResult(
            nodeid=run.label, model=run.model, dtype=run.dtype, threads=run.threads,
            runner=self.runner.info, device=device, runs=runs, warmup=warmup,
            e2e_ms=[round(float(v), 6) for v in self.timed_e2e], e2e=self.timed_stats(),
            etdump=str(request.etdump), pte=str(self.exported.pte),
            export_key=self.exported.key, analysis=analysis.record(),
            context=RunContext(
                thermal_before=self.before, thermal_after=self.after, block=run.block,
                benchmark=run.benchmark or run.label or None,
                outputs=str(request.outputs) if request.outputs else None,
                kernel_trace=str(self.kernel_trace) if self.kernel_trace else None,
                trace=str(trace), cooldown=self.held,
                kernel_sample=str(self.sample) if self.sample else None,
                sample_problem=self.sample_problem,
                output_problem=output_problem(self.summary), beside=self.beside.busy or None),
            startup=startup, generation=self.generated, timing=self.timing(),
            probe=self.summary.probe, modes=_modes(self.timed_e2e),
            # A user's .pte without an .etrecord: what the report cannot show, said with it.
            etrecord_missing=meta.get("etrecord_missing") or None)


class _ForwardPass(_Block):
    """A forward pass: ``--runs`` Method::execute each, its evidence process sampled when
    asked."""

    def analyse_runs(self) -> None:
        run, request, settings, runs = self.run, self.request, self.settings, self.runs
        self.sample, self.sample_problem = _evidence(run, self.runner, self.device, settings,
                                                     request, self.outcome.wall_s)
        self.analysis = analyze(self.events, warmup=runs.traced_warmup,
                                source=str(request.etdump), etrecord=self.etrecord,
                                rules=run.rules,
                                kernels=KernelSources(self.device_sme2,
                                                      trace=self.outcome.kernel_trace,
                                                      sample=self.sample,
                                                      device_sme=self.device_sme))
        traced = request.trace_warmup + request.trace_runs
        if runs.separate and len(self.analysis.e2e_all) != traced:
            raise Sme2Error(f"{request.etdump}: {len(self.analysis.e2e_all)} traced runs "
                            f"with Method::execute, expected {traced} "
                            f"({request.trace_warmup} warm-up + {request.trace_runs})")
        self.e2e_all = e2e_per_run(runs.timed, str(request.etdump)) if runs.separate \
            else self.analysis.e2e_all
        if len(self.e2e_all) != request.executions:
            what = "timed runs in the runner's summary" if runs.separate else \
                "runs with Method::execute"
            raise Sme2Error(f"{request.etdump}: {len(self.e2e_all)} {what}, expected "
                            f"{request.executions} ({settings.warmup} warm-up + "
                            f"{settings.runs} timed)")
        self.timed_e2e = self.e2e_all[self.e2e_all.index >= settings.warmup]


class _Generation(_Block):
    """An LLM's generation: the runner's token loop, its phase-only evidence processes, and
    a llama_main's own report where the runner is one."""

    feeds_tensors = False

    def warmup_in_e2e(self) -> int:
        return 0            # its decode steps are the timed generations' alone

    def traced_events(self) -> pd.DataFrame | None:
        if self.summary.generation is not None:
            return super().traced_events()
        # ExecuTorch's llama_main: its report, and its ETDump's last generation
        self.observed = observed_generation(self.request, self.outcome.stdout,
                                            self.runner.info.name)
        self.summary = self.observed.summary
        return self.observed.events

    def analyse_runs(self) -> None:
        run, request, settings, runs = self.run, self.request, self.settings, self.runs
        etrecord, device_sme2 = self.etrecord, self.device_sme2
        # The phase-only evidence processes: the benchmark's first block only, as sampling.
        first = run.block in (None, 0)
        with _still(run, self.label, "running the phase-only evidence processes"):
            phases = phase_evidence(self.runner, self.device, request, self.outcome,
                                    sample=wants_sample(settings.sample, self.device,
                                                        self.runner)) if first else PhaseEvidence()
        self.sample_problem = phases.problem
        if self.sample_problem and run.progress:
            run.progress(f"{self.label}: {self.sample_problem}")
        # A later block of a comparison side carries its first block's decode samples, as a
        # forward pass's blocks carry their evidence process's.
        # The token loop as the runner printed it, and as its traced pass ran it (timed
        # untraced first where the runner can); None: analyze_block says it printed none.
        loop = self.summary.generation
        self.traced_loop = traced_generation(loop, runs.traced_warmup, runs.timing.traced_runs) \
            if runs.separate and loop is not None else loop
        block = analyze_block(self.events, self.traced_loop, source=str(request.etdump),
                              etrecord=etrecord, rules=run.rules, evidence=BlockEvidence(
                                  device_sme2, self.outcome.kernel_trace,
                                  None if first else run.kernel_sample, phases,
                                  self.device_sme))
        self.analysis, self.generated = block.decode, block.generation
        if runs.separate:
            # Times per phase from the untraced generations; categories and kernels from the
            # traced ones.
            self.generated = with_traced_phases(
                analyze_generation(runs.timed, loop, source=str(request.etdump)),
                block.generation)
            steps = decode_steps(runs.timed, loop, str(request.etdump))
            self.e2e_all = e2e_per_run(steps, str(request.etdump))
        else:
            self.e2e_all = self.analysis.e2e_all
        self.timed_e2e = self.e2e_all
        if self.observed is not None:       # llama_main: one timed generation, its report
            self.generated.warmup = self.observed.warmup
            self.generated.runner_report = self.observed.record()
            self.generated.source = (f"{request.etdump} (its last generation) and "
                                     "llama_main's PyTorchObserver report")
        # The decode steps' evidence files (the decode-only process's where one ran).
        self.kernel_trace, self.sample = block.kernel_trace, block.kernel_sample
        self.generated.traffic = traffic_of(self.device, request.pte, request.data,
                                            self.generated, self.facts.emulated)

    def write_trace(self, path: Path) -> Path:
        etdump = str(self.request.etdump)
        if self.observed is None:   # a llama_main's ETDump holds its constant methods too
            write_etdump_runs(etdump, etdump_record(self.analysis, self.traced_loop,
                                                    self.runs.separate))
        return write_generation_trace(self.events, path, self.traced_loop, source=etdump)

    def result(self) -> BlockResult:
        out = super().result()
        # Where and how it ran, for sme2_generate's caller (results.json keeps them once, on
        # the block).
        self.generated.startup, self.generated.device, self.generated.runner = (
            out.startup, out.device, self.runner.info)
        return out


def _modes(timed: Sequence[float]) -> tuple[Mode, ...]:
    """The speeds a block's timed runs fell into, when more than one."""
    modes = find_modes(timed)
    return modes if len(modes) > 1 else ()


def _label(run: BenchmarkRun, runner: Runner) -> str:
    return run.label or f"{run.model}-{run.dtype}-t{run.threads}-{runner.info.name}"


def _evidence(run: BenchmarkRun, runner: Runner, device: Device, settings: BenchSettings,
              request: RunRequest, wall_s: float) -> tuple[Path | None, str | None]:
    """The benchmark's sampled kernels (its own evidence process, or the one a comparison side
    already ran; the CSV beside the block's ETDump) and, when sampling failed, why: the
    measured block is kept either way."""
    csv = request.etdump.with_suffix(".sampled.csv")
    if run.kernel_sample is not None or run.block not in (None, 0) or not wants_sample(
            settings.sample, device, runner):
        return run.kernel_sample, None
    try:
        return sample_kernels(runner, device, request, wall_s, csv), None
    except Sme2Error as e:
        problem = f"kernel sampling failed: {e}"
        if run.progress:
            run.progress(f"{_label(run, runner)}: {problem}")
        return None, problem


def _say_pushed(run: BenchmarkRun, device: Device, pushed: tuple[int, int, float, int]) -> None:
    files, size, seconds, present = pushed
    if files and run.progress:
        run.progress(f"{device.spec}: pushed {files} files ({size / 1e6:.1f} MB) in "
                     f"{seconds:.1f} s; {present} already there")


def _measuring(run: BenchmarkRun) -> AbstractContextManager[None]:
    return run.measuring() if run.measuring else nullcontext()


def _still(run: BenchmarkRun, label: str, doing: str) -> Heartbeat:
    """A progress line every ``EVERY_S`` seconds of a long process (a 0.6B model's
    emulated generation takes minutes): never minutes of silence."""
    return Heartbeat(run.progress, lambda s: f"{label}: still {doing} ({s:.0f} s)",
                     every=EVERY_S)


def _cold_load(run: BenchmarkRun, runner: Runner, device: Device, request: RunRequest,
               etdump: Path) -> ProcessStartup:
    """One load-only process (load, one execute): a cold load time and first inference
    (untraced where the runner can: nothing traced after it)."""
    one = replace(request, etdump=etdump, runs=1, warmup=0, outputs=None, trace_runs=0,
                  trace_warmup=0)
    return measure_process(runner, device, one, run.measuring).startup
