"""The plugin's configuration: one frozen :class:`Sme2Config`, built and validated by one pure
function, :func:`config_from_options`, from the command-line and ini values — testable without
pytest. The option table (:data:`OPTIONS`, every option with its ini twin and default) lives
here too; the plugin only registers it with pytest and hands the values over.

Nothing here imports numpy, pandas or torch: every pytest run of a project with pytest-sme2
installed builds this.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Collection, Mapping, NamedTuple

from pytest_sme2.errors import Sme2Error
from pytest_sme2.programs.export import DTYPES
from pytest_sme2.programs.llm.schemes import parse_schemes
from pytest_sme2.programs.llm.tokenizer import check_tokenizer_path
from pytest_sme2.programs.spec import matrix_models
from pytest_sme2.gate.policy import GateOptions, GatePolicy
from pytest_sme2.measure.matrix import (DEFAULT_DTYPES, DEFAULT_MODELS, DEFAULT_THREADS,
                                        parse_depths, parse_threads)
from pytest_sme2.measure.options import (DEFAULT_MIN_SPEEDUP, EMULATED_DEFAULTS,
                                         LLAMA_BENCH_FORMATS, OPTIONS, RUNNERS_DEST,
                                         RUNNERS_INI)
from pytest_sme2.devices.kinds import HOST
from pytest_sme2.devices.registry import DeviceSpec
from pytest_sme2.runners.spec import runner_specs
from pytest_sme2._util.text import split_list
from pytest_sme2.measure.settings import MIN_BLOCKS, BenchSettings
from pytest_sme2.measure.option_values import (MEASURES, parse_cooldown, parse_export_jobs,
                                               parse_measure, parse_min_speedup,
                                               parse_progress, parse_sampling)


@dataclass(frozen=True)
class Sme2Config:
    """Everything a pytest-sme2 session was asked for; defaults are the options' defaults
    (``baseline_dir`` None: no baselines)."""

    settings: BenchSettings = BenchSettings()
    devices: tuple[str, ...] = (HOST.name,)      # --device specs as given (android:* unexpanded)
    runners: tuple[str, ...] = ()             # runner specs: ini lines, then --runner
    runner_kinds: tuple[str, ...] = ()        # kinds plugins make (pytest_sme2_runner_kinds)
    category_rules: tuple[Any, ...] | None = None   # None: the built-in table (hookspec.py)
    taskset: str | None = "auto"              # None: no pinning
    models: tuple[str, ...] = DEFAULT_MODELS
    llm_models: tuple[str, ...] = ("auto",)   # the generation matrix (sme2_llm_case)
    llm_schemes: tuple[str, ...] = ("8da8w",)
    context_depths: tuple[int, ...] = (0,)    # --sme2-context-depth: the LLMs' depth axis
    dtypes: tuple[str, ...] = DEFAULT_DTYPES
    threads: tuple[int, ...] = DEFAULT_THREADS
    blocks: int = MIN_BLOCKS                  # per side, in a comparison
    min_speedup: Mapping[str, float] = field(
        default_factory=lambda: parse_min_speedup(DEFAULT_MIN_SPEEDUP))
    baseline_dir: Path | None = None
    save_baseline: bool = False
    strict_outputs: bool = False              # --sme2-strict-outputs: NaN/inf outputs fail
    gate: GatePolicy = GatePolicy()
    measure: str = MEASURES[0]                # "time", or "instructions" (counted too)
    benchmark_json: Path | None = None        # --sme2-benchmark-json: pytest-benchmark format
    llama_bench: Path | None = None           # --sme2-llama-bench: llama-bench rows
    rootdir: Path | None = None               # the user's repository (llama-bench's commit)
    progress: float | str | None = "auto"     # --sme2-progress: seconds, "auto", None (off)
    history: str | None = None                # --sme2-history: store URL or SQLite path
    history_baseline: str | None = None       # --sme2-history-baseline BRANCH[:N]
    export_jobs: int | None = None            # --sme2-export-jobs: None auto, 1 no ahead

    @property
    def emulated(self) -> bool:
        """Every device is an emulated CPU (mixed with real ones, real ones set the runs)."""
        return all(is_emulated(d) for d in self.devices)

    def document(self, devices: tuple[str, ...] | None = None) -> dict[str, Any]:
        """The configuration as results.json's ``session.config`` records it; ``devices``: the
        devices the session resolved the specs to (``android:*`` expanded)."""
        s = self.settings
        devices = devices or self.devices
        one = {"device": devices[0]} if len(devices) == 1 else {}
        doc = {**one, "devices": list(devices), "runs": s.runs, "warmup": s.warmup,
               "blocks": self.blocks, "taskset": self.taskset,
               "min_speedup": dict(self.min_speedup)}
        if s.cooldown is not None:
            doc["cooldown"] = {"target_c": s.cooldown.target_c,
                               "timeout_s": s.cooldown.timeout_s}
        return doc


class BaseDirs(NamedTuple):
    """Where relative paths start: the command line's from the invocation folder, the ini
    file's from the rootdir."""

    invocation: Path
    rootdir: Path


def is_emulated(device: str) -> bool:
    return DeviceSpec.parse(device).emulated


@dataclass(frozen=True)
class _Reader:
    """The option values as :func:`config_from_options` reads them, so that its pieces read
    them alike: the command line beats the ini, a path is relative to where it was given, and
    on emulated devices an option left at its default takes :data:`EMULATED_DEFAULTS`."""

    values: Mapping[str, Any]
    ini: Mapping[str, Any]
    base_dirs: BaseDirs
    emulated: bool

    def text(self, dest: str) -> tuple[str, bool]:
        """The option's text, and whether it came from the command line."""
        value = self.values.get(dest)
        if value is not None:
            return str(value), True
        return str(self.ini.get(OPTIONS[dest].ini, OPTIONS[dest].default)), False

    def whole(self, dest: str, least: int, what: str) -> int:
        """A whole number of at least ``least`` (``what`` says so in the error)."""
        value, from_cli = self.text(dest)
        if dest in EMULATED_DEFAULTS and self.emulated and not from_cli and \
                value == OPTIONS[dest].default:
            value = EMULATED_DEFAULTS[dest]
        try:
            number = int(value)
        except ValueError:
            raise Sme2Error(f"{_flag(dest)} must be a whole number, got {value!r}") from None
        if number < least:
            raise Sme2Error(f"{_flag(dest)} must be {what}, got {number}")
        return number

    def path(self, dest: str) -> Path | None:
        """An absolute path (None when empty): a relative one from where it was given."""
        value, from_cli = self.text(dest)
        if not value:
            return None
        return ((self.base_dirs.invocation if from_cli else self.base_dirs.rootdir)
                / value).resolve()


def config_from_options(values: Mapping[str, Any], ini: Mapping[str, Any],
                        base_dirs: BaseDirs, runner_kinds: Collection[str] = (),
                        category_rules: tuple[Any, ...] | None = None) -> Sme2Config:
    """The session's configuration from ``values`` (command line, by option dest: a string,
    or None when not given; booleans for :data:`FLAGS`; a list for ``runners``) and ``ini``
    (by ini name; a missing name takes the option's default); ``runner_kinds``: the runner
    kinds plugins make, accepted in runner specs. Every check of every option is here or in
    the pieces it calls, in this order (the first bad value is the one reported); a bad value
    is an Sme2Error naming the option."""
    devices = parse_devices(values.get("device"), ini.get(OPTIONS["device"].ini,
                                                          OPTIONS["device"].default))
    r = _Reader(values, ini, base_dirs, all(is_emulated(d) for d in devices))
    settings = _bench_settings(r)
    dtypes = tuple(split_list(r.text("sme2_dtypes")[0]))
    for d in dtypes:
        if d not in DTYPES:
            raise Sme2Error(f"--sme2-dtypes: unknown dtype {d!r}; choose from {', '.join(DTYPES)}")
    taskset = r.text("sme2_taskset")[0]
    runners = tuple(str(x) for x in (*(ini.get(RUNNERS_INI) or ()),
                                     *(values.get(RUNNERS_DEST) or ())))
    runner_specs(list(runners), runner_kinds)   # a bad spec stops here, not at first use
    measure = parse_measure(r.text("sme2_measure")[0])
    benchmark_json = r.path("sme2_benchmark_json")
    if benchmark_json is not None and benchmark_json.is_dir():
        raise Sme2Error(f"--sme2-benchmark-json: {benchmark_json} is a folder; give a file "
                        "path")
    llama_bench = _llama_bench(r.path("sme2_llama_bench"))
    gate = _gate(r, category_rules)
    _check_base_runner(gate, runners, runner_kinds)
    history = r.text("sme2_history")[0]
    return Sme2Config(
        settings=settings, devices=devices, runners=runners, runner_kinds=tuple(runner_kinds),
        category_rules=category_rules,
        taskset=None if taskset == "none" else taskset,
        models=_models(r.text("sme2_models"), r.text("sme2_pte"), base_dirs), dtypes=dtypes,
        llm_models=tuple(split_list(r.text("sme2_llm_models")[0])),
        llm_schemes=_llm_schemes(r.text("sme2_llm_schemes")[0]),
        context_depths=parse_depths(r.text("sme2_context_depth")[0]),
        threads=parse_threads(r.text("sme2_threads")[0]),
        blocks=r.whole("sme2_blocks", 2, "2 or more"),
        min_speedup=parse_min_speedup(r.text("sme2_min_speedup")[0]),
        baseline_dir=r.path("baseline_dir"), save_baseline=bool(values.get("save_baseline")),
        strict_outputs=bool(values.get("sme2_strict_outputs")),
        gate=gate,
        measure=measure, benchmark_json=benchmark_json, llama_bench=llama_bench,
        rootdir=base_dirs.rootdir,
        progress=parse_progress(r.text("sme2_progress")[0]),
        # A URL as given; a bare SQLite path relative to where it was given (as other paths).
        history=(history if "://" in history
                 else str(r.path("sme2_history")) if history else None),
        history_baseline=r.text("sme2_history_baseline")[0] or None,
        export_jobs=parse_export_jobs(r.text("sme2_export_jobs")[0]))


def _bench_settings(r: _Reader) -> BenchSettings:
    """How each benchmark is measured: runs, warm-up, folders, timeout, loads, cool-down,
    sampling and the LLM generation's size."""
    timeout = r.whole("sme2_timeout", 1, "a positive number of seconds")
    return BenchSettings(runs=r.whole("runs", 1, "a positive number of timed runs"),
                         warmup=r.whole("warmup", 0, "0 or more"),
                         report_dir=r.path("report_dir") or Path("sme2-report"),
                         cache_dir=r.path("sme2_cache_dir"),
                         reexport=bool(r.values.get("sme2_reexport")),
                         timeout_s=float(timeout),
                         loads=r.whole("sme2_loads", 1, "1 or more"),
                         cooldown=parse_cooldown(r.text("sme2_cooldown")[0],
                                                 r.text("sme2_cooldown_timeout")[0]),
                         sample=parse_sampling(r.text("sme2_sample")[0]),
                         prompt_tokens=r.whole("sme2_prompt_tokens", 1, "1 or more"),
                         new_tokens=r.whole("sme2_new_tokens", 1, "1 or more"),
                         tokenizer=_tokenizer(r.path("sme2_tokenizer")),
                         trace_runs=r.whole("sme2_trace_runs", 1, "1 or more: the operator "
                                            "breakdown comes from traced runs"))


def _tokenizer(path: Path | None) -> Path | None:
    return check_tokenizer_path(path, "--sme2-tokenizer") if path is not None else None


def _gate(r: _Reader, category_rules: tuple[Any, ...] | None) -> GatePolicy:
    """The gate's policy (GateOptions checks its own options' values)."""
    return GateOptions(r.text("fail_on_regression")[0],
                       allow_foreign=bool(r.values.get("allow_foreign_baseline")),
                       categories=r.text("sme2_gate_categories")[0],
                       confirm_blocks=r.whole("sme2_confirm_blocks", 0, "0 or more"),
                       load_threshold=r.text("sme2_load_threshold")[0],
                       memory_threshold=r.text("sme2_memory_threshold")[0],
                       mode=r.text("sme2_gate_mode")[0],
                       precision=r.text("sme2_precision")[0],
                       precision_budget=r.text("sme2_precision_budget")[0],
                       base_runner=r.text("sme2_ab_base_runner")[0],
                       max_pairs=r.text("sme2_max_pairs")[0],
                       on_unresolved=r.text("sme2_on_unresolved")[0]).policy(category_rules)


def _llm_schemes(text: str) -> tuple[str, ...]:
    try:
        return parse_schemes(text)
    except Sme2Error as e:
        raise Sme2Error(f"--sme2-llm-schemes: {e}") from None


def _check_base_runner(gate: GatePolicy, runners: tuple[str, ...],
                       runner_kinds: Collection[str]) -> None:
    """--sme2-ab-base-runner names a configured runner, and only means something in ab mode."""
    if gate.base_runner is None:
        return
    if gate.mode != "ab":
        raise Sme2Error("--sme2-ab-base-runner: only used with --sme2-gate-mode ab")
    names = set(runner_specs(list(runners), runner_kinds))
    if gate.base_runner not in names:
        raise Sme2Error(f"--sme2-ab-base-runner: no runner named {gate.base_runner!r}; "
                        f"configured: {', '.join(sorted(names)) or 'none'} (add one with "
                        "--runner NAME=PATH)")


def parse_devices(cli: str | list[str] | None, ini: str | list[str]) -> tuple[str, ...]:
    """``--device`` (given once or several times) beats the ini value (one device per line:
    a QEMU CPU spec holds commas, ``qemu:max,sme=off``); duplicates count once, in the order
    given."""
    given = cli if cli else ini
    items = given.splitlines() if isinstance(given, str) else list(given)
    devices = tuple(dict.fromkeys(d.strip() for d in map(str, items) if d.strip()))
    if not devices:
        raise Sme2Error("--device: no device given; use e.g. --device host")
    return devices


def _models(models: tuple[str, bool], pte_globs: tuple[str, bool],
            base_dirs: BaseDirs) -> tuple[str, ...]:
    """Models of the matrix, .pte paths made absolute from where their option came from."""
    def base(from_cli: bool) -> Path:
        return base_dirs.invocation if from_cli else base_dirs.rootdir

    return matrix_models(split_list(models[0]), split_list(pte_globs[0]), base(models[1]),
                         base(pte_globs[1]))


def _llama_bench(path: Path | None) -> Path | None:
    """--sme2-llama-bench: a file whose extension names llama-bench's format."""
    if path is None:
        return None
    if path.is_dir() or path.suffix.lower() not in LLAMA_BENCH_FORMATS:
        raise Sme2Error(f"--sme2-llama-bench: {path}: give a file ending in "
                        f"{', '.join(LLAMA_BENCH_FORMATS)} (the extension names the format)")
    return path


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")
