"""What results.json keeps of the machine's speed: each block's probe reading
(:class:`ProbeReading`), the speeds a benchmark's runs or blocks fell into (:class:`Mode`), and
the session's machine states (:class:`MachineStates`). The analysis that makes them is
:mod:`pytest_sme2.analysis.machine_state`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from statistics import median
from typing import Any

from pytest_sme2.results.codec import decode, encode


@dataclass
class ProbeReading:
    """The machine-state probe of one block: its fixed GEMM timed in the block's own process
    right before the first warm-up (``before_us``) and right after the last timed run
    (``after_us``), one value per execute, in µs; ``state``: which of the session's machine
    speeds it ran at (0 the fastest; None until the session's states are known, or when the
    probe moved during the block)."""

    before_us: list[float]
    after_us: list[float]
    state: int | None = None

    @property
    def before(self) -> float:
        return float(median(self.before_us)) if self.before_us else float("nan")

    @property
    def after(self) -> float:
        return float(median(self.after_us)) if self.after_us else float("nan")

    @property
    def level(self) -> float:
        """The block's probe time: the median of every probe execute at both ends."""
        values = self.before_us + self.after_us
        return float(median(values)) if values else float("nan")

    @property
    def moved(self) -> float:
        """How far the machine's speed moved during the block: the larger end's probe time
        over the smaller's (1.0 = it held still)."""
        a, b = self.before, self.after
        return max(a, b) / min(a, b) if min(a, b) > 0 else 1.0

    def to_dict(self) -> dict[str, Any]:
        return {"before_us": self.before_us, "after_us": self.after_us,
                "before_median_us": round(self.before, 3), "after_median_us": round(self.after, 3),
                "state": self.state}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ProbeReading:
        return cls([float(v) for v in d.get("before_us") or ()],
                   [float(v) for v in d.get("after_us") or ()], d.get("state"))


@dataclass(frozen=True)
class Mode:
    """One speed among values that fell into several: its centre (the median of its values),
    its share of them, and how many."""

    centre: float
    share: float
    count: int

    to_dict = encode
    from_dict = classmethod(decode)


def modes_of(values: Any) -> tuple[Mode, ...]:
    """Modes read back from results.json (a list of dicts), or ()."""
    return tuple(Mode.from_dict(m) for m in values or ())


@dataclass
class MachineStates:
    """The session's machine speeds as the probe saw them across its blocks: ``states`` (probe
    time per speed, fastest first, with each one's share of the blocks), how many blocks were
    probed, how many saw the machine move during their runs, and ``note`` when none were
    probed (an emulated CPU, a runner that cannot probe)."""

    probed: int = 0
    states: tuple[Mode, ...] = ()
    moved: int = 0
    note: str = ""
    # What of the session ran beside its blocks on this machine (exports ahead, a fork
    # server warming up, another worker's block): one line each, "" when nothing did.
    beside: list[str] = field(default_factory=list)

    @property
    def changed_speed(self) -> bool:
        return len(self.states) > 1

    def to_dict(self) -> dict[str, Any]:
        return {"probed_blocks": self.probed, "states": [m.to_dict() for m in self.states],
                "moved_blocks": self.moved, "note": self.note, "beside": list(self.beside)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> MachineStates | None:
        if not d:
            return None
        return cls(int(d.get("probed_blocks", 0)), modes_of(d.get("states")),
                   int(d.get("moved_blocks", 0)), str(d.get("note", "")),
                   list(d.get("beside") or ()))
