"""An ETDump analysed on its own (``pytest-sme2 analyze``, ``compare``) as the session that
wrote it analysed it: the record beside it (:mod:`pytest_sme2.readers.etdump_runs`) says how many
leading runs are warm-up, and, for an LLM, the generation loop, so that prefill and decode are
analysed apart (the phases, then the ordinary analysis of the decode steps) instead of one median
over both."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from pytest_sme2.analysis.phases import analyze_generation
from pytest_sme2.analysis.kernel_sources import NO_KERNELS, KernelSources
from pytest_sme2.analysis.runner_summary import GenerationSummary
from pytest_sme2.analysis.summary import Analysis, analyze, analyze_file
from pytest_sme2.measure.generation import decode_steps
from pytest_sme2.readers.etdump import read_etdump
from pytest_sme2.readers.etdump_runs import EtdumpRuns, read_etdump_runs, runs_path
from pytest_sme2.readers.etrecord import read_etrecord
from pytest_sme2.results.generation import GenerationResult

NO_RECORD = ("no warm-up run dropped: no record beside the ETDump of how it was written "
             "({name}); pass --warmup N for a runner's warm-up runs")


@dataclass(frozen=True)
class RecordedAnalysis:
    """``analysis``: the ETDump's (an LLM's: its measured decode steps'); ``generation``: an
    LLM's phases; ``warmup_said``: where the warm-up count came from; ``record``: the record
    beside the ETDump (None: none)."""

    analysis: Analysis
    warmup_said: str
    generation: GenerationResult | None = None
    record: EtdumpRuns | None = None


def analyze_recorded(etdump: str | Path, warmup: int | None = None, *,
                     etrecord: str | Path | None = None, xnntrace: str | Path | None = None,
                     kernels: KernelSources = NO_KERNELS) -> RecordedAnalysis:
    """``warmup``: leading runs (an LLM's: generations) to drop as the user said; None: what
    the record beside ``etdump`` says, 0 without one."""
    record = read_etdump_runs(etdump)
    name = runs_path(etdump).name
    if record is not None and record.generation is not None:
        return _generation(etdump, record, warmup, etrecord, kernels)
    if warmup is not None:
        said = f"{warmup} warm-up run(s) dropped, as --warmup says"
    elif record is None:
        warmup, said = 0, NO_RECORD.format(name=name)
    else:
        warmup, said = record.warmup, record.said(Path(name))
    return RecordedAnalysis(analyze_file(etdump, warmup=warmup, etrecord=etrecord,
                                         xnntrace=xnntrace, kernels=kernels), said,
                            record=record)


def _generation(etdump: str | Path, record: EtdumpRuns, warmup: int | None,
                etrecord: str | Path | None, kernels: KernelSources) -> RecordedAnalysis:
    loop = GenerationSummary.from_json(record.generation)
    said = record.said(Path(runs_path(etdump).name))
    if warmup is not None:
        loop, said = (replace(loop, warmup=warmup),
                      f"{warmup} warm-up generation(s) dropped, as --warmup says")
    source = str(etdump)
    events = read_etdump(etdump)
    generation = analyze_generation(events, loop, source=source)
    analysis = analyze(decode_steps(events, loop, source), source=f"{source} (decode steps)",
                       etrecord=read_etrecord(etrecord) if etrecord else None, kernels=kernels)
    return RecordedAnalysis(analysis, said, generation, record)
