"""The regression gate's verdict (:class:`Judgement`): what :mod:`pytest_sme2.gate.rule` decides
and what results.json keeps of it, one record for both. The words it is made of (statuses and
measures) live here with it; the gate imports them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pytest_sme2 import units
from pytest_sme2.results.codec import NOT_STORED, added, decode, encode
from pytest_sme2.stats import Interval

__all__ = ["CANNOT_TELL", "IMPROVEMENT", "INSTRUCTIONS", "LOAD", "MEMORY", "NOT_COMPARED",
           "NO_CHANGE", "OK", "PREFILL", "PREFILL_INSTRUCTIONS", "REGRESSION", "STATUSES", "TIME",
           "TTFT",
           "Judgement", "judgement", "judgements"]

REGRESSION, IMPROVEMENT, NOT_COMPARED = "regression", "improvement", "not_compared"
# Neither: the interval rules out a change of the threshold's size (no change), or it does not
# (cannot tell: pytest_sme2.gate.decide). OK is what documents written before the split said.
NO_CHANGE, CANNOT_TELL, OK = "no_change", "cannot_tell", "ok"
# Every status a verdict has today, as documents and the skills list them (OK is a reading of
# old documents only).
STATUSES = (REGRESSION, IMPROVEMENT, NO_CHANGE, CANNOT_TELL, NOT_COMPARED)
TIME, INSTRUCTIONS = "time", "instructions"     # the measures a judgement can be of
LOAD, MEMORY = "load time", "peak memory"       # ... and what a benchmark costs to start
PREFILL, TTFT = "prefill time", "time to first token"   # an LLM's phases beside its decode
PREFILL_INSTRUCTIONS = "prefill instructions"   # ... counted (its decode's: INSTRUCTIONS)


@dataclass(frozen=True)
class Judgement:
    """The regression gate's verdict on one measure of one benchmark, as the gate returns it
    and results.json stores it (a block's ``baseline``, ``baseline_categories``, ...).

    ``ratio`` is current time / baseline time (above 1 = slower), with its interval. Written
    and read by the codec's rule, its keys in the order of these fields; one an older writer
    left out takes its default."""

    measure: str = field(default=TIME, kw_only=True, metadata=added())  # or INSTRUCTIONS, LOAD...
    # False: judged and reported, never a failure (--sme2-load-threshold off, ...).
    enforced: bool = field(default=True, kw_only=True, metadata=added())
    # What the ratio is against: the stored baseline, or (gate_ab) the base program
    # re-measured in this session.
    against: str = field(default="baseline", kw_only=True, metadata=added())
    status: str
    ratio: Interval | None = None
    threshold_pct: float = 0.0
    noise_floor_pct: float | None = None
    reason: str = ""
    baseline_median: float | None = None
    current_median: float | None = None
    baseline_sessions: int = 0
    current_blocks: int = 0
    category: str | None = None
    foreign: bool = False             # a baseline exists but was recorded on another device
    changed_since_baseline: tuple[str, ...] = ()   # under test: model source, versions, ...
    # The keys a document held for it (None: not read from one): an older writer's verdict
    # writes back without the keys it did not have, byte for byte.
    stored_keys: tuple[str, ...] | None = field(default=None, compare=False, repr=False,
                                                metadata=NOT_STORED)

    @property
    def regressed(self) -> bool:
        return self.status == REGRESSION

    @property
    def unresolved(self) -> bool:
        """The interval could neither call a change nor rule one out ("cannot tell")."""
        return self.status == CANNOT_TELL

    @property
    def word(self) -> str:
        """The verdict as people read it: ``no change``, ``cannot tell``, ``regression``."""
        return self.status.replace("_", " ")

    @property
    def summary(self) -> str:
        """One line: ``regression 1.34x [1.28, 1.41] vs baseline; changed since baseline:
        model source, executorch 1.5.1 -> 1.5.2``, or ``not compared: <why>``."""
        what = f"{self.category} " if self.category else ""
        if self.measure != TIME:
            what = f"{self.measure} {what}"
        r = self.ratio
        if self.status == NOT_COMPARED or r is None:
            reason = self.reason.removeprefix("not compared: ")
            return f"{what}not compared: {reason}"
        ratio = units.ratio_interval(r, units.COMPACT_RATIO_DIGITS)
        line = f"{what}{self.word} {ratio} vs {self.against}"
        if self.against != "baseline" and self.current_blocks:
            line += f" ({self.current_blocks} pairs)"
        if self.changed_since_baseline:
            line += "; changed since baseline: " + ", ".join(self.changed_since_baseline)
        return line

    def to_dict(self) -> dict[str, Any]:
        d = encode(self)
        return d if self.stored_keys is None else {k: v for k, v in d.items()
                                                   if k in self.stored_keys}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Judgement:
        return replace(decode(cls, d), stored_keys=tuple(d))


def judgement(value: Judgement | Mapping[str, Any] | None) -> Judgement | None:
    """A judgement, from itself or its dict form (results.json's, or a caller's)."""
    if value is None or isinstance(value, Judgement):
        return value
    return Judgement.from_dict(value)


def judgements(value: Mapping[str, Judgement | Mapping[str, Any]] | None
               ) -> dict[str, Judgement] | None:
    """Judgements by name (category, startup measure, runner), from either form."""
    if value is None:
        return None
    return {k: judgement(j) for k, j in value.items()}
