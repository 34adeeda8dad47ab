"""What ``--sme2-precision`` asked and got, as each block of the benchmark carries it
(``precision`` in results.json): :meth:`pytest_sme2.measure.precision.Precision.record` makes
it."""

from __future__ import annotations

from dataclasses import dataclass

from pytest_sme2.results.codec import decode, encode


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

    to_dict = encode
    from_dict = classmethod(decode)
