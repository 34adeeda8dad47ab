"""What a bisect found, as records: each probe, each culprit, the skipped and reused commits,
and the verdict (``found``, ``not reproducible``, ``cannot tell``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from pytest_sme2.bisect.measures import Compared
from pytest_sme2.results.codec import encode

FOUND, NOT_REPRODUCIBLE, CANNOT_TELL = "found", "not reproducible", "cannot tell"


@dataclass(frozen=True)
class Probe:
    commit: str
    verdict: str            # good, bad, unclear; "sandwich" for GOOD vs BAD
    pairs: int              # 0: reused, nothing measured
    interval: str
    comparison: str         # the paired rule's status, or what it was reused from

    to_json = encode


@dataclass(frozen=True)
class Culprit:
    """A step's first bad commit, measured against its last good one (``parent``)."""

    benchmark: str
    commit: str
    subject: str
    date: str
    parent: str
    skipped_before: list[str]       # skipped commits between parent and commit: maybe them
    compared: Compared | None       # None: byte-identical programs (cannot happen for a step)
    pins: list[str]                 # "pyproject.toml: executorch 1.5.1 -> 1.5.2"
    in_time: Compared | None = None     # --measure instructions: the step measured in time

    @property
    def effect(self) -> str:
        c = self.compared
        if c is not None and c.point is None and not c.pairs:
            return "its SME2 kernels changed"
        if c is None or c.point is None:
            return "?"
        return f"{(c.point - 1) * 100:+.1f}%"

    def category_changes(self, most: int = 4) -> list[str]:
        """``GEMM 0.210 -> 0.820 ms``: the operator categories that moved most."""
        timed = self.in_time or self.compared       # counts have no categories
        if timed is None:
            return []
        before = timed.categories.get("base", {})
        after = timed.categories.get("candidate", {})
        names = sorted(set(before) | set(after),
                       key=lambda n: -abs(after.get(n, 0.0) - before.get(n, 0.0)))
        return [f"{n} {before.get(n, 0.0):.3f} -> {after.get(n, 0.0):.3f} ms"
                for n in names[:most] if abs(after.get(n, 0.0) - before.get(n, 0.0)) > 0.0005]

    def to_json(self) -> dict:
        c = self.compared
        return {"benchmark": self.benchmark, "commit": self.commit, "subject": self.subject,
                "date": self.date, "parent": self.parent, "effect": self.effect,
                "interval": None if c is None or c.low is None else [c.low, c.high],
                "verdict": None if c is None else c.status,
                "pairs": 0 if c is None else c.pairs,
                "maybe_skipped": self.skipped_before,
                "categories": self.category_changes(), "dependency_pins": self.pins,
                "in_time": None if self.in_time is None else {
                    "verdict": self.in_time.status, "pairs": self.in_time.pairs,
                    "interval": [self.in_time.low, self.in_time.high]}}


@dataclass
class Outcome:
    good: str
    bad: str
    direction: str
    culprits: list[Culprit] = field(default_factory=list)
    probes: list[Probe] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)      # commit -> why
    reused: list[str] = field(default_factory=list)
    unresolved: list[str] = field(default_factory=list)        # "bench: lo..hi"
    flat: list[str] = field(default_factory=list)              # "bench: why"
    pairs_measured: int = 0                                    # in this run, all comparisons
    exported: int = 0                                          # commits exported in this run
    seconds: dict[str, float] = field(default_factory=lambda: {"wall": 0.0, "exports": 0.0,
                                                               "measuring": 0.0})

    def skip(self, commit: str, why: str) -> None:
        self.skipped[commit] = why

    def not_reproducible(self, bench: str, why: str) -> None:
        self.flat.append(f"{bench}: {why}")

    def unclear(self, bench: str, lo: str, hi: str) -> None:
        self.unresolved.append(f"{bench}: {lo}..{hi}")

    @property
    def verdict(self) -> str:
        if self.culprits:
            return FOUND
        if self.unresolved:
            return CANNOT_TELL
        return NOT_REPRODUCIBLE if self.flat else ""

    def to_json(self) -> dict:
        return {"verdict": self.verdict, "good": self.good, "bad": self.bad,
                "direction": self.direction,
                "culprits": [c.to_json() for c in self.culprits],
                "skipped": sorted(self.skipped), "skipped_why": self.skipped,
                "reused": self.reused, "probes": [p.to_json() for p in self.probes],
                "not_reproducible": self.flat, "cannot_tell": self.unresolved,
                "pairs_measured": self.pairs_measured, "exported": self.exported,
                "seconds": {k: round(v, 1) for k, v in self.seconds.items()}}
