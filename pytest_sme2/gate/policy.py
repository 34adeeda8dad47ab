"""What the regression gate (:mod:`pytest_sme2.gate.rule`) is asked to do: :class:`GatePolicy`
and its defaults. Its options' parsers are the option table's
(:mod:`pytest_sme2.measure.option_values`), which pytest's options and ``pytest-sme2 gate``
both use, so neither repeats the other's defaults or checks.

Kept apart from ``gate.py`` because it is light: every pytest run builds a policy, and the gate
itself imports numpy.
"""

from __future__ import annotations

from dataclasses import dataclass

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
GATE_MODES = ("stored", "ab")


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
