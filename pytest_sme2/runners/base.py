"""What every runner takes and gives. A runner turns a RunRequest into an argv that a device
executes; the device (host, Android) owns processes, files and time limits."""

from __future__ import annotations

from dataclasses import dataclass
import dataclasses
from pathlib import Path
from typing import Protocol

from pytest_sme2.errors import Sme2Error
from pytest_sme2._util.protocol_defaults import WithDefaults
from pytest_sme2.programs.kernel_libraries import program_libraries
from pytest_sme2.results.generation import Generation
from pytest_sme2.results.device import RunnerInfo


class RunnerError(Sme2Error):
    pass


# Executes of the machine-state probe at each end of a block's timed runs: ~0.3 ms each end for
# its 16x128x128 GEMM, enough for a median that moves with the machine.
PROBE_RUNS = 24


@dataclass(frozen=True)
class RunRequest:
    pte: Path
    etdump: Path
    threads: int = 1
    runs: int = 30
    warmup: int = 3
    inputs: Path | None = None      # tensor file (pytest_sme2.readers.tensorfile) of the inputs
    # The program's .ptd: its weights, kept apart from the .pte (ExecuTorch's program-data
    # separation, pytest_sme2.readers.pte_data); loaded with it, pushed with it. None: none.
    data: Path | None = None
    outputs: Path | None = None     # where to save the last run's outputs, if wanted
    timeout_s: float = 600.0
    # Where to write the executed-kernels CSV, on devices that can trace execution (QEMU).
    kernel_trace: Path | None = None
    # Where to write the sampled-kernels CSV: set, the device samples the runner's program
    # counter (Device.samples_kernels) and maps the samples to kernels.
    kernel_sample: Path | None = None
    # An LLM generation per run (pytest_sme2.results.generation): ``warmup`` and ``runs`` then
    # count generations, each of several executes. None: one execute per run on fixed inputs.
    generation: Generation | None = None
    # Timing apart from tracing (runners whose ``times_untraced`` is true): the warm-up and
    # timed runs execute with no event tracer, each Method::execute timed by the runner's own
    # clock (its summary's ``execute_ms``); then ``trace_warmup`` + ``trace_runs`` runs of the
    # same program, traced, fill the ETDump for the operator breakdown (none: no ETDump, where
    # the runner can leave it out). False: every run is traced and timed through the tracer.
    untraced: bool = False
    trace_runs: int = 0
    trace_warmup: int = 0
    # The machine-state probe's program (pytest_sme2.analysis.machine_state), timed
    # ``probe_runs`` times right before the first warm-up and right after the last timed run
    # in the same process, where the runner can (``Runner.probes``). None: not probed.
    probe: Path | None = None
    probe_runs: int = PROBE_RUNS
    # The executorch wheel's operator libraries the program needs loaded before it loads
    # (names of pytest_sme2.programs.kernel_libraries.KERNEL_LIBRARIES: "custom_ops" for
    # llama::custom_sdpa). None: read from the .pte's operator table as the request is made;
    # kept when a device moves the request to its own paths.
    kernel_libraries: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.kernel_libraries is None:
            object.__setattr__(self, "kernel_libraries", _libraries_of(self.pte))

    @property
    def writes_etdump(self) -> bool:
        """Whether the runner must leave an ETDump at ``etdump`` (the Python runtime writes
        one whenever it traced anything: see its child)."""
        return not self.untraced or self.trace_runs > 0

    @property
    def executions(self) -> int:
        """Warm-up runs are traced too; analysis drops the first ``warmup`` runs. With a
        generation: generations, not executes (see Generation.executes)."""
        return self.warmup + self.runs

    def phase_only(self, phase: str) -> RunRequest:
        """This generation request as a phase-only evidence process (``"prefill"`` or
        ``"decode"``): one generation, no warm-up, the phase's executes alone in the process
        (:meth:`Generation.prefill_only`, :meth:`Generation.decode_only`)."""

        if self.generation is None:
            raise RunnerError("a phase-only process needs a request with a generation")
        if phase not in ("prefill", "decode"):
            raise RunnerError(f"no phase {phase!r}; phases are prefill and decode")
        g = (self.generation.prefill_only() if phase == "prefill"
             else self.generation.decode_only())
        # Its kernels are what it is for: no traced runs beside them.
        return dataclasses.replace(self, generation=g, runs=1, warmup=0, trace_runs=0,
                                   trace_warmup=0)

    def feed_args(self, inputs_flag: str, outputs_flag: str) -> list[str]:
        """A runner's arguments for what each run feeds on and keeps, under that runner's own
        flag names for the tensor files: a generation's tokens come from the loop, so it
        passes ``--generate`` and no tensor file (both runners refuse the two together)."""
        if self.generation is not None:
            return ["--generate", self.generation.arg]
        files = [(inputs_flag, self.inputs), (outputs_flag, self.outputs)]
        return [arg for flag, path in files if path for arg in (flag, str(path))]


def _libraries_of(pte: Path) -> tuple[str, ...]:
    try:
        return tuple(lib.name for lib in program_libraries(pte)) if Path(pte).is_file() else ()
    except Sme2Error:   # a damaged program: its run says what is wrong
        return ()


@dataclass(frozen=True)
class RunOutcome:
    etdump: Path
    wall_s: float
    stdout: str
    stderr: str
    kernel_trace: Path | None = None    # executed kernels (CSV), when the device traced them
    kernel_sample: Path | None = None   # sampled kernels (CSV), when the request asked for them
    # What a remote device copied to itself for this run (files, bytes, seconds; files that
    # were there already): pushes happen once per content, so mostly 0.
    pushed: tuple[int, int, float, int] = (0, 0, 0.0, 0)


class Runner(Protocol):
    """What executes a .pte. Every member is listed here; :class:`RunnerBase` gives the defaults
    of the optional ones, so callers never probe a runner with ``getattr``."""

    info: RunnerInfo
    # A name from pytest_sme2.device_programs.hwcaps.MASKS: the device hides those CPU features
    # from this runner's process (same binary, SME2 off). None: the process sees the CPU as it is.
    hwcap_mask: str | None
    # Whether it reads inputs from, and writes outputs to, tensor files (RunRequest.inputs and
    # .outputs); a user's executor_runner does not.
    takes_tensor_files: bool
    # Whether its process can take our preload library (a native program: our runner or an
    # executor_runner), which masks hwcaps and samples kernels; the Python runtime cannot.
    preloads: bool
    # Whether it can time its runs without an event tracer and trace others in the same process
    # (RunRequest.untraced): ours can; a user's executor_runner or llama_main cannot be told.
    times_untraced: bool
    # Whether it times the machine-state probe in its own process (RunRequest.probe): ours do.
    probes: bool
    # Whether the operators a program calls outside the runtime (RunRequest.kernel_libraries:
    # llama::custom_sdpa...) come with its own build: a user's runner (llama_main) decides by
    # how it was built. False: ours, which take them from this host's executorch wheel, so a
    # device other than the host (QEMU, a phone) refuses such a program before any process.
    brings_own_operators: bool
    # Whether it can trace operators into an ETDump (RunRequest.trace_runs, or every run when
    # it cannot time untraced). False: ExecuTorch's TextLLMRunner binding, no event tracer.
    traces: bool

    def command(self, request: RunRequest) -> list[str]:
        """The argv that runs ``request`` and writes ``request.etdump``. A remote device calls
        it with a request whose paths are already device paths, then starts the pushed copy of
        ``device_files()[0]`` instead of ``argv[0]``."""
        ...

    def device_files(self) -> list[Path]:
        """Host files a remote device needs: the executable first, then its shared libraries.
        Raises RunnerError for runners that can only run on the host."""
        ...

    def data_files(self) -> list[Path]:
        """Host files its command names besides the model and inputs (a llama_main's
        tokenizer): a remote device pushes them and gives the command their paths there."""
        ...

    def check_host(self) -> None:
        """RunnerError when it cannot run on this host (say, an aarch64 binary on x86)."""
        ...

    def check_device(self, abi: str) -> None:
        """RunnerError when it cannot run on a device of this ABI."""
        ...

    def close(self) -> None:
        """Release what it holds (a server process); called once at the end of a session."""
        ...

    def serving(self) -> tuple[int, ...]:
        """Processes of this session that serve its runs (the python runner's fork server,
        which forks each run): their CPU during a block is the runner's own, not work beside
        it (:mod:`pytest_sme2.devices.beside`)."""
        ...


class RunnerBase:
    """The defaults: tensor files, no preloading, runs anywhere, nothing to release."""

    hwcap_mask: str | None = None
    takes_tensor_files: bool = True
    preloads: bool = False
    times_untraced: bool = False
    probes: bool = False
    brings_own_operators: bool = True
    traces: bool = True

    def data_files(self) -> list[Path]:
        return []

    def check_host(self) -> None:
        return None

    def check_device(self, abi: str) -> None:
        return None

    def close(self) -> None:
        return None

    def serving(self) -> tuple[int, ...]:
        return ()


_RUNNER_DEFAULTS = {"hwcap_mask": None, "takes_tensor_files": True, "preloads": False,
                    "times_untraced": False, "probes": False, "brings_own_operators": True,
                    "traces": True,
                    "check_host": lambda: None, "check_device": lambda abi: None,
                    "close": lambda: None, "data_files": lambda: [], "serving": lambda: ()}


def with_defaults(runner: object) -> Runner:
    """``runner`` as a full :class:`Runner` (the one place the optional members are looked
    up, for runners that plugins make)."""
    if isinstance(runner, RunnerBase):
        return runner  # type: ignore[return-value]
    return WithDefaults(runner, _RUNNER_DEFAULTS)  # type: ignore[return-value]
