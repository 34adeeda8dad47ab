"""What one benchmarking session holds: its configuration, device and runners, and what it has
measured so far — written to ``results.json`` after every benchmark so an interrupted session
loses nothing."""

from __future__ import annotations

import time
import uuid
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable

from pytest_sme2.analysis.machine_state import PROBE_MODEL, machine_of
from pytest_sme2.measure import cost as session_cost
from pytest_sme2.measure.config import Sme2Config
from pytest_sme2.devices.base import Device
from pytest_sme2.devices.kinds import HOST
from pytest_sme2.devices.registry import open_device
from pytest_sme2.history.identity import session_identity
from pytest_sme2.errors import Sme2Error
from pytest_sme2.runners.base import Runner, RunnerError
from pytest_sme2.runners.fork_server import shared_server
from pytest_sme2.runners.native import native_runner
from pytest_sme2.programs.ahead import default_jobs, export_ahead
from pytest_sme2.programs.export import export_model
from pytest_sme2.results import ResultsWriter
from pytest_sme2.runners.spec import RunnerSpec, masked_pair, runner_specs, sme_pair
from pytest_sme2.measure.settings import BenchSettings
from pytest_sme2._util.versions import versions
from pytest_sme2.results.generation import Generation

if TYPE_CHECKING:  # the measuring stack (pandas) is imported when a benchmark runs
    from pytest_sme2.results import ComparisonRecord
    from pytest_sme2.results import BlockResult, ResultsWriter

RESULTS_FILE = "results.json"
# On the host, benchmarks that name no runner use our native runner where it can be built (a
# C++ compiler and CMake): a run costs it milliseconds, the Python runtime a forked process of
# an interpreter that imported torch. Without a toolchain, the Python runtime, saying why once.
DEFAULT_HOST_RUNNER = "native"
FALLBACK_HOST_RUNNER = "python"


@dataclass
class BenchSession:
    config: Sme2Config = field(default_factory=Sme2Config)
    results: list[BlockResult] = field(default_factory=list)
    comparisons: list[ComparisonRecord] = field(default_factory=list)
    # Baselines saved from this session go to one baseline session of this id; results.json
    # names it, so `pytest-sme2 gate` never judges the session by itself.
    session_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    # When the session began (seconds since the epoch): artifacts older than it are an earlier
    # session's (pytest_sme2.measure.artifacts.earlier).
    started: float = field(default_factory=time.time)
    # Set when the session is cut short (results.json's session.interrupted).
    interrupted: dict[str, Any] | None = None
    # Commit, branch, time and CI run of the session (results.json "identity"; the history).
    identity: dict[str, Any] = field(default_factory=session_identity)
    hook: Any = None        # pytest's config.hook: plugins' device and runner kinds (hookspec.py)
    # The devices the session runs on, ``android:*`` expanded (devices.resolve_devices); None:
    # the configured specs as they are.
    devices: tuple[str, ...] | None = None
    _devices: dict[str, Device] = field(default_factory=dict)
    _runners: dict[tuple[str, str], Runner] = field(default_factory=dict)   # (device, name)
    _host_default: dict[str, str] = field(default_factory=dict)             # by device
    _writer: "ResultsWriter | None" = None    # results.json, laid out once per benchmark
    instructions_note_shown: bool = False     # --sme2-measure instructions off the host: said
    _prefetch: list[tuple[str, str]] = field(default_factory=list)   # (model, dtype), see prepare
    # What the layers above import at the end anyway, done early beside a starting fork server
    # (the plugin gives the report's warm-up: pytest_sme2.report.outputs.warm_up).
    warm_ups: tuple[Callable[[], None], ...] = ()
    _settled: bool = False      # prepare() has imported the measuring stack once
    _froze: bool = False        # ... and froze the objects that existed then (release())

    def __post_init__(self) -> None:
        self.specs: dict[str, RunnerSpec] = runner_specs(list(self.config.runners),
                                                         self.config.runner_kinds)
        self._configured = frozenset(self.specs)    # runners the user named (not masked pairs)
        if self.devices is None:
            self.devices = self.config.devices

    @property
    def settings(self) -> BenchSettings:
        return self.config.settings

    @property
    def results_path(self) -> Path:
        return self.settings.report_dir / RESULTS_FILE

    def _spec(self, device: str | None) -> str:
        """``device``, or the session's only device when None."""
        if device is not None:
            return device
        assert self.devices is not None
        if len(self.devices) > 1:
            raise Sme2Error(f"this session runs on {len(self.devices)} devices "
                            f"({', '.join(self.devices)}): name the device")
        return self.devices[0]

    def device(self, spec: str | None = None) -> Device:
        """The device ``spec`` names (one of the session's; None: the only one), opened on
        first use."""
        spec = self._spec(spec)
        if spec not in self._devices:
            # One device folder per process: an xdist worker's cleanup must not remove files
            # another worker is still using.
            self._devices[spec] = open_device(spec, taskset=self.config.taskset,
                                              session_id=uuid.uuid4().hex[:12], hook=self.hook)
        return self._devices[spec]

    def adopt_devices(self, devices: dict[str, Device]) -> None:
        """Devices opened before the session (a plugin's kind, asked at configure time:
        :func:`pytest_sme2.devices.registry.open_plugin_devices`): used, not opened again."""
        self._devices.update(devices)

    def runner(self, name: str, progress: Callable[[str], None] | None = None,
               device: str | None = None) -> Runner:
        """The runner configured under ``name``, for ``device``, made on first use (a native
        build happens only if a benchmark asks for it)."""
        key = (self._spec(device), name)
        if key not in self._runners:
            spec = self.specs.get(name)
            if spec is None:
                raise RunnerError(f"unknown runner {name!r}; configured: "
                                  f"{', '.join(sorted(self.specs))} (add one with "
                                  "--runner NAME=SPEC)")
            self._runners[key] = spec.make(progress, target=self.device(key[0]).target,
                                           hook=self.hook)
        return self._runners[key]

    def default_runner(self, progress: Callable[[str], None] | None = None,
                       device: str | None = None) -> str:
        """The runner a benchmark uses when it names none: on the host the native runner if it
        can be made (built on first use), else the Python runtime (``progress`` hears why, once);
        elsewhere the native runner, built for the device (the Python runtime runs on the host
        only)."""
        spec = self._spec(device)
        if spec != HOST.name:
            return "native"
        if spec not in self._host_default:
            try:
                self.runner(DEFAULT_HOST_RUNNER, progress, spec)
                self._host_default[spec] = DEFAULT_HOST_RUNNER
            except RunnerError as e:
                self._host_default[spec] = FALLBACK_HOST_RUNNER
                if progress:
                    progress(f"benchmarks that name no runner use {FALLBACK_HOST_RUNNER!r}: "
                             f"{e}")
        return self._host_default[spec]

    def sme2_runner(self, state: str, device: str | None = None) -> str | None:
        """The runner labelled ``sme2=<state>`` (or named ``sme2_<state>``), if configured;
        else, on a device that has SME2 and can hide it from a process, the native runner's
        pair (see :func:`pytest_sme2.runners.spec.masked_pair`)."""
        for name, spec in self.specs.items():
            if name in self._configured and (spec.labels.get("sme2") == state or
                                             name == f"sme2_{state}"):
                return name
        if self._offers_masked_pair(device):
            for spec in masked_pair():
                self.specs.setdefault(spec.name, spec)
            return f"sme2_{state}"
        return None

    def _offers_masked_pair(self, spec: str | None = None) -> bool:
        """Only where the native runner is built for an Arm64 Linux target that runs the mask
        library with it (QEMU, an emulated phone), and only when the device reports SME2: a
        masked pair elsewhere would compare nothing."""
        device = self.device(spec)
        return device.target == "aarch64-linux-gnu" and device.facts().sme2 is True

    def sme_runner(self, state: str, device: str | None = None) -> str | None:
        """The runner labelled ``sme=<state>`` (or named ``sme_<state>``), if configured; else,
        on a device with SME but no SME2 that can hide SME from a process, the native runner's
        SME pair (see :func:`pytest_sme2.runners.spec.sme_pair`)."""
        for name, spec in self.specs.items():
            if name in self._configured and (spec.labels.get("sme") == state or
                                             name == f"sme_{state}"):
                return name
        facts = self.device(device).facts()
        if self.device(device).target == "aarch64-linux-gnu" and facts.sme is True \
                and facts.sme2 is False:
            for spec in sme_pair():
                self.specs.setdefault(spec.name, spec)
            return f"sme_{state}"
        return None

    def start_ahead(self, runners: Iterable[str],
                    points: Iterable[tuple[str, str]] = ()) -> None:
        """Start now what the session's benchmarks would otherwise wait for in the middle of
        it: on the host, the python runner's fork server, whose imports (torch, the runtime)
        take a second or more. ``runners``: the names collected tests declare they use
        (``@pytest.mark.sme2(runners=[...])``). The server imports while nothing is measured
        (:meth:`measuring` stops it around each measured process); :meth:`prepare` meanwhile
        looks up the exports of ``points`` (model, dtype) the collected benchmarks will
        measure."""
        if HOST.name not in (self.devices or ()):
            return
        if any(spec.kind == "python" for name, spec in self.specs.items() if name in runners):
            shared_server().start()
            self._prefetch = list(dict.fromkeys(points))

    def export_ahead(self, points: Iterable[tuple[str, str]],
                     progress: Callable[[str], None] | None = None) -> None:
        """Export the collected (model, dtype) points the cache lacks side by side, before
        anything is measured (:mod:`pytest_sme2.programs.ahead`); not with --sme2-export-jobs
        1, nor with --sme2-reexport (each benchmark exports its own again)."""
        jobs = self.config.export_jobs or default_jobs()
        if self.settings.probe != "off":     # the machine-state probe's program, with them
            points = [*points, (PROBE_MODEL, "fp32")]
        if jobs > 1 and not self.settings.reexport:
            export_ahead(points, self.settings.cache_dir, jobs, progress)

    def prepare(self) -> None:
        """Before the first measurement, once: import what the session imports anyway (the
        measuring stack, and with a fork server starting beside us the report's plotting
        library and templates too, and the collected exports), then leave the objects those
        imports made out of the garbage collector's walks (:mod:`pytest_sme2.measure.cost`)."""
        if self._settled:
            return
        self._settled = True
        with session_cost.settling() as froze:
            import pytest_sme2.measure.block  # pandas: and the analysis, once  # noqa: F401
            if shared_server().starting:
                session_cost.warm_imports(self._prefetch, self.settings.cache_dir,
                                          self.warm_ups)
        self._froze = froze[0]

    def measuring(self) -> AbstractContextManager[None]:
        """Entered around each measured process: the fork server, if still importing, waits
        (:func:`pytest_sme2.measure.cost.fork_server_paused`)."""
        return session_cost.fork_server_paused()

    def count_instructions(self, result: BlockResult,
                           progress: Callable[[str], None] | None = None,
                           device: str | None = None) -> None:
        """--sme2-measure instructions: instructions per execute of ``result``'s model, inputs
        and threads, counted once with the native runner under valgrind, onto ``result``; an
        LLM's per decode token and per prefill, with the block's prompt and new tokens. Off
        the host, say once per session that only time is measured. A failed count (a runner
        killed under valgrind) raises: that benchmark fails, the others go on."""
        # Only under --sme2-measure instructions: valgrind's modules stay out of every other
        # pytest run's start-up.
        from pytest_sme2.instructions.count import (  # instructions.count: 15 ms of start-up
            count_generation, count_instructions, host_only_reason)

        say = progress or (lambda msg: None)
        reason = host_only_reason(self.device(device))
        if reason is not None:
            if not self.instructions_note_shown:
                self.instructions_note_shown = True
                say(reason)
            return
        if result.depth:   # the prefill-only processes would count the fill
            say(f"{result.model} {result.dtype} at depth {result.depth}: instructions are "
                "counted at depth 0 only; this benchmark is timed")
            return
        runner = native_runner(progress=progress)
        if (g := result.generation) is not None:
            result.instructions = count_generation(
                Path(result.pte), Generation(g.prompt_tokens, g.new_tokens),
                threads=result.threads, runner=runner, progress=progress)
            return
        s = self.settings
        exported = export_model(result.model, result.dtype, s.cache_dir, False, progress=progress)
        result.instructions = count_instructions(Path(result.pte), threads=result.threads,
                                                 inputs=exported.inputs, runner=runner,
                                                 progress=progress)

    def save_baselines(self) -> list[Path]:
        """Add this session's results to the baselines, one session per benchmark key."""
        from pytest_sme2.baselines.store import (  # flatbuffers: 15 ms, for --save-baseline
            group_by_key, save)

        if self.config.baseline_dir is None:
            return []
        commit = self.identity.get("commit")      # the session's, asked of git once
        saved = [save(rs, self.config.baseline_dir, session_id=self.session_id, commit=commit)
                 for rs in group_by_key(self.results).values()]
        counted = [r for r in self.results if r.instructions]   # --sme2-measure instructions
        saved += [save(rs, self.config.baseline_dir, session_id=self.session_id,
                       commit=commit, measure="instructions")
                  for rs in group_by_key(counted).values()]
        return saved

    def add(self, result: BlockResult, write: bool = True) -> None:
        """Keep a block; ``write=False`` when more of the same test follow (the collector
        writes once per test: rewriting results.json per block made a --sme2-precision
        session of 2,000 blocks spend more time writing than measuring)."""
        self.results.append(result)
        if write:
            self.write()

    def add_comparison(self, comparison: ComparisonRecord, write: bool = True) -> None:
        self.comparisons.append(comparison)
        if write:
            self.write()

    def document_session(self) -> dict:
        doc = {"versions": versions(), "config": self.config.document(self.devices),
               "baseline_session_id": self.session_id, "identity": self.identity,
               "machine": machine_of(self.results).to_dict(),
               "runners": {name: {"kind": spec.kind, "labels": dict(spec.labels),
                                  "path": str(spec.path) if spec.path else None}
                           for name, spec in self.specs.items()}}
        if self.interrupted is not None:
            doc["interrupted"] = self.interrupted
        return doc

    def write(self) -> None:
        if self.results:
            if self._writer is None:
                self._writer = ResultsWriter()
            self._writer.write(self.results_path, self.results, self.comparisons,
                               self.document_session())

    def release(self) -> None:
        """Give the objects :meth:`prepare` froze back to the garbage collector: called once
        nothing of the session runs any more, so a process that goes on after it (pytest run
        from Python) collects the session's garbage as usual."""
        if self._froze:
            self._froze = False
            session_cost.unfreeze()

    def close(self) -> None:
        """Remove what the session left on remote devices (one that is gone is skipped) and
        stop the runners; a device whose cleanup fails costs the others nothing: the failures
        are raised together, one line."""
        problems = []
        for device in self._devices.values():
            try:
                device.cleanup()
            except Sme2Error as e:
                problems.append(str(e))
        for runner in self._runners.values():  # the python runner's fork server
            runner.close()
        shared_server().stop()   # started ahead and never used, or used: ends with the session
        if problems:
            raise Sme2Error("; ".join(problems))

