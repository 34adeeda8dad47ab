"""What one benchmarking session holds: its settings, device and runners, and what it has
measured so far — written to ``results.json`` after every benchmark so an interrupted session
loses nothing."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from pytest_sme2.devices.base import Device, open_device
from pytest_sme2.errors import Sme2Error
from pytest_sme2.runners.base import Runner, RunnerError
from pytest_sme2.runners.spec import RunnerSpec, runner_specs
from pytest_sme2.settings import DEFAULT_CONFIRM_BLOCKS, MIN_BLOCKS, BenchSettings
from pytest_sme2.versions import versions

if TYPE_CHECKING:  # the measuring stack (pandas) is imported when a benchmark runs
    from pytest_sme2.baselines import Judgement
    from pytest_sme2.bench import BenchmarkRun
    from pytest_sme2.results import BenchmarkResult, ResultsWriter

RESULTS_FILE = "results.json"
# On the host, benchmarks that name no runner use our native runner where it can be built (a
# C++ compiler and CMake): a run costs it milliseconds, the Python runtime a forked process of
# an interpreter that imported torch. Without a toolchain, the Python runtime, saying why once.
DEFAULT_HOST_RUNNER = "native"
FALLBACK_HOST_RUNNER = "python"


@dataclass
class BenchSession:
    settings: BenchSettings
    device_spec: str = "host"
    runner_texts: list[str] = field(default_factory=list)
    taskset: str | None = "auto"
    blocks: int = MIN_BLOCKS                        # per side, in a comparison
    confirm_blocks: int = DEFAULT_CONFIRM_BLOCKS    # re-measured when a regression is suspected
    gate_categories: list[str] = field(default_factory=list)  # judged besides E2E; or ["all"]
    min_speedup: dict[str, float] = field(default_factory=dict)
    baseline_dir: Path | None = None
    fail_on_regression: float | None = None        # percent; None: judge and report only
    save_baseline: bool = False
    allow_foreign: bool = False
    results: list[BenchmarkResult] = field(default_factory=list)
    comparisons: list[dict] = field(default_factory=list)   # Comparison.to_json() documents
    _device: Device | None = None
    _runners: dict[str, Runner] = field(default_factory=dict)
    _host_default: str | None = None
    _writer: "ResultsWriter | None" = None    # results.json, laid out once per benchmark

    def __post_init__(self) -> None:
        self.specs: dict[str, RunnerSpec] = runner_specs(self.runner_texts)

    @property
    def results_path(self) -> Path:
        return self.settings.report_dir / RESULTS_FILE

    def device(self) -> Device:
        if self._device is None:
            # One device folder per process: an xdist worker's cleanup must not remove files
            # another worker is still using.
            self._device = open_device(self.device_spec, taskset=self.taskset,
                                       session_id=uuid.uuid4().hex[:12])
        return self._device

    def runner(self, name: str, progress: Callable[[str], None] | None = None) -> Runner:
        """The runner configured under ``name``, made on first use (a native build happens
        only if a benchmark asks for it)."""
        if name not in self._runners:
            spec = self.specs.get(name)
            if spec is None:
                raise RunnerError(f"unknown runner {name!r}; configured: "
                                  f"{', '.join(sorted(self.specs))} (add one with "
                                  "--runner NAME=SPEC)")
            self._runners[name] = spec.make(progress, target=self.device().target)
        return self._runners[name]

    def default_runner(self, progress: Callable[[str], None] | None = None) -> str:
        """The runner a benchmark uses when it names none: on the host the native runner if it
        can be made (built on first use), else the Python runtime (``progress`` hears why, once);
        elsewhere the native runner, built for the device (the Python runtime runs on the host
        only)."""
        if self.device_spec != "host":
            return "native"
        if self._host_default is None:
            try:
                self.runner(DEFAULT_HOST_RUNNER, progress)
                self._host_default = DEFAULT_HOST_RUNNER
            except RunnerError as e:
                self._host_default = FALLBACK_HOST_RUNNER
                if progress:
                    progress(f"benchmarks that name no runner use {FALLBACK_HOST_RUNNER!r}: "
                             f"{e}")
        return self._host_default

    def sme2_runner(self, state: str) -> str | None:
        """The runner labelled ``sme2=<state>`` (or named ``sme2_<state>``), if configured;
        else, on a device that has SME2 and can hide it from a process, the native runner's
        pair (see :func:`pytest_sme2.runners.spec.masked_pair`)."""
        for name, spec in self.specs.items():
            if spec.labels.get("sme2") == state or name == f"sme2_{state}":
                return name
        if self._offers_masked_pair():
            from pytest_sme2.runners.spec import masked_pair

            for spec in masked_pair():
                self.specs.setdefault(spec.name, spec)
            return f"sme2_{state}"
        return None

    def _offers_masked_pair(self) -> bool:
        """Only where the native runner is built for an Arm64 Linux target that runs the mask
        library with it (QEMU, an emulated phone), and only when the device reports SME2: a
        masked pair elsewhere would compare nothing."""
        device = self.device()
        return device.target == "aarch64-linux-gnu" and device.facts().sme2 is True

    def judge(self, results: list[BenchmarkResult]) -> "Judgement":
        """The regression gate's judgement of one benchmark's blocks against its baseline."""
        return self.judge_all(results, categories=False)[0]

    def judge_all(self, results: list[BenchmarkResult], categories: bool = True
                  ) -> list["Judgement"]:
        """End to end first, then each category of ``gate_categories`` ("all": every
        category the results have time in)."""
        from pytest_sme2.baselines import DEFAULT_THRESHOLD_PCT, gate_all, not_compared

        names: list[str] = []
        if categories and self.gate_categories:
            names = sorted({c for r in results for c in r.categories_ms}) \
                if "all" in self.gate_categories else list(self.gate_categories)
        if self.baseline_dir is None:
            return [not_compared("no baseline folder configured", category=c)
                    for c in [None, *names]]
        pct = DEFAULT_THRESHOLD_PCT if self.fail_on_regression is None else \
            self.fail_on_regression
        return gate_all(results, self.baseline_dir, pct, self.allow_foreign, categories=names)

    def confirm(self, run: "BenchmarkRun", runner: str, device: Device,
                first: "BenchmarkResult", judgements: list["Judgement"],
                on_block: Callable[["BenchmarkResult"], None] | None = None,
                progress: Callable[[str], None] | None = None,
                measure: Callable[["BenchmarkRun"], "BenchmarkResult"] | None = None,
                ) -> list["Judgement"]:
        """When a judgement of ``first`` (end to end or a category) calls a regression, measure
        ``confirm_blocks`` more blocks (fresh runner processes, right away) and judge all blocks
        together; otherwise return the judgements as they are. One process in a bad state (on a
        shared VM, a 2-thread run that starts without its parallelism) is outvoted by the
        median of the blocks; a real regression is in every block. Each extra block goes to ``on_block`` as
        soon as it is measured."""
        suspects = [j for j in judgements if j.regressed]
        if not suspects or self.confirm_blocks <= 0:
            return judgements
        if measure is None:
            from pytest_sme2.bench import run_benchmark

            # The first block exported the model already (once, even with --sme2-reexport).
            settings = replace(self.settings, reexport=False)

            def measure(r: "BenchmarkRun") -> "BenchmarkResult":
                return run_benchmark(r, self.runner(runner, progress), device, settings)
        if progress:
            what = ", ".join(f"{j.category or 'end to end'} {j.ratio.point:.3f}x"
                             for j in suspects)
            progress(f"{run.model} {run.dtype} t{run.threads} {runner}: a regression is "
                     f"suspected ({what}); measuring {self.confirm_blocks} more block(s) to "
                     "confirm it")
        blocks = [first]
        for i in range(1, self.confirm_blocks + 1):
            blocks.append(measure(replace(run, block=i)))
            if on_block:
                on_block(blocks[-1])
        return self.judge_all(blocks, categories=len(judgements) > 1)

    def save_baselines(self) -> list[Path]:
        """Add this session's results to the baselines, one session per benchmark key."""
        from pytest_sme2.baselines import group_by_key, save

        if self.baseline_dir is None:
            return []
        sid = uuid.uuid4().hex[:12]
        return [save(rs, self.baseline_dir, session_id=sid)
                for rs in group_by_key(self.results).values()]

    def add(self, result: BenchmarkResult) -> None:
        self.results.append(result)
        self.write()

    def add_comparison(self, comparison: dict) -> None:
        self.comparisons.append(comparison)
        self.write()

    def document_session(self) -> dict:
        s = self.settings
        return {"versions": versions(),
                "config": {"device": self.device_spec, "runs": s.runs, "warmup": s.warmup,
                           "blocks": self.blocks, "taskset": self.taskset,
                           "min_speedup": self.min_speedup},
                "runners": {name: {"kind": spec.kind, "labels": dict(spec.labels),
                                   "path": str(spec.path) if spec.path else None}
                            for name, spec in self.specs.items()}}

    def write(self) -> None:
        from pytest_sme2.results import ResultsWriter

        if self.results:
            if self._writer is None:
                self._writer = ResultsWriter()
            self._writer.write(self.results_path, self.results, self.comparisons,
                               self.document_session())

    def finish(self) -> list[Path]:
        """Final results.json and report.md (with charts); returns the files written."""
        if not self.results:
            return []
        self.write()
        from pytest_sme2.report.markdown import render_report
        from pytest_sme2.results import results_document

        doc = results_document(self.results, self.comparisons, self.document_session())
        try:
            return [self.results_path, render_report(doc, self.settings.report_dir)]
        except Exception as e:  # noqa: BLE001 - the measurements are safe in results.json
            raise Sme2Error(f"{self.settings.report_dir / 'report.md'}: not written "
                            f"({type(e).__name__}: {e}); results.json is complete, rerun "
                            f"`pytest-sme2 report {self.results_path}`") from None

    def close(self) -> None:
        """Remove what the session left on a remote device."""
        cleanup = getattr(self._device, "cleanup", None)
        if cleanup is not None:
            cleanup()
        for runner in self._runners.values():  # the python runner's fork server
            close = getattr(runner, "close", None)
            if close is not None:
                close()
