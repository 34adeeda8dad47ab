"""The plugin's configuration: one frozen :class:`Sme2Config`, built and validated by one pure
function, :func:`config_from_options`, from the command-line and ini values and the option
table (:data:`pytest_sme2.measure.options.OPTIONS`: each row names its parser and the field it
sets) — testable without pytest. The plugin only registers the table with pytest and hands the
values over; ``pytest-sme2 gate`` builds its :class:`GatePolicy` with the same parsers.

Nothing here imports numpy, pandas or torch: every pytest run of a project with pytest-sme2
installed builds this.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Collection, Mapping, NamedTuple

from pytest_sme2.errors import Sme2Error
from pytest_sme2.programs.spec import matrix_models
from pytest_sme2.gate.policy import GatePolicy
from pytest_sme2.measure.matrix import DEFAULT_DTYPES, DEFAULT_MODELS, DEFAULT_THREADS
from pytest_sme2.measure.options import (DEFAULT_MIN_SPEEDUP, EMULATED_DEFAULTS, FLAGS, OPTIONS,
                                         RUNNERS_DEST, RUNNERS_INI)
from pytest_sme2.devices.kinds import HOST
from pytest_sme2.devices.registry import DeviceSpec
from pytest_sme2.runners.spec import runner_specs
from pytest_sme2.measure.settings import MIN_BLOCKS, BenchSettings
from pytest_sme2.measure.option_values import (MEASURES, Given, cooldown, listed, min_speedup)


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
    # The generation matrix's threads: --sme2-threads where the user gave it (command line, or
    # an ini value other than the default), else 1 (an LLM session stays short by default).
    llm_threads: tuple[int, ...] = (1,)
    threads_given: bool = False
    blocks: int = MIN_BLOCKS                  # per side, in a comparison
    min_speedup: Mapping[str, float] = field(
        default_factory=lambda: min_speedup(Given(DEFAULT_MIN_SPEEDUP)))
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


def config_from_options(values: Mapping[str, Any], ini: Mapping[str, Any],
                        base_dirs: BaseDirs, runner_kinds: Collection[str] = (),
                        category_rules: tuple[Any, ...] | None = None) -> Sme2Config:
    """The session's configuration from ``values`` (command line, by option dest: a string,
    or None when not given; booleans for :data:`FLAGS`; a list for ``runners``) and ``ini``
    (by ini name; a missing name takes the option's default); ``runner_kinds``: the runner
    kinds plugins make, accepted in runner specs. Each option's row in :data:`OPTIONS` names
    its parser and the field its value sets; they run in the table's order (the first bad
    value is the one reported), then what combines two options. A bad value is an Sme2Error
    naming the option."""
    devices = parse_devices(values.get("device"), ini.get(OPTIONS["device"].ini,
                                                          OPTIONS["device"].default))
    emulated = all(is_emulated(d) for d in devices)

    def given(dest: str) -> Given:
        """The option's text (the command line beats the ini; on emulated devices an option
        left at its default takes EMULATED_DEFAULTS'), with where a relative path starts."""
        option, cli = OPTIONS[dest], values.get(dest)
        text = str(cli) if cli is not None else str(ini.get(option.ini, option.default))
        if cli is None and emulated and text == option.default:
            text = EMULATED_DEFAULTS.get(dest, text)
        return Given(text, "--" + dest.replace("_", "-"),
                     base_dirs.rootdir if cli is None else base_dirs.invocation, category_rules)

    parts: dict[str, dict[str, Any]] = {"": {}, "settings": {}, "gate": {}}
    for dest, option in OPTIONS.items():
        if option.to:
            part, _, name = option.to.rpartition(".")
            parts[part][name] = option.parser(given(dest))
    for dest, flag in FLAGS.items():
        part, _, name = flag.to.rpartition(".")
        parts[part][name] = bool(values.get(dest))
    models, ptes = given("sme2_models"), given("sme2_pte")
    parts[""]["models"] = matrix_models(list(listed(models)), list(listed(ptes)), models.base,
                                        ptes.base)
    parts["settings"]["cooldown"] = cooldown(given("sme2_cooldown"),
                                             given("sme2_cooldown_timeout"))
    runners = tuple(str(x) for x in (*(ini.get(RUNNERS_INI) or ()),
                                     *(values.get(RUNNERS_DEST) or ())))
    # A bad spec, or a binary that is not there, stops here, not at first use.
    runner_specs(list(runners), runner_kinds, base_dirs.invocation)
    threads_given = (values.get("sme2_threads") is not None
                     or given("sme2_threads").text != OPTIONS["sme2_threads"].default)
    parts[""]["threads_given"] = threads_given
    parts[""]["llm_threads"] = parts[""]["threads"] if threads_given else (1,)
    gate = GatePolicy(**parts["gate"])
    _check_base_runner(gate, runners, runner_kinds)
    return Sme2Config(settings=BenchSettings(**parts["settings"]), gate=gate, devices=devices,
                      runners=runners, runner_kinds=tuple(runner_kinds),
                      category_rules=category_rules, rootdir=base_dirs.rootdir, **parts[""])


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
