"""The public API: every name the README and the docs use, importable from one place.

    from pytest_sme2.api import BenchSession, Sme2Config, benchmark, write_reports

Users import from here (and from :mod:`pytest_sme2.hookspec` for hooks, and
:mod:`pytest_sme2_models` for the model zoo); where a name lives inside the package may change
between versions, this module's names do not. Importing it loads the measuring stack (numpy,
pandas): the pytest plugin does not import it."""

from __future__ import annotations

from pytest_sme2.analysis.categories import CategoryRule
from pytest_sme2.hookspec import category_rules
from pytest_sme2.analysis.phases import analyze_generation, analyze_generation_file
from pytest_sme2.analysis.kernel_sample import read_kernel_sample_csv
from pytest_sme2.analysis.kernel_sources import KernelSources
from pytest_sme2.analysis.kernel_trace import read_kernel_trace_csv
from pytest_sme2.analysis.latency import e2e_per_run
from pytest_sme2.analysis.runner_summary import RunnerSummary, parse_summary
from pytest_sme2.analysis.summary import Analysis, analyze, analyze_file
from pytest_sme2.device_programs import parse_probe
from pytest_sme2.device_programs.build import build_target_helpers
from pytest_sme2.devices import Device, open_device
from pytest_sme2.devices.host import HostDevice
from pytest_sme2.devices.qemu import QemuDevice
from pytest_sme2.emulation.tools import find_cross_compiler, find_qemu
from pytest_sme2.emulation.wheel import target_executorch_dir
from pytest_sme2.errors import Sme2Error
from pytest_sme2.gate.policy import DEFAULT_THRESHOLD_PCT, GatePolicy
from pytest_sme2.gate.junit import junit_properties
from pytest_sme2.gate.ab import Pairs, judge_ab, judge_pairs
from pytest_sme2.gate.decide import PairBudget, decide, until_told
from pytest_sme2.gate.levels import (CANNOT_TELL, IMPROVEMENT, NO_CHANGE, REGRESSION,
                                     judge_levels)
from pytest_sme2.gate.rule import GateReport, evaluate, run_with_confirmation
from pytest_sme2.history.importer import import_files
from pytest_sme2.history.store import open_store
from pytest_sme2.instructions.count import count_generation, count_instructions, format_count
from pytest_sme2.measure.artifacts.trace import write_trace
from pytest_sme2.measure.benchmark import (BenchmarkLoop, Benchmarked, Recorder, benchmark,
                                           compare)
from pytest_sme2.measure.block import BenchmarkRun, run_benchmark
from pytest_sme2.measure.comparison import Comparison, check_outputs
from pytest_sme2.measure.config import Sme2Config
from pytest_sme2.measure.matrix import Case
from pytest_sme2.measure.pairs import Interleaving, PairPlan, Paired, run_comparison, take_pairs
from pytest_sme2.measure.session import BenchSession
from pytest_sme2.measure.settings import BenchSettings
from pytest_sme2.programs.export import export_model
from pytest_sme2.programs.exported import ExportedModel
from pytest_sme2.programs.registry import ModelDef, get_model, register_model, registered_models
from pytest_sme2.readers.etdump import read_etdump
from pytest_sme2.readers.etrecord import read_etrecord
from pytest_sme2.readers.tensorfile import read_tensors, write_tensors
from pytest_sme2.report.outputs import write_reports
from pytest_sme2.results import (BlockResult, ComparisonRecord, DeviceFacts, InstructionCount,
                                 Judgement, KernelEvidence, LoggedKernel, OperatorStats,
                                 ProcessStartup, ResultsDoc, RunnerInfo, SampledKernel, SessionInfo,
                                 Startup,
                                 TracedKernel, load_results, pool)
from pytest_sme2.results.generation import Generation, GenerationResult, PhaseStats
from pytest_sme2.results.timing import LatencyStats
from pytest_sme2.results.records import CooldownRecord
from pytest_sme2.runners import Runner, runner_from_spec
from pytest_sme2.runners.base import RunRequest
from pytest_sme2.runners.native import build_native_runner, native_runner
from pytest_sme2.runners.python import PythonRunner
from pytest_sme2.runners.spec import masked_pair, parse_runner_spec
from pytest_sme2.stats import Interval, hodges_lehmann, paired_ratio, t_quantile

__all__ = [
    # a benchmark without pytest: the session, the loop, the reports
    "BenchSession", "Sme2Config", "BenchSettings", "Case", "benchmark", "compare",
    "BenchmarkLoop", "Benchmarked", "Recorder", "write_reports",
    # one block, one comparison
    "BenchmarkRun", "Interleaving", "PairPlan", "Paired", "run_benchmark", "run_comparison",
    "take_pairs",
    # what the fixtures return and results.json holds
    "BlockResult", "Comparison", "ComparisonRecord", "DeviceFacts", "RunnerInfo", "Judgement",
    "InstructionCount", "OperatorStats", "KernelEvidence", "LoggedKernel", "TracedKernel",
    "SampledKernel", "ProcessStartup", "Startup", "LatencyStats", "CooldownRecord",
    "ResultsDoc", "SessionInfo", "load_results", "pool",
    "Generation", "GenerationResult", "PhaseStats",
    # devices and runners; one run of a program
    "Device", "open_device", "HostDevice", "QemuDevice", "Runner", "runner_from_spec",
    "parse_runner_spec", "masked_pair", "native_runner", "build_native_runner", "PythonRunner",
    "RunRequest",
    # analysing a run's files (an ETDump and the runner's stdout) as the fixtures do
    "analyze", "analyze_file", "Analysis", "analyze_generation", "analyze_generation_file",
    "e2e_per_run", "parse_summary", "RunnerSummary", "KernelSources", "check_outputs",
    # models and programs
    "ModelDef", "register_model", "get_model", "registered_models", "export_model",
    "ExportedModel",
    # the gate
    "GatePolicy", "GateReport", "evaluate", "run_with_confirmation", "junit_properties",
    "judge_levels", "REGRESSION", "DEFAULT_THRESHOLD_PCT", "paired_ratio", "Interval",
    "hodges_lehmann", "t_quantile",
    "IMPROVEMENT", "NO_CHANGE", "CANNOT_TELL", "decide", "until_told", "PairBudget", "Pairs",
    "judge_ab", "judge_pairs",
    # the history store
    "open_store", "import_files",
    # operator categories (plugins' rules)
    "CategoryRule", "category_rules",
    # files
    "read_etdump", "read_etrecord", "read_kernel_trace_csv", "read_kernel_sample_csv",
    "write_trace", "read_tensors", "write_tensors",
    # instruction counts
    "count_instructions", "count_generation", "format_count",
    # emulated SME2 (QEMU, cross builds)
    "find_qemu", "find_cross_compiler", "target_executorch_dir", "build_target_helpers",
    "parse_probe",
    "Sme2Error",
]
