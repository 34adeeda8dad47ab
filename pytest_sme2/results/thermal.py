"""What a device's thermal sensors said, and what the hold before a block did, as records:
:class:`ThermalState` (one look at a device) and :class:`CooldownRecord` (``cooldown`` in
results.json). The policy that reads and judges them is :mod:`pytest_sme2.devices.thermal`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from pytest_sme2.results.codec import decode_optional, encode


@dataclass(frozen=True)
class ThermalState:
    """One look at a device's sensors. ``cpu_c``: the CPU temperatures (degrees C) by sensor;
    ``throttling``: why the device is throttling, one phrase per cause (empty: it is not)."""

    cpu_c: Mapping[str, float] = field(default_factory=dict)
    throttling: tuple[str, ...] = ()
    zones: tuple[str, ...] = ()         # every sensor seen, for the "cannot apply" line

    @property
    def hottest(self) -> tuple[str, float] | None:
        if not self.cpu_c:
            return None
        zone = max(self.cpu_c, key=lambda z: self.cpu_c[z])
        return zone, self.cpu_c[zone]

    def cool(self, target_c: float) -> bool:
        hot = self.hottest
        return hot is not None and hot[1] <= target_c and not self.throttling


@dataclass
class CooldownRecord:
    """What the hold did before one block, as results.json keeps it (``cooldown``).
    ``start_*``: the hottest CPU sensor when the block started; ``first_*``: when the hold
    began. ``hot``: the timeout ran out with the device still hot or throttling — the block
    was measured and kept, and is flagged."""

    target_c: float
    timeout_s: float
    applied: bool = True
    reason: str = ""                    # why not applied
    hot: bool = False
    waited_s: float = 0.0
    polls: int = 0
    first_zone: str | None = None
    first_c: float | None = None
    start_zone: str | None = None
    start_c: float | None = None
    throttling: list[str] = field(default_factory=list)   # at the block's start

    to_dict = encode
    from_dict = classmethod(decode_optional)

    def summary(self) -> str:
        """One phrase: where the block started, and why it counts as hot."""
        where = (f"{self.start_zone} {self.start_c:.1f} °C" if self.start_c is not None
                 else "no CPU temperature")
        why = [f"above {self.target_c:g} °C"] if self.start_c is not None and \
            self.start_c > self.target_c else []
        why += self.throttling
        return f"{where}{' (' + '; '.join(why) + ')' if why else ''}"
