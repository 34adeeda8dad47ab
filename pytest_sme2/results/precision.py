"""What ``--sme2-precision`` asked and got, as each block of the benchmark carries it
(``precision`` in results.json): :meth:`pytest_sme2.measure.precision.Precision.record` makes
it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class PrecisionOutcome:
    """The interval asked (``target_pct``) and got (``half_width_pct``, None without one), over
    how many blocks (paired or a level) and seconds, and, when not reached, why."""

    target_pct: float
    half_width_pct: float | None = None
    blocks: int = 0
    paired: bool = False
    seconds: float = 0.0
    reached: bool = False
    why: str = ""           # "" when reached; else what limited it

    def to_dict(self) -> dict[str, Any]:
        return {"target_pct": self.target_pct, "half_width_pct": self.half_width_pct,
                "blocks": self.blocks, "paired": self.paired, "seconds": self.seconds,
                "reached": self.reached, "why": self.why}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PrecisionOutcome:
        return cls(target_pct=d["target_pct"], half_width_pct=d.get("half_width_pct"),
                   blocks=d.get("blocks", 0), paired=d.get("paired", False),
                   seconds=d.get("seconds", 0.0), reached=d.get("reached", False),
                   why=d.get("why", ""))
