"""What the regression gate (:mod:`pytest_sme2.gate.rule`) is asked to do: :class:`GatePolicy`,
its defaults, and the one place that builds it from option values (:class:`GateOptions`): for
pytest's options (:func:`pytest_sme2.measure.config.config_from_options`) and ``pytest-sme2
gate`` alike, so neither repeats the other's defaults or checks.

Kept apart from ``gate.py`` because it is light: every pytest run builds a policy, and the gate
itself imports numpy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple

from pytest_sme2.analysis.categories import OTHER, named_categories
from pytest_sme2.errors import Sme2Error
from pytest_sme2._util.text import split_list

# Blocks measured again when the baseline gate suspects a regression (0: judge the first alone).
# On a 2-core VM one 2-thread process in ~15 starts (or stays) in a state where its threads do
# not run in parallel, ~1.6x slower for tens of ms to seconds: the median of three blocks
# outvotes that process; a real regression is in every block.
DEFAULT_CONFIRM_BLOCKS = 2
DEFAULT_THRESHOLD_PCT = 10.0      # the gate's threshold when --fail-on-regression is not given
# Load time drifts like latency; peak memory barely moves between processes.
# bisect --measure instructions: a count is deterministic, so a small move is a change.
DEFAULT_INSTRUCTIONS_PCT = 0.5
DEFAULT_LOAD_THRESHOLD_PCT = 25.0
DEFAULT_MEMORY_THRESHOLD_PCT = 10.0
DEFAULT_PRECISION_BUDGET_S = 60.0
# How many pairs a "cannot tell" may grow to (pytest_sme2.gate.decide, where it was chosen).
DEFAULT_MAX_PAIRS = 40
# What a "cannot tell" does to the exit status: fail the test, warn in the summary, or pass.
ON_UNRESOLVED = ("fail", "warn", "pass")
DEFAULT_ON_UNRESOLVED = "warn"


@dataclass(frozen=True)
class GatePolicy:
    """What the regression gate is asked to do (``pytest_sme2.gate.rule``)."""

    fail_on_regression: float | None = None   # percent; None: judge and report only
    allow_foreign: bool = False               # compare with a baseline from another device
    categories: tuple[str, ...] = ()          # judged besides end to end; ("all",): every one
    confirm_blocks: int = DEFAULT_CONFIRM_BLOCKS  # blocks a suspected regression is judged on, + 1
    # Load time and peak memory: judged against the baseline whenever it has them; these
    # thresholds apply when the policy is enforced. None ("off"): judged, never failed.
    load_threshold_pct: float | None = DEFAULT_LOAD_THRESHOLD_PCT
    memory_threshold_pct: float | None = DEFAULT_MEMORY_THRESHOLD_PCT
    # "stored": judge against the stored baseline; "ab": re-measure the base program in this
    # session, interleaved (pytest_sme2.gate.ab).
    mode: str = "stored"
    precision_pct: float | None = None        # --sme2-precision: None, the fixed design
    precision_budget_s: float = DEFAULT_PRECISION_BUDGET_S   # per benchmark (or comparison)
    # --sme2-ab-base-runner: the runner the A/B gate measures the base with (a runtime
    # change); None: the benchmark's own runner.
    base_runner: str | None = None
    max_pairs: int = DEFAULT_MAX_PAIRS        # --sme2-max-pairs: a "cannot tell" grows to this
    on_unresolved: str = DEFAULT_ON_UNRESOLVED   # --sme2-on-unresolved: fail, warn or pass

    @property
    def enforced(self) -> bool:
        """A regression fails the test (and a foreign baseline too: never a silent pass)."""
        return self.fail_on_regression is not None

    @property
    def threshold_pct(self) -> float:
        return DEFAULT_THRESHOLD_PCT if self.fail_on_regression is None else \
            self.fail_on_regression


class GateFlags(NamedTuple):
    """The option names a bad value is reported under (pytest's, or the command's)."""

    categories: str = "--sme2-gate-categories"
    load_threshold: str = "--sme2-load-threshold"
    memory_threshold: str = "--sme2-memory-threshold"


PYTEST_FLAGS = GateFlags()
CLI_FLAGS = GateFlags("--categories", "--load-threshold", "--memory-threshold")


@dataclass(frozen=True)
class GateOptions:
    """The gate's options as given (texts, as on the command line or in an ini file), before
    they are checked: :meth:`policy` checks each and builds the :class:`GatePolicy`."""

    fail_on_regression: str = ""
    allow_foreign: bool = False
    categories: str = ""
    confirm_blocks: int = DEFAULT_CONFIRM_BLOCKS
    load_threshold: str = f"{DEFAULT_LOAD_THRESHOLD_PCT:g}"
    memory_threshold: str = f"{DEFAULT_MEMORY_THRESHOLD_PCT:g}"
    mode: str = "stored"
    precision: str = ""
    precision_budget: str = f"{DEFAULT_PRECISION_BUDGET_S:g}"
    base_runner: str = ""
    max_pairs: str = str(DEFAULT_MAX_PAIRS)
    on_unresolved: str = DEFAULT_ON_UNRESOLVED

    def policy(self, rules: tuple[Any, ...] | None = None,
               flags: GateFlags = PYTEST_FLAGS) -> GatePolicy:
        """The policy, each option checked (an Sme2Error names the option in ``flags``);
        ``rules``: the category table in use (plugins may add categories)."""
        return GatePolicy(
            fail_on_regression=parse_threshold(self.fail_on_regression),
            allow_foreign=self.allow_foreign,
            categories=parse_gate_categories(self.categories, rules, flag=flags.categories),
            confirm_blocks=self.confirm_blocks,
            load_threshold_pct=_measure_threshold(self.load_threshold, flags.load_threshold),
            memory_threshold_pct=_measure_threshold(self.memory_threshold,
                                                    flags.memory_threshold),
            mode=parse_gate_mode(self.mode), precision_pct=parse_precision(self.precision),
            precision_budget_s=parse_precision_budget(self.precision_budget),
            base_runner=self.base_runner.strip() or None,
            max_pairs=parse_max_pairs(self.max_pairs),
            on_unresolved=parse_on_unresolved(self.on_unresolved))


def parse_max_pairs(text: str) -> int:
    """``--sme2-max-pairs``: a whole number of pairs, 2 or more."""
    try:
        n = int(str(text).strip())
    except ValueError:
        n = 0
    if n < 2:
        raise Sme2Error(f"--sme2-max-pairs: expected a whole number of pairs, 2 or more, got "
                        f"{text!r}")
    return n


def parse_on_unresolved(text: str) -> str:
    """``--sme2-on-unresolved``: fail, warn or pass."""
    word = text.strip().lower() or DEFAULT_ON_UNRESOLVED
    if word not in ON_UNRESOLVED:
        raise Sme2Error(f"--sme2-on-unresolved: expected one of {', '.join(ON_UNRESOLVED)}, "
                        f"got {text!r}")
    return word


GATE_MODES = ("stored", "ab")


def parse_gate_mode(text: str) -> str:
    mode = text.strip().lower() or "stored"
    if mode not in GATE_MODES:
        raise Sme2Error(f"--sme2-gate-mode: expected one of {', '.join(GATE_MODES)}, got "
                        f"{text!r}")
    return mode


def parse_precision(text: str) -> float | None:
    """``2`` or ``2%`` -> 2.0; empty -> None (the fixed design)."""
    raw = text.strip().removesuffix("%").strip()
    if not raw:
        return None
    try:
        pct = float(raw)
    except ValueError:
        raise Sme2Error(f"--sme2-precision: expected a percentage such as 2 or 2%, got "
                        f"{text!r}") from None
    if not 0 < pct < 100:
        raise Sme2Error(f"--sme2-precision: must lie above 0 and below 100 percent, got "
                        f"{pct:g}")
    return pct


def parse_precision_budget(text: str) -> float:
    """``--sme2-precision-budget``: seconds of measuring one benchmark may add, above 0."""
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not seconds > 0 or math.isinf(seconds):
        raise Sme2Error(f"--sme2-precision-budget: expected seconds above 0, got {text!r}")
    return seconds


def _percentage(text: str, flag: str, also: str = "") -> float:
    try:
        pct = float(text)
    except ValueError:
        pct = math.nan
    if not pct >= 0 or math.isinf(pct):
        raise Sme2Error(f"{flag} must be a percentage of 0 or more{also}, got {text!r}")
    return pct


def parse_threshold(text: str) -> float | None:
    """``--fail-on-regression``: a percentage of 0 or more, or "" (off)."""
    return _percentage(text, "--fail-on-regression") if text else None


def parse_measure_threshold(dest: str, text: str) -> float | None:
    """``--sme2-load-threshold`` / ``--sme2-memory-threshold`` (by option dest): a
    percentage, or "off"."""
    return _measure_threshold(text, "--" + dest.replace("_", "-"))


def _measure_threshold(text: str, flag: str) -> float | None:
    if text.strip().lower() == "off":
        return None
    return _percentage(text, flag, " or 'off'")


def parse_gate_categories(text: str, rules: tuple[Any, ...] | None = None,
                          flag: str = "--sme2-gate-categories") -> tuple[str, ...]:
    """``--sme2-gate-categories``: category names (any case) or ``all``; ``rules``: the
    category table in use (plugins may add categories)."""
    known = {c.lower(): c for c in (*named_categories(rules), OTHER)}
    out = []
    for name in split_list(text):
        if name.lower() == "all":
            return ("all",)
        if name.lower() not in known:
            raise Sme2Error(f"{flag}: unknown category {name!r}; known: "
                            f"{', '.join(known.values())}, or all")
        out.append(known[name.lower()])
    return tuple(out)
