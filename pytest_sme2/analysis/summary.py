"""One ETDump -> one :class:`Analysis`: latency, categories, operators, overheads and kernel
evidence. The single entry point the CLI, the plugin and reports use."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from pytest_sme2.analysis.categories import CategoryRule
from pytest_sme2.analysis.events import name_codes
from pytest_sme2.analysis.kernel_sample import KernelSample, read_kernel_sample_csv
from pytest_sme2.analysis.kernel_sources import NO_KERNELS, KernelSources
from pytest_sme2.analysis.kernel_trace import KernelTrace, read_kernel_trace_csv
from pytest_sme2.analysis.kernels import (kernel_hint, kleidiai_ops, operator_kernel_hints,
                                          parse_xnntrace, sme2_verdict, xnntrace_counts)
from pytest_sme2.analysis.latency import e2e_per_run, latency_stats
from pytest_sme2.results.timing import LatencyStats
from pytest_sme2.analysis.operators import (annotate, category_breakdown, operator_table,
                                            overheads)
from pytest_sme2.errors import Sme2Error
from pytest_sme2.readers.etrecord import ETRecordInfo, read_etrecord
from pytest_sme2.results.records import KernelEvidence, OperatorStats, ResultAnalysis
from pytest_sme2.readers.etdump import read_etdump

ANALYSIS_SCHEMA = "pytest-sme2/analysis/1"


@dataclass
class Analysis:
    source: str
    runs: int                       # Execute runs in the file
    warmup: int
    e2e_all: pd.Series              # Method::execute ms per run, warm-up included
    e2e: LatencyStats               # timed runs only
    categories_ms: dict[str, float]  # mean ms per timed run; sums to e2e.mean_ms
    operators: pd.DataFrame         # see operators.OPERATOR_COLUMNS
    overheads_ms: dict[str, float]
    evidence: KernelEvidence        # the SME2 verdict; results.json's kernel_evidence
    events: pd.DataFrame            # annotated events (category, backend, leaf)
    # (kernel name, kind) -> the xnntrace log's lines naming it (kernels.csv's ``count``)
    kernel_log_counts: dict[tuple[str, str], int] = field(default_factory=dict)

    @property
    def timed_e2e(self) -> pd.Series:
        return self.e2e_all[self.e2e_all.index >= self.warmup]

    def operator_records(self) -> list[OperatorStats]:
        """The operator table as results.json stores it, with each GEMM operator's kernel hint
        when a kernel trace named the kernels that ran."""
        ops = self.operators
        executed = self.evidence.executed_kernels
        hints = operator_kernel_hints(ops["name"], executed) if executed else {}
        columns = [ops[c].tolist() for c in (
            "name", "instruction_id", "category", "delegated", "backend", "calls_per_run",
            "mean_ms_per_run", "pct_e2e", "bottleneck", "should_delegate", "op_types",
            "module_paths", "below_resolution")]
        return [OperatorStats(name, int(instr), category, bool(delegated), backend,
                              float(calls), float(mean_ms), float(pct), bool(bottleneck),
                              bool(should), list(op_types), list(paths),
                              kernel_hint(name, hints) if hints else "", bool(unresolved))
                for (name, instr, category, delegated, backend, calls, mean_ms, pct, bottleneck,
                     should, op_types, paths, unresolved) in zip(*columns)]

    def record(self) -> ResultAnalysis:
        """What a block of results.json keeps of this analysis (beside its latency): the
        records themselves, shared with this analysis (``kernel_evidence`` is ``evidence``)."""
        return ResultAnalysis(categories_ms=self.categories_ms, overheads_ms=self.overheads_ms,
                              operators=self.operator_records(),
                              kernel_evidence=self.evidence)

    def to_json(self) -> dict:
        return {
            "schema": ANALYSIS_SCHEMA,
            "source": self.source,
            "runs": self.runs,
            "warmup": self.warmup,
            "e2e_ms": [float(v) for v in self.e2e_all],
            "e2e": {k: v for k, v in self.e2e.to_dict().items()},
            **self.record().to_json(),
        }


def analyze(events: pd.DataFrame, *, warmup: int = 0, source: str = "ETDump",
            etrecord: ETRecordInfo | None = None, rules: Sequence[CategoryRule] | None = None,
            kernels: KernelSources = NO_KERNELS) -> Analysis:
    """Analyse a frame from :func:`pytest_sme2.readers.etdump.read_etdump`. ``warmup`` leading runs
    are dropped from every statistic; ``kernels``: what says which kernels ran besides the
    operator names (the device's SME2, an XNNPACK kernel log's text, the executed or sampled
    kernels)."""
    if warmup < 0:
        raise Sme2Error(f"{source}: warm-up must be 0 or more, got {warmup}")
    per_run = e2e_per_run(events, source=source)
    run = events["run"].to_numpy()
    runs = int(np.unique(run[run >= 0]).size)
    timed = per_run[per_run.index >= warmup]
    if timed.empty:
        raise Sme2Error(f"{source}: warm-up {warmup} leaves no timed runs (the file holds "
                        f"{len(per_run)} runs with Method::execute)")
    stats = latency_stats(timed)
    timed_runs = timed.index.tolist()
    annotated = annotate(events, etrecord, rules)
    ops = operator_table(annotated, timed_runs, stats.mean_ms, etrecord)
    codes, uniques = name_codes(annotated["name"])
    names = uniques[np.unique(codes[annotated["leaf"].to_numpy()])]
    xnntrace, kernel_trace, kernel_sample = kernels.xnntrace, kernels.trace, kernels.sample
    if kernel_trace is not None and not isinstance(kernel_trace, KernelTrace):
        kernel_trace = read_kernel_trace_csv(kernel_trace)
    if kernel_sample is not None and not isinstance(kernel_sample, KernelSample):
        kernel_sample = read_kernel_sample_csv(kernel_sample)
    evidence = sme2_verdict(kernels=parse_xnntrace(xnntrace) if xnntrace is not None else None,
                            kleidiai=kleidiai_ops(names), device_sme2=kernels.device_sme2,
                            executed=kernel_trace, sampled=kernel_sample,
                            device_sme=kernels.device_sme)
    return Analysis(source=source, runs=runs, warmup=warmup, e2e_all=per_run, e2e=stats,
                    categories_ms=category_breakdown(ops, stats.mean_ms, rules),
                    operators=ops, overheads_ms=overheads(annotated, timed_runs, stats.mean_ms),
                    evidence=evidence, events=annotated,
                    kernel_log_counts=xnntrace_counts(xnntrace) if xnntrace else {})


def analyze_file(etdump: str | Path, *, warmup: int = 0, etrecord: str | Path | None = None,
                 xnntrace: str | Path | None = None, rules: Sequence[CategoryRule] | None = None,
                 kernels: KernelSources = NO_KERNELS) -> Analysis:
    """:func:`analyze` of an ETDump file, its ETRecord's path and an XNNPACK kernel log's path
    (read into ``kernels.xnntrace``)."""

    text = None
    if xnntrace is not None:
        try:
            text = Path(xnntrace).read_text(errors="replace")
        except OSError as e:
            raise Sme2Error(f"{xnntrace}: cannot read the kernel trace ({e.strerror})") from None
    if text is not None:
        kernels = replace(kernels, xnntrace=text)
    return analyze(read_etdump(etdump), warmup=warmup, source=str(etdump),
                   etrecord=read_etrecord(etrecord) if etrecord else None, rules=rules,
                   kernels=kernels)
