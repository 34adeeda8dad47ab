"""One measured block (``BenchmarkResult``): what a runner process measured, the analysis of
its ETDump, where it ran, and the gate's verdicts on it; read and written key for key."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from pytest_sme2.analysis.latency import LatencyStats
from pytest_sme2.results.records import (KernelEvidence, OperatorStats, ResultAnalysis,
                                         RunContext, _known)
from pytest_sme2.results.startup import Startup

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
