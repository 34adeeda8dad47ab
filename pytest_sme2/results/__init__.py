"""The one results schema: typed records for what a benchmark measured and what a comparison
found, the one pooling of a benchmark's blocks, and ``results.json`` (versioned) with its one
loader.

``results.json`` (``"schema": "pytest-sme2/results/1"``) holds ``session``, ``benchmarks``
(:class:`BlockResult`, one per measured block)
and ``comparisons`` (:class:`ComparisonRecord`). Every record writes the keys it reads, in
the same order, so a document this version wrote loads and writes back byte for byte; older
documents load with defaults for what they lack. Keys a record does not know are kept in its
``extra``.

Modules: :mod:`.records` (a block's analysis and context), :mod:`.timing` (its latency and
how it was timed), :mod:`.machine` (the machine's speed), :mod:`.startup` (load and memory),
:mod:`.device` (where a block ran: the device and the runner), :mod:`.judgement` (the gate's
verdict), :mod:`.instructions` (instruction counts), :mod:`.under_test` (what was measured),
:mod:`.generation` (an LLM's), :mod:`.block` (one block), :mod:`.pooling` (a benchmark's
blocks together), :mod:`.comparison`, :mod:`.document` (the file and its session, its loader
and writer); :mod:`.codec` writes and reads the records by one rule.
"""

from pytest_sme2._util.fsutil import atomic_write_text
from pytest_sme2.results.block import BlockResult, PrecisionOutcome, device_label
from pytest_sme2.results.comparison import ComparisonRecord, OutputCheck
from pytest_sme2.results.device import DeviceFacts, RunnerInfo
from pytest_sme2.results.generation import (BLOCK_PHASES, Generation, GenerationResult,
                                            PhaseStats)
from pytest_sme2.results.document import (RESULTS_SCHEMA, ResultsDoc, ResultsWriter, SessionInfo,
                                          load_results, results_document, write_results)
from pytest_sme2.results.instructions import InstructionCount
from pytest_sme2.results.judgement import Judgement
from pytest_sme2.results.pooling import (GenerationFigures, PhaseFigures, PooledLatency,
                                         block_phases, mean_per_block, pool, pool_categories,
                                         pool_evidence, pool_generation, pool_operators,
                                         pool_probe, pool_startup, probe_levels)
from pytest_sme2.results.records import (KernelEvidence, LoggedKernel, OperatorStats,
                                         ResultAnalysis, RunContext, SampledKernel,
                                         TracedKernel)
from pytest_sme2.results.startup import ProcessStartup, Startup
from pytest_sme2.results.timing import Timing
from pytest_sme2.results.under_test import UnderTest

__all__ = ["BLOCK_PHASES", "RESULTS_SCHEMA", "BlockResult", "ComparisonRecord", "DeviceFacts",
           "Generation", "GenerationFigures", "GenerationResult", "InstructionCount", "Judgement",
           "KernelEvidence", "LoggedKernel", "OperatorStats", "OutputCheck", "PhaseFigures",
           "PhaseStats", "PooledLatency", "PrecisionOutcome", "ProcessStartup", "ResultAnalysis",
           "ResultsDoc", "ResultsWriter", "RunContext", "RunnerInfo", "SampledKernel",
           "SessionInfo",
           "Startup", "Timing", "TracedKernel", "UnderTest", "atomic_write_text", "block_phases",
           "device_label",
           "load_results", "mean_per_block", "pool", "pool_categories", "pool_evidence",
           "pool_generation", "pool_operators", "pool_probe", "pool_startup", "probe_levels",
           "results_document", "write_results"]
