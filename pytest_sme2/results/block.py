"""One measured block (:class:`BlockResult`): what a runner process measured, the analysis of
its ETDump, where it ran, and the gate's verdicts on it; read and written key for key.

Every part is a typed record: the runner (:class:`RunnerInfo`), the device
(:class:`DeviceFacts`, with its spec), the gate's verdicts (:class:`Judgement`) and the
instruction count (:class:`InstructionCount`); ``--sme2-precision``'s outcome
(:class:`PrecisionOutcome`) is defined here, as only a block carries it. results.json keeps its
keys: the verdicts are written and read as ``baseline``, ``baseline_categories``,
``baseline_instructions`` and ``baseline_startup``."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from pytest_sme2.results.codec import as_json, decode, encode, read_optional
from pytest_sme2.results.device import DeviceFacts, RunnerInfo
from pytest_sme2.results.generation import PHASES, GenerationResult
from pytest_sme2.results.instructions import InstructionCount
from pytest_sme2.results.judgement import Judgement, judgement, judgements
from pytest_sme2.results.machine import Mode, ProbeReading, modes_of
from pytest_sme2.results.records import (KernelEvidence, OperatorStats, ResultAnalysis,
                                         RunContext)
from pytest_sme2.results.startup import Startup
from pytest_sme2.results.timing import LatencyStats, Timing
from pytest_sme2.results.under_test import UnderTest

# -- one block -------------------------------------------------------------------------------

_CORE = ("nodeid", "model", "dtype", "threads", "runner", "runner_info", "device", "runs",
         "warmup", "e2e_ms", "median_ms", "p90_ms", "cv_pct", "e2e", "etdump", "pte",
         "export_key")
_ANALYSIS = ("categories_ms", "overheads_ms", "operators", "kernel_evidence")
_CONTEXT = tuple(f.name for f in fields(RunContext))
# The gate's verdicts (Judgement.to_dict()): end to end and by category.
_GATE = ("baseline", "baseline_categories")
# --sme2-measure instructions: the count (InstructionCount.to_dict()) and the gate's verdict on
# it; absent from results.json when not measured.
_INSTRUCTIONS = ("instructions", "baseline_instructions")
# Load time, first inference, memory and .pte size (Startup.to_json()), and the gate's verdicts
# on load time and peak memory; absent from documents written before them.
_STARTUP = ("startup", "baseline_startup")
# An LLM measured as a generation (GenerationResult.to_json()): per-phase figures, and the
# gate's verdicts on prefill time and time to first token; absent for a model's forward pass.
_GENERATION = ("generation", "baseline_phases")
# How the latency was timed (untraced or through the operator tracer) and what tracing costs
# (Timing.to_dict()); absent from documents written before it.
_TIMING = ("timing",)
# The machine-state probe timed around the block's runs (ProbeReading.to_dict(); absent when
# not probed), and the speeds its timed runs fell into when more than one (Mode.to_dict()
# each): a probed block says [] for one speed, so a session's blocks have the same keys;
# absent from documents written before them.
_MACHINE = ("probe", "modes")
# The project's own keys after those, in this order, each only when set: a user's .pte without
# an .etrecord (what the report cannot show), --sme2-precision's outcome, what was under test
# (UnderTest.to_dict(), set when the block is recorded) and the taskset mask it
# was pinned to. A plugin's keys (``extra``) follow them.
_TAIL = ("etrecord_missing", "precision", "under_test", "cpu_mask")


# Documents written before blocks named their benchmark: a comparison's, confirmation's or A/B
# block's node id is its test's with a suffix, ``test[native#3]``.
_LEGACY_BLOCK_SUFFIX = re.compile(r"\[[^\[\]#]*#\d+\]$")


def device_label(device: DeviceFacts | Mapping[str, Any]) -> str:
    """How reports name a device: its --device spec (results before 0.2 have none: serial)."""
    if isinstance(device, DeviceFacts):
        return device.label
    return str(device.get("spec") or device.get("serial") or device.get("kind") or "?")


@dataclass(frozen=True)
class PrecisionOutcome:
    """What ``--sme2-precision`` asked and got, as each block of the benchmark carries it
    (``precision``; :meth:`pytest_sme2.measure.precision.Precision.record` makes it): the
    interval asked (``target_pct``) and got (``half_width_pct``, None without one), over how
    many blocks (paired or a level) and seconds, and, when not reached, why."""

    target_pct: float
    half_width_pct: float | None = None
    blocks: int = 0
    paired: bool = False
    seconds: float = 0.0
    reached: bool = False
    why: str = ""           # "" when reached; else what limited it

    to_dict = encode
    from_dict = classmethod(decode)


@dataclass
class BlockResult:
    """One block: one runner process's timed runs of one setting, and what they showed. A
    benchmark is one block, or several (a comparison side, confirmation blocks): pool them with
    :func:`pytest_sme2.results.pool`."""

    nodeid: str
    model: str
    dtype: str
    threads: int
    runner: RunnerInfo
    device: DeviceFacts             # with ``spec``: the --device it ran on
    runs: int
    warmup: int
    e2e_ms: list[float]             # timed runs, in order
    e2e: LatencyStats
    etdump: str
    pte: str
    export_key: str = ""
    analysis: ResultAnalysis = field(default_factory=ResultAnalysis)
    context: RunContext = field(default_factory=RunContext)
    # The regression gate's verdicts, None where it did not judge: end to end, and by gated
    # category ({} when none is gated).
    judgement: Judgement | None = None
    category_judgements: dict[str, Judgement] | None = None
    # Instructions per Method::execute, with --sme2-measure instructions on the host; the first
    # block of a benchmark only. And the gate's verdict on them.
    instructions: InstructionCount | None = None
    instructions_judgement: Judgement | None = None
    startup: Startup | None = None
    # The gate's verdicts on load time and peak memory: {"load": ..., "memory": ...}.
    startup_judgements: dict[str, Judgement] | None = None
    # An LLM's generation (None: a forward pass). Then ``e2e_ms`` holds every timed decode
    # step's time (one token each), and the analysis is of the decode executes; the
    # prefill and time to first token are here, judged as {"prefill": ..., "ttft": ...}.
    generation: GenerationResult | None = None
    phase_judgements: dict[str, Judgement] | None = None
    # How ``e2e_ms`` was timed, and the traced runs' E2E beside it (the breakdown's own).
    timing: Timing | None = None
    # The machine-state probe (pytest_sme2.analysis.machine_state) timed in this block's
    # process before and after its runs; None: not probed (emulated, a user's runner).
    probe: ProbeReading | None = None
    # The speeds the timed runs fell into, when more than one: their median is then a
    # mixture's, and every output says so.
    modes: tuple[Mode, ...] = ()
    etrecord_missing: str | None = None     # why a user's .pte has no .etrecord beside it
    precision: PrecisionOutcome | None = None               # with --sme2-precision
    under_test: UnderTest | None = None     # what was under test (set when recorded)
    cpu_mask: str | None = None             # the taskset mask the block was pinned to
    # Keys this version does not know: a plugin's own (pytest_sme2_amend_result).
    extra: dict[str, Any] = field(default_factory=dict)

    def __setattr__(self, name: str, value: Any) -> None:
        # A dict given for a record (results.json's form: tests, plugins, older code) becomes
        # the record, whether passed to the constructor or set later.
        coerce = _RECORDS.get(name)
        if coerce is not None and value is not None:
            value = coerce(value)
        object.__setattr__(self, name, value)

    @property
    def instructions_per_execute(self) -> float | None:
        return float(self.instructions.per_execute) if self.instructions else None

    @property
    def runner_name(self) -> str:
        return self.runner.name

    @property
    def name(self) -> str:
        """The test's name without its file (``test_latency[toy_cnn-fp32-t1]``)."""
        return self.nodeid.split("::")[-1]

    @property
    def benchmark(self) -> str:
        """The node id of the test whose benchmark this block is: its own, or the test's a
        comparison's, confirmation's or A/B block was named after (``t.py::test_x[native#3]``
        -> ``t.py::test_x``)."""
        if self.context.benchmark:
            return self.context.benchmark
        if self.block is None:
            return self.nodeid
        return _LEGACY_BLOCK_SUFFIX.sub("", self.nodeid)

    @property
    def depth(self) -> int:
        """An LLM's context depth: tokens in its KV cache before the prompt (0: an empty
        cache, or a forward pass)."""
        return self.generation.depth if self.generation is not None else 0

    def block_phase(self, key: str) -> float | None:
        """This block's value of a generation's phase (``prefill``, ``ttft``:
        :data:`~pytest_sme2.results.generation.BLOCK_PHASES`); None for a forward pass or a
        phase it did not time."""
        return self.generation.block_phase(key) if self.generation is not None else None

    @property
    def evidence_per_phase(self) -> list[tuple[str, KernelEvidence | None]]:
        """Its kernel evidence as (phase, evidence): ``[("", ...)]`` for a forward pass, one
        entry per phase (prefill, decode) for a generation, each phase's own processes'."""
        if self.generation is None:
            return [("", self.kernel_evidence)]
        return [(p, self.generation.phase(p).kernel_evidence) for p in PHASES]

    @property
    def median_ms(self) -> float:
        return self.e2e.median_ms

    @property
    def block(self) -> int | None:
        return self.context.block

    @property
    def device_label(self) -> str:
        return self.device.label

    @property
    def emulated(self) -> bool:
        """Measured on an emulated CPU: its timings say nothing about speed."""
        return self.device.emulated

    @property
    def categories_ms(self) -> dict[str, float]:
        """Mean ms per traced run by operator category (sums to ``breakdown_e2e_ms``)."""
        return self.analysis.categories_ms

    @property
    def breakdown_e2e_ms(self) -> float:
        """The E2E the categories add up to: the traced runs' mean where the latency was
        timed apart from them, else the timed runs' own mean."""
        t = self.timing
        if t is not None and t.untraced and t.traced_mean_ms is not None:
            return t.traced_mean_ms
        return self.e2e.mean_ms

    @property
    def operators(self) -> list[OperatorStats]:
        return self.analysis.operators

    @property
    def kernel_evidence(self) -> KernelEvidence | None:
        return self.analysis.kernel_evidence

    def to_json(self) -> dict[str, Any]:
        gate = {k: as_json(v) for k, v in (
            ("baseline", self.judgement),
            ("baseline_categories", self.category_judgements),
            ("instructions", self.instructions),
            ("baseline_instructions", self.instructions_judgement),
            ("startup", self.startup),
            ("baseline_startup", self.startup_judgements),
            ("generation", self.generation),
            ("baseline_phases", self.phase_judgements),
            ("timing", self.timing), ("probe", self.probe),
            ("modes", self.modes if self.modes or self.probe else None),
            ("etrecord_missing", self.etrecord_missing), ("precision", self.precision),
            ("under_test", self.under_test), ("cpu_mask", self.cpu_mask)) if v is not None}
        return {
            "nodeid": self.nodeid, "model": self.model, "dtype": self.dtype,
            "threads": self.threads, "runner": self.runner_name,
            "runner_info": self.runner.to_dict(), "device": self.device.to_dict(),
            "runs": self.runs, "warmup": self.warmup, "e2e_ms": self.e2e_ms,
            "median_ms": self.e2e.median_ms, "p90_ms": self.e2e.p90_ms,
            "cv_pct": self.e2e.cv_pct, "e2e": self.e2e.to_dict(),
            "etdump": self.etdump, "pte": self.pte, "export_key": self.export_key,
            **self.analysis.to_json(), **self.context.to_json(), **gate, **self.extra,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "BlockResult":
        known = set(_CORE + _ANALYSIS + _CONTEXT + _GATE + _INSTRUCTIONS + _STARTUP
                    + _GENERATION + _TIMING + _MACHINE + _TAIL)
        info = d.get("runner_info")
        return cls(nodeid=d["nodeid"], model=d["model"], dtype=d["dtype"], threads=d["threads"],
                   runner=RunnerInfo.from_dict(info) if info else RunnerInfo(d["runner"]),
                   device=DeviceFacts.from_dict(d["device"]),
                   runs=d["runs"], warmup=d["warmup"], e2e_ms=list(d["e2e_ms"]),
                   e2e=LatencyStats(**d["e2e"]), etdump=d["etdump"], pte=d["pte"],
                   export_key=d.get("export_key", ""), analysis=ResultAnalysis.from_json(d),
                   context=RunContext.from_json(d),
                   judgement=judgement(d.get("baseline")),
                   category_judgements=judgements(d.get("baseline_categories")),
                   instructions=read_optional(InstructionCount, d.get("instructions")),
                   instructions_judgement=judgement(d.get("baseline_instructions")),
                   startup=Startup.from_json(d.get("startup")),
                   startup_judgements=judgements(d.get("baseline_startup")),
                   generation=read_optional(GenerationResult, d.get("generation")),
                   phase_judgements=judgements(d.get("baseline_phases")),
                   timing=read_optional(Timing, d.get("timing")),
                   probe=read_optional(ProbeReading, d.get("probe")),
                   modes=modes_of(d.get("modes")),
                   etrecord_missing=d.get("etrecord_missing"),
                   precision=read_optional(PrecisionOutcome, d.get("precision")),
                   under_test=d.get("under_test"), cpu_mask=d.get("cpu_mask"),
                   extra={k: v for k, v in d.items() if k not in known})


def _record(cls: Any) -> Any:
    return lambda v: cls.from_dict(v) if isinstance(v, Mapping) else v


_RECORDS = {"runner": _record(RunnerInfo), "device": _record(DeviceFacts),
            "instructions": _record(InstructionCount), "judgement": judgement,
            "category_judgements": judgements, "instructions_judgement": judgement,
            "startup_judgements": judgements, "phase_judgements": judgements,
            "timing": _record(Timing), "precision": _record(PrecisionOutcome),
            "probe": _record(ProbeReading),
            "under_test": _record(UnderTest)}
