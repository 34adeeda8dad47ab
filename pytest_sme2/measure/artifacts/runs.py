"""The record of what a session's ETDump holds (:mod:`pytest_sme2.readers.etdump_runs`), made
from the block's analysis: written beside the ETDump, so that ``pytest-sme2 analyze`` and
``compare`` drop its warm-up runs and split an LLM's generations into phases as the session
did."""

from __future__ import annotations

from pytest_sme2.analysis.runner_summary import GenerationSummary
from pytest_sme2.analysis.summary import Analysis
from pytest_sme2.readers.etdump_runs import EtdumpRuns

WRITTEN_BY = "a pytest-sme2 session"


def etdump_record(analysis: Analysis, generation: GenerationSummary | None,
                  traced_apart: bool) -> EtdumpRuns:
    """``analysis``: the block's (its traced runs'); ``generation``: the loop as the traced
    pass ran it (None: a forward pass); ``traced_apart``: the runner timed untraced and traced
    ``--sme2-trace-runs`` runs after, else it traced its ``--runs``."""
    option = "--sme2-trace-runs" if traced_apart else "--runs"
    if generation is not None:
        return EtdumpRuns(generation.warmup, generation.generations - generation.warmup, option,
                          WRITTEN_BY, generation.to_json())
    return EtdumpRuns(analysis.warmup, analysis.runs - analysis.warmup, option, WRITTEN_BY)
