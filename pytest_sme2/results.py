"""The one results schema: typed records for what a benchmark measured and what a comparison
found, the one pooling of a benchmark's blocks, and ``results.json`` (versioned) with its one
loader.

``results.json`` (``"schema": "pytest-sme2/results/1"``) holds ``session``, ``benchmarks``
(:class:`BenchmarkResult`, one per measured block) and ``comparisons``
(:class:`ComparisonRecord`). Every record writes the keys it reads, in the same order, so a
document this version wrote loads and writes back byte for byte; older documents load with
defaults for what they lack. Keys a record does not know are kept in its ``extra``.
"""

from __future__ import annotations

import json
import os
import stat
import statistics
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from functools import lru_cache
from pathlib import Path
from typing import Any

from pytest_sme2.analysis.latency import LatencyStats
from pytest_sme2.errors import Sme2Error
from pytest_sme2.stats import Interval
from pytest_sme2.thermal import CooldownRecord

RESULTS_SCHEMA = "pytest-sme2/results/1"


@lru_cache(maxsize=None)
def _field_names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in fields(cls))


def _known(cls: type, d: Mapping[str, Any]) -> dict[str, Any]:
    """The items of ``d`` that name a field of the dataclass ``cls``."""
    names = _field_names(cls)
    return {k: v for k, v in d.items() if k in names}


class _ItemAccess:
    """``record["name"]`` and ``record.get("name")`` as well as ``record.name``: these records
    were plain dicts before, and users' tests index them (``kernel_evidence["sme2"]``)."""

    def __getitem__(self, key: str) -> Any:
        if key not in _field_names(type(self)):
            raise KeyError(key)
        return getattr(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default


# -- the analysis of one block --------------------------------------------------------------

@dataclass
class OperatorStats(_ItemAccess):
    """One operator (name and instruction) of a benchmark, as ``analysis/operators.py``
    computed it: per timed run means, share of E2E and the bottleneck flags."""

    name: str
    instruction_id: int = -1
    category: str = ""
    delegated: bool = False
    backend: str = ""
    calls_per_run: float = 0.0
    mean_ms_per_run: float = 0.0
    pct_e2e: float = 0.0
    bottleneck: bool = False          # above analysis.operators.BOTTLENECK_PCT of E2E
    should_delegate: bool = False     # a bottleneck outside the delegate
    op_types: list[str] = field(default_factory=list)
    module_paths: list[str] = field(default_factory=list)
    kernel_hint: str = ""

    def to_json(self) -> dict[str, Any]:
        """As ``dataclasses.asdict`` gives it, without its deep copy (hundreds per block)."""
        d = dict(self.__dict__)
        d["op_types"], d["module_paths"] = list(self.op_types), list(self.module_paths)
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "OperatorStats":
        return cls(**_known(cls, d))


@dataclass
class LoggedKernel(_ItemAccess):
    """A micro-kernel an XNNPACK log (xnntrace) names as selected."""

    name: str
    kind: str = ""
    isa: str = ""
    sme2: bool = False


@dataclass
class TracedKernel(_ItemAccess):
    """A micro-kernel a kernel trace shows executed; ``blocks``: its translated blocks."""

    name: str
    isa_family: str = ""
    kind: str = ""
    library: str = ""
    blocks: int = 0


@dataclass
class SampledKernelRecord(_ItemAccess):
    """A micro-kernel the sampler caught executing; ``samples``, and their share of all."""

    name: str
    isa_family: str = ""
    kind: str = ""
    library: str = ""
    samples: int = 0
    share: float = 0.0


@dataclass
class KernelEvidence(_ItemAccess):
    """The SME2 verdict (``proven``, ``indicated``, ``absent``, ``unknown``; ``mixed`` for
    blocks that disagree) and what it rests on."""

    sme2: str = "unknown"
    reason: str = ""
    kleidiai_ops: list[str] = field(default_factory=list)
    kernels: list[LoggedKernel] = field(default_factory=list)
    executed_kernels: list[TracedKernel] = field(default_factory=list)
    streaming_sme_blocks: int | None = None     # None: no kernel trace was read
    kernel_trace_source: str = ""
    # Sampling (an evidence process): what was caught, out of how many samples (None: none
    # taken), and the CSV. Written to results.json only when a sample was taken.
    sampled_kernels: list[SampledKernelRecord] = field(default_factory=list)
    samples_total: int | None = None
    kernel_sample_source: str = ""

    @property
    def traced(self) -> bool:
        """A kernel trace was read, so ``executed_kernels`` is what ran (possibly nothing)."""
        return self.streaming_sme_blocks is not None or bool(self.executed_kernels)

    @property
    def sampled(self) -> bool:
        return self.samples_total is not None

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        if self.samples_total is None:      # sessions without sampling read as before
            for key in ("sampled_kernels", "samples_total", "kernel_sample_source"):
                d.pop(key)
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any] | None) -> "KernelEvidence | None":
        if not d:
            return None
        known = _known(cls, d)
        known["kernels"] = [LoggedKernel(**_known(LoggedKernel, k))
                            for k in known.get("kernels") or []]
        known["executed_kernels"] = [TracedKernel(**_known(TracedKernel, k))
                                     for k in known.get("executed_kernels") or []]
        known["sampled_kernels"] = [SampledKernelRecord(**_known(SampledKernelRecord, k))
                                    for k in known.get("sampled_kernels") or []]
        known["kleidiai_ops"] = list(known.get("kleidiai_ops") or [])
        return cls(**known)


@dataclass
class ResultAnalysis:
    """What the ETDump of one block says beyond its latency: mean ms per timed run by category
    (adding up to E2E's mean), framework overheads, operators and the SME2 evidence."""

    categories_ms: dict[str, float] = field(default_factory=dict)
    overheads_ms: dict[str, float] = field(default_factory=dict)
    operators: list[OperatorStats] = field(default_factory=list)
    kernel_evidence: KernelEvidence | None = None

    def to_json(self) -> dict[str, Any]:
        return {"categories_ms": self.categories_ms, "overheads_ms": self.overheads_ms,
                "operators": [o.to_json() for o in self.operators],
                "kernel_evidence": self.kernel_evidence.to_json() if self.kernel_evidence
                else {}}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "ResultAnalysis":
        """From a benchmark's entry or ``Analysis.to_json()`` (the same keys)."""
        return cls(categories_ms=dict(d.get("categories_ms") or {}),
                   overheads_ms=dict(d.get("overheads_ms") or {}),
                   operators=[OperatorStats.from_json(o) for o in d.get("operators") or []],
                   kernel_evidence=KernelEvidence.from_json(d.get("kernel_evidence")))


@dataclass
class RunContext:
    """Where and how a block ran, beside what it measured."""

    thermal_before: dict[str, float] | None = None   # degrees C per zone (Android)
    thermal_after: dict[str, float] | None = None
    block: int | None = None          # position in a comparison or confirmation; None: first
    outputs: str | None = None        # the last run's outputs (runners that write them)
    kernel_trace: str | None = None   # executed kernels CSV (traced devices)
    trace: str | None = None          # Chrome/Perfetto trace JSON of the median run
    # --sme2-cooldown: what the thermal hold before this block did (None: not asked for)
    cooldown: CooldownRecord | None = None
    # --sme2-sample: the sampled-kernels CSV of the benchmark's evidence process, or why there
    # is none (the block itself is measured either way)
    kernel_sample: str | None = None
    sample_problem: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.cooldown, Mapping):     # as results.json holds it
            self.cooldown = CooldownRecord.from_dict(self.cooldown)

    @property
    def started_hot(self) -> bool:
        return bool(self.cooldown and self.cooldown.hot)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        # documents written before these keys: unchanged
        for key in ("trace", "cooldown", "kernel_sample", "sample_problem"):
            if d[key] is None:
                del d[key]
        return d


# -- load, first inference, memory ------------------------------------------------------------

@dataclass
class ProcessStartup(_ItemAccess):
    """One runner process from its start to its first inference: one cold load."""

    load_ms: float | None = None          # program + method load (see Startup.load_source)
    method_load_ms: float | None = None   # the method load alone
    program_load_ms: float | None = None  # Module::load, the runner's timer (None: not timed)
    first_inference_ms: float | None = None   # the first Method::execute after the load
    peak_rss_kb: int | None = None        # VmHWM at the end of the process
    load_rss_kb: int | None = None        # resident memory the load added

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "ProcessStartup":
        return cls(**_known(cls, d))


def _median(values: Iterable[float | int | None]) -> float | None:
    present = [float(v) for v in values if v is not None]
    return float(statistics.median(present)) if present else None


@dataclass
class Startup(_ItemAccess):
    """What a benchmark costs before its steady state: the ``.pte`` size, and per cold process
    (the block's own first, then the load-only processes of ``--sme2-loads``) its load time,
    first inference and memory. Medians over processes: a process is the unit of a cold load."""

    pte_bytes: int | None = None
    processes: list[ProcessStartup] = field(default_factory=list)
    load_source: str = ""       # which events / timers load_ms comes from
    memory_source: str = ""     # what peak and load memory are of, or why there are none
    problem: str = ""           # why a load-only process failed (the block itself is kept)

    @property
    def load_ms(self) -> float | None:
        return _median(p.load_ms for p in self.processes)

    @property
    def method_load_ms(self) -> float | None:
        return _median(p.method_load_ms for p in self.processes)

    @property
    def first_inference_ms(self) -> float | None:
        return _median(p.first_inference_ms for p in self.processes)

    @property
    def peak_rss_kb(self) -> float | None:
        return _median(p.peak_rss_kb for p in self.processes)

    @property
    def load_rss_kb(self) -> float | None:
        return _median(p.load_rss_kb for p in self.processes)

    @property
    def loads(self) -> int:
        """Cold loads measured."""
        return sum(1 for p in self.processes if p.load_ms is not None)

    def to_json(self) -> dict[str, Any]:
        return {"pte_bytes": self.pte_bytes, "load_ms": self.load_ms,
                "method_load_ms": self.method_load_ms,
                "first_inference_ms": self.first_inference_ms,
                "peak_rss_kb": self.peak_rss_kb, "load_rss_kb": self.load_rss_kb,
                "load_source": self.load_source, "memory_source": self.memory_source,
                "processes": [asdict(p) for p in self.processes],
                **({"problem": self.problem} if self.problem else {})}

    @classmethod
    def from_json(cls, d: Mapping[str, Any] | None) -> "Startup | None":
        if not d:
            return None
        return cls(pte_bytes=d.get("pte_bytes"),
                   processes=[ProcessStartup.from_json(p) for p in d.get("processes") or []],
                   load_source=str(d.get("load_source") or ""),
                   memory_source=str(d.get("memory_source") or ""),
                   problem=str(d.get("problem") or ""))


def pool_startup(blocks: Iterable["BenchmarkResult"]) -> Startup | None:
    """The blocks of one side of a comparison as one startup record: every block is a cold
    process, so their processes pool."""
    found = [b.startup for b in blocks if b.startup is not None]
    if not found:
        return None
    return Startup(pte_bytes=found[0].pte_bytes,
                   processes=[p for s in found for p in s.processes],
                   load_source=found[0].load_source, memory_source=found[0].memory_source,
                   problem="; ".join(dict.fromkeys(s.problem for s in found if s.problem)))


# -- one block -------------------------------------------------------------------------------

_CORE = ("nodeid", "model", "dtype", "threads", "runner", "runner_info", "device", "runs",
         "warmup", "e2e_ms", "median_ms", "p90_ms", "cv_pct", "e2e", "etdump", "pte",
         "export_key")
_ANALYSIS = ("categories_ms", "overheads_ms", "operators", "kernel_evidence")
_CONTEXT = tuple(f.name for f in fields(RunContext))
_GATE = ("baseline", "baseline_categories")
# --sme2-measure instructions: the count (InstructionCount.to_dict()) and the gate's verdict on
# it; absent from results.json when not measured.
_INSTRUCTIONS = ("instructions", "baseline_instructions")
# Load time, first inference, memory and .pte size (Startup.to_json()), and the gate's verdicts
# on load time and peak memory; absent from documents written before them.
_STARTUP = ("startup", "baseline_startup")


def device_label(device: dict[str, Any]) -> str:
    """How reports name a device: its --device spec (results before 0.2 have none: serial)."""
    return str(device.get("spec") or device.get("serial") or device.get("kind") or "?")


@dataclass
class BenchmarkResult:
    """One block: one runner process's timed runs of one setting, and what they showed."""

    nodeid: str
    model: str
    dtype: str
    threads: int
    runner: dict[str, Any]          # RunnerInfo.to_dict(): name, kind, labels
    device: dict[str, Any]          # DeviceFacts.to_dict(), and "spec": the --device it ran on
    runs: int
    warmup: int
    e2e_ms: list[float]             # timed runs, in order
    e2e: LatencyStats
    etdump: str
    pte: str
    export_key: str = ""
    analysis: ResultAnalysis = field(default_factory=ResultAnalysis)
    context: RunContext = field(default_factory=RunContext)
    # The regression gate's verdicts (``Judgement.to_dict()``), None where it did not judge.
    baseline: dict[str, Any] | None = None
    baseline_categories: dict[str, dict[str, Any]] | None = None
    # Instructions per Method::execute (InstructionCount.to_dict()), with --sme2-measure
    # instructions on the host; the first block of a benchmark only.
    instructions: dict[str, Any] | None = None
    baseline_instructions: dict[str, Any] | None = None     # the gate's verdict on them
    startup: Startup | None = None
    # The gate's verdicts on load time and peak memory: {"load": ..., "memory": ...}.
    baseline_startup: dict[str, dict[str, Any]] | None = None
    extra: dict[str, Any] = field(default_factory=dict)     # keys this version does not know

    @property
    def instructions_per_execute(self) -> float | None:
        return float(self.instructions["per_execute"]) if self.instructions else None

    @property
    def runner_name(self) -> str:
        return self.runner["name"]

    @property
    def name(self) -> str:
        """The test's name without its file (``test_latency[toy_cnn-fp32-t1]``)."""
        return self.nodeid.split("::")[-1]

    @property
    def median_ms(self) -> float:
        return self.e2e.median_ms

    @property
    def block(self) -> int | None:
        return self.context.block

    @property
    def device_label(self) -> str:
        return device_label(self.device)

    @property
    def emulated(self) -> bool:
        """Measured on an emulated CPU: its timings say nothing about speed."""
        return bool((self.device.get("extra") or {}).get("emulated"))

    @property
    def categories_ms(self) -> dict[str, float]:
        """Mean ms per timed run by operator category (sums to ``e2e.mean_ms``)."""
        return self.analysis.categories_ms

    @property
    def operators(self) -> list[OperatorStats]:
        return self.analysis.operators

    @property
    def kernel_evidence(self) -> KernelEvidence | None:
        return self.analysis.kernel_evidence

    def to_json(self) -> dict[str, Any]:
        gate = {k: v for k, v in (("baseline", self.baseline),
                                  ("baseline_categories", self.baseline_categories))
                if v is not None}
        gate.update({k: v for k, v in (("instructions", self.instructions),
                                       ("baseline_instructions", self.baseline_instructions),
                                       ("startup", self.startup.to_json() if self.startup
                                        else None),
                                       ("baseline_startup", self.baseline_startup))
                     if v is not None})
        return {
            "nodeid": self.nodeid, "model": self.model, "dtype": self.dtype,
            "threads": self.threads, "runner": self.runner_name,
            "runner_info": self.runner, "device": self.device,
            "runs": self.runs, "warmup": self.warmup, "e2e_ms": self.e2e_ms,
            "median_ms": self.e2e.median_ms, "p90_ms": self.e2e.p90_ms,
            "cv_pct": self.e2e.cv_pct, "e2e": self.e2e.to_dict(),
            "etdump": self.etdump, "pte": self.pte, "export_key": self.export_key,
            **self.analysis.to_json(), **self.context.to_json(), **gate, **self.extra,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "BenchmarkResult":
        known = set(_CORE + _ANALYSIS + _CONTEXT + _GATE + _INSTRUCTIONS + _STARTUP)
        return cls(nodeid=d["nodeid"], model=d["model"], dtype=d["dtype"], threads=d["threads"],
                   runner=d.get("runner_info") or {"name": d["runner"]}, device=d["device"],
                   runs=d["runs"], warmup=d["warmup"], e2e_ms=list(d["e2e_ms"]),
                   e2e=LatencyStats(**d["e2e"]), etdump=d["etdump"], pte=d["pte"],
                   export_key=d.get("export_key", ""), analysis=ResultAnalysis.from_json(d),
                   context=RunContext(**_known(RunContext, d)),
                   baseline=d.get("baseline"), baseline_categories=d.get("baseline_categories"),
                   instructions=d.get("instructions"),
                   baseline_instructions=d.get("baseline_instructions"),
                   startup=Startup.from_json(d.get("startup")),
                   baseline_startup=d.get("baseline_startup"),
                   extra={k: v for k, v in d.items() if k not in known})


# -- pooling blocks --------------------------------------------------------------------------

@dataclass(frozen=True)
class PooledLatency:
    """A benchmark's blocks (runner processes) as one set of figures. The block is the unit
    of replication, as in comparisons and the regression gate: ``median_ms`` is the median of
    the block medians, ``p90_ms``, ``std_ms`` and ``cv_pct`` the median over blocks of each
    block's own; ``mean_ms`` the mean of the block means (what the categories add up to);
    ``min_ms``/``max_ms`` over all runs; ``n`` every timed run. One block: its own figures."""

    median_ms: float
    p90_ms: float
    std_ms: float
    cv_pct: float
    mean_ms: float
    min_ms: float
    max_ms: float
    n: int
    blocks: int
    block_medians_ms: tuple[float, ...]


def pool(blocks: Iterable[BenchmarkResult | LatencyStats]) -> PooledLatency:
    """The one pooling of a benchmark's blocks, used by the terminal table, report.md and the
    comparisons' medians."""
    stats = [b.e2e if isinstance(b, BenchmarkResult) else b for b in blocks]
    if not stats:
        raise Sme2Error("no blocks to pool")
    medians = tuple(s.median_ms for s in stats)
    return PooledLatency(
        median_ms=statistics.median(medians),
        p90_ms=statistics.median(s.p90_ms for s in stats),
        std_ms=statistics.median(s.std_ms for s in stats),
        cv_pct=statistics.median(s.cv_pct for s in stats),
        mean_ms=statistics.fmean(s.mean_ms for s in stats),
        min_ms=min(s.min_ms for s in stats), max_ms=max(s.max_ms for s in stats),
        n=sum(s.n for s in stats), blocks=len(stats), block_medians_ms=medians)


def mean_per_block(values: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Per key, the mean over blocks (a block without the key counts 0), keys in first-seen
    order. Blocks' categories pooled so are shares of :attr:`PooledLatency.mean_ms`."""
    keys = list(dict.fromkeys(k for d in values for k in d))
    return {k: sum(float(d.get(k, 0.0)) for d in values) / len(values) for k in keys} \
        if values else {}


def pool_categories(blocks: Sequence[BenchmarkResult]) -> dict[str, float]:
    """Mean ms per run of each operator category over a benchmark's blocks."""
    return mean_per_block([b.categories_ms for b in blocks])


# -- comparisons -----------------------------------------------------------------------------

@dataclass
class OutputCheck:
    max_abs_diff: float
    tolerance: float
    equal: bool
    max_rel_diff: float = 0.0           # max_abs_diff / max |base output|

    def to_dict(self) -> dict:
        return {"max_abs_diff": self.max_abs_diff, "max_rel_diff": self.max_rel_diff,
                "tolerance": self.tolerance, "equal": self.equal}

    @classmethod
    def from_json(cls, d: Mapping[str, Any] | None) -> "OutputCheck | None":
        return cls(**_known(cls, d)) if d else None


def _interval(d: Mapping[str, Any] | None) -> Interval | None:
    return Interval(d["point"], d["low"], d["high"], d.get("confidence", 0.95)) if d else None


@dataclass
class ComparisonRecord:
    """What a comparison of two runners found, as ``results.json`` holds it: the figures and
    the node ids of its blocks (the benchmarks of the same document), not the blocks."""

    model: str
    dtype: str
    threads: int
    base: str                                   # runner names
    candidate: str
    base_median_ms: float                       # pool(base blocks).median_ms
    candidate_median_ms: float
    speedup: Interval                           # base time / candidate time
    category_speedups: dict[str, Interval | None]
    outputs: OutputCheck | None
    verdict: str
    margin: float
    emulated: bool = False
    base_block_medians_ms: list[float] = field(default_factory=list)
    candidate_block_medians_ms: list[float] = field(default_factory=list)
    base_blocks: list[str] = field(default_factory=list)       # benchmark node ids
    candidate_blocks: list[str] = field(default_factory=list)
    nodeid: str = ""                            # the test that compared ("" before 14)
    baselines: dict[str, dict[str, Any]] | None = None   # the gate's verdict per runner
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def point(self) -> str:
        return f"{self.model} {self.dtype} t{self.threads}"

    @property
    def name(self) -> str:
        """The test's name without its file, or the point for a document without it."""
        return self.nodeid.split("::")[-1] if self.nodeid else self.point

    def to_json(self) -> dict[str, Any]:
        return {
            **({"nodeid": self.nodeid} if self.nodeid else {}),
            "model": self.model, "dtype": self.dtype, "threads": self.threads,
            "base": self.base, "candidate": self.candidate,
            "base_median_ms": self.base_median_ms,
            "candidate_median_ms": self.candidate_median_ms,
            "speedup": self.speedup.to_dict(),
            "category_speedups": {k: (v.to_dict() if v else None)
                                  for k, v in self.category_speedups.items()},
            "outputs": self.outputs.to_dict() if self.outputs else None,
            "verdict": self.verdict, "margin": self.margin, "emulated": self.emulated,
            "base_block_medians_ms": self.base_block_medians_ms,
            "candidate_block_medians_ms": self.candidate_block_medians_ms,
            "base_blocks": self.base_blocks, "candidate_blocks": self.candidate_blocks,
            **({"baselines": self.baselines} if self.baselines is not None else {}),
            **self.extra,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "ComparisonRecord":
        known = {f.name for f in fields(cls)}
        return cls(
            model=d["model"], dtype=d["dtype"], threads=d["threads"], base=d["base"],
            candidate=d["candidate"], base_median_ms=d["base_median_ms"],
            candidate_median_ms=d["candidate_median_ms"], speedup=_interval(d["speedup"]),
            category_speedups={k: _interval(v)
                               for k, v in (d.get("category_speedups") or {}).items()},
            outputs=OutputCheck.from_json(d.get("outputs")), verdict=d["verdict"],
            margin=d["margin"], emulated=bool(d.get("emulated", False)),
            base_block_medians_ms=list(d.get("base_block_medians_ms") or []),
            candidate_block_medians_ms=list(d.get("candidate_block_medians_ms") or []),
            base_blocks=list(d.get("base_blocks") or []),
            candidate_blocks=list(d.get("candidate_blocks") or []),
            nodeid=d.get("nodeid", ""), baselines=d.get("baselines"),
            extra={k: v for k, v in d.items() if k not in known})


# -- the document ----------------------------------------------------------------------------

@dataclass
class ResultsDoc:
    """A whole ``results.json``: what :func:`load_results` gives and the reports read."""

    session: dict[str, Any] = field(default_factory=dict)    # versions, configuration, runners
    benchmarks: list[BenchmarkResult] = field(default_factory=list)
    comparisons: list[ComparisonRecord] = field(default_factory=list)
    schema: str = RESULTS_SCHEMA

    def blocks(self, nodeids: Iterable[str]) -> list[BenchmarkResult]:
        """The benchmarks with these node ids, in that order (ids not in the document left
        out)."""
        by_id = {b.nodeid: b for b in self.benchmarks}
        return [by_id[i] for i in nodeids if i in by_id]

    def to_json(self) -> dict[str, Any]:
        return results_document(self.benchmarks, self.comparisons, self.session, self.schema)


def load_results(source: ResultsDoc | Mapping[str, Any] | str | Path) -> ResultsDoc:
    """The one loader of ``results.json``: a path (which must carry the schema), a document
    already parsed, or a :class:`ResultsDoc` (returned as it is). Anything else, or content
    this version cannot read, raises :class:`Sme2Error` in one line naming the source."""
    if isinstance(source, ResultsDoc):
        return source
    if isinstance(source, Mapping):
        name, doc = "results document", source
        if doc.get("schema", RESULTS_SCHEMA) != RESULTS_SCHEMA:
            raise _not_results(name, doc)
    else:
        name = str(source)
        try:
            doc = json.loads(Path(source).read_text())
        except FileNotFoundError:
            raise Sme2Error(f"{name}: no such results file") from None
        except (OSError, ValueError) as e:
            raise Sme2Error(f"{name}: not a readable results.json ({e})") from None
        if not isinstance(doc, dict) or doc.get("schema") != RESULTS_SCHEMA:
            raise _not_results(name, doc)
    try:
        return ResultsDoc(session=dict(doc.get("session") or {}),
                          benchmarks=[BenchmarkResult.from_json(b)
                                      for b in doc.get("benchmarks") or []],
                          comparisons=[ComparisonRecord.from_json(c)
                                       for c in doc.get("comparisons") or []],
                          schema=doc.get("schema", RESULTS_SCHEMA))
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise Sme2Error(f"{name}: a results document this version cannot read "
                        f"({type(e).__name__}: {e}); was it edited by hand?") from None


def _not_results(name: str, doc: Any) -> Sme2Error:
    schema = doc.get("schema") if isinstance(doc, Mapping) else None
    return Sme2Error(f"{name}: not a pytest-sme2 results document (schema {schema!r}, expected "
                     f"{RESULTS_SCHEMA!r})")


# -- writing ---------------------------------------------------------------------------------

def atomic_write_text(path: Path, text: str) -> None:
    """Write via a temporary file and rename: readers see the old or the new file, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = _mode_for(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, mode)   # mkstemp's file is private (0600); results are for sharing
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _mode_for(path: Path) -> int:
    """The mode ``open(path, "w")`` would leave: the file's own if it exists, else 0666 less
    the umask (read from the process, which has no call that only reads it)."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def results_document(results: Iterable[BenchmarkResult], comparisons: Iterable[Any] = (),
                     session: dict[str, Any] | None = None,
                     schema: str = RESULTS_SCHEMA) -> dict[str, Any]:
    """The results.json document: ``session`` (configuration, versions), ``benchmarks`` (one
    per measured block) and ``comparisons`` (records, comparisons or their JSON documents)."""
    return {"schema": schema, "session": session or {},
            "benchmarks": [r.to_json() for r in results],
            "comparisons": [c if isinstance(c, dict) else c.to_json() for c in comparisons]}


def write_results(path: Path, results: Iterable[BenchmarkResult], comparisons: Iterable[Any] = (),
                  session: dict[str, Any] | None = None) -> None:
    doc = results_document(results, comparisons, session)
    atomic_write_text(path, json.dumps(doc, indent=2) + "\n")


_SLOT = "\0benchmarks\0"   # where the kept texts go in the document's layout


class ResultsWriter:
    """``results.json`` rewritten after every benchmark at the cost of what changed: each
    benchmark is laid out once and its text kept (the pure-Python indenting encoder took ~1 s of
    a 28-benchmark session, laying out every earlier benchmark again on each write). The file is
    byte-identical to :func:`write_results`'. A result must not change once written."""

    def __init__(self) -> None:
        self._kept: dict[int, tuple[BenchmarkResult, str]] = {}

    def _text(self, result: BenchmarkResult) -> str:
        kept = self._kept.get(id(result))
        if kept is None or kept[0] is not result:
            # As json.dumps(document, indent=2) lays out an element of a top-level list.
            kept = (result, json.dumps(result.to_json(), indent=2).replace("\n", "\n    "))
            self._kept[id(result)] = kept
        return kept[1]

    def text(self, results: Iterable[BenchmarkResult], comparisons: Iterable[Any] = (),
             session: dict[str, Any] | None = None) -> str:
        doc = results_document((), comparisons, session)
        items = [self._text(r) for r in results]
        doc["benchmarks"] = _SLOT if items else []
        text = json.dumps(doc, indent=2)
        if items:
            text = text.replace(json.dumps(_SLOT), "[\n    " + ",\n    ".join(items) + "\n  ]", 1)
        return text + "\n"

    def write(self, path: Path, results: Iterable[BenchmarkResult],
              comparisons: Iterable[Any] = (), session: dict[str, Any] | None = None) -> None:
        atomic_write_text(path, self.text(results, comparisons, session))
