"""Load, first inference and memory: one cold runner process, and a benchmark's startup as
the median over its cold processes."""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pytest_sme2.results.codec import decode, decode_optional, encode

# -- load, first inference, memory ------------------------------------------------------------

@dataclass
class ProcessStartup:
    """One runner process from its start to its first inference: one cold load."""

    load_ms: float | None = None          # program + method load (see Startup.load_source)
    method_load_ms: float | None = None   # the method load alone
    program_load_ms: float | None = None  # Module::load, the runner's timer (None: not timed)
    first_inference_ms: float | None = None   # the first Method::execute after the load
    peak_rss_kb: int | None = None        # VmHWM at the end of the process
    load_rss_kb: int | None = None        # resident memory the load added

    to_json = encode
    from_json = classmethod(decode)


def _median(values: Iterable[float | int | None]) -> float | None:
    present = [float(v) for v in values if v is not None]
    return float(statistics.median(present)) if present else None


@dataclass
class Startup:
    """What a benchmark costs before its steady state: the ``.pte`` size, and per cold process
    (the block's own first, then the load-only processes of ``--sme2-loads``) its load time,
    first inference and memory. Medians over processes: a process is the unit of a cold load."""

    pte_bytes: int | None = None
    ptd_bytes: int | None = None    # its weights file's, when they live apart (a .ptd)
    processes: list[ProcessStartup] = field(default_factory=list)
    load_source: str = ""       # which events / timers load_ms comes from
    memory_source: str = ""     # what peak and load memory are of, or why there are none
    problem: str = ""           # why a load-only process failed (the block itself is kept)

    @property
    def load_ms(self) -> float | None:
        return _median(p.load_ms for p in self.processes)

    @property
    def method_load_ms(self) -> float | None:
        return _median(p.method_load_ms for p in self.processes)

    @property
    def first_inference_ms(self) -> float | None:
        return _median(p.first_inference_ms for p in self.processes)

    @property
    def peak_rss_kb(self) -> float | None:
        return _median(p.peak_rss_kb for p in self.processes)

    @property
    def load_rss_kb(self) -> float | None:
        return _median(p.load_rss_kb for p in self.processes)

    @property
    def loads(self) -> int:
        """Cold loads measured."""
        return sum(1 for p in self.processes if p.load_ms is not None)

    def to_json(self) -> dict[str, Any]:
        """The medians over processes are written beside the fields (a reader of the file
        needs no arithmetic), so the writer is by hand; the reader is the codec's."""
        return {"pte_bytes": self.pte_bytes,
                **({"ptd_bytes": self.ptd_bytes} if self.ptd_bytes is not None else {}),
                "load_ms": self.load_ms, "method_load_ms": self.method_load_ms,
                "first_inference_ms": self.first_inference_ms,
                "peak_rss_kb": self.peak_rss_kb, "load_rss_kb": self.load_rss_kb,
                "load_source": self.load_source, "memory_source": self.memory_source,
                "processes": [p.to_json() for p in self.processes],
                **({"problem": self.problem} if self.problem else {})}

    from_json = classmethod(decode_optional)
