"""A comparison of two runners as results.json stores it, and the output check of its two
sides."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from pytest_sme2.stats import Interval
from pytest_sme2.results.judgement import Judgement, judgements
from pytest_sme2.results.records import known_fields

# -- comparisons -----------------------------------------------------------------------------

@dataclass
class OutputCheck:
    max_abs_diff: float
    tolerance: float
    equal: bool
    max_rel_diff: float = 0.0           # max_abs_diff / max |base output|

    def to_dict(self) -> dict:
        return {"max_abs_diff": self.max_abs_diff, "max_rel_diff": self.max_rel_diff,
                "tolerance": self.tolerance, "equal": self.equal}

    @classmethod
    def from_json(cls, d: Mapping[str, Any] | None) -> "OutputCheck | None":
        return cls(**known_fields(cls, d)) if d else None


def _interval(d: Mapping[str, Any] | None) -> Interval | None:
    return Interval(d["point"], d["low"], d["high"], d.get("confidence", 0.95)) if d else None


@dataclass
class ComparisonRecord:
    """What a comparison of two runners found, as ``results.json`` holds it: the figures and
    the node ids of its blocks (the benchmarks of the same document), not the blocks."""

    model: str
    dtype: str
    threads: int
    base: str                                   # runner names
    candidate: str
    # Each side's median block median over the pairs the verdict rests on (pairs that straddled
    # two machine speeds left out): figures from the same blocks as the speed-up.
    base_median_ms: float
    candidate_median_ms: float
    speedup: Interval                           # base time / candidate time
    category_speedups: dict[str, Interval | None]
    outputs: OutputCheck | None
    verdict: str
    margin: float
    emulated: bool = False
    base_block_medians_ms: list[float] = field(default_factory=list)
    candidate_block_medians_ms: list[float] = field(default_factory=list)
    base_blocks: list[str] = field(default_factory=list)       # benchmark node ids
    candidate_blocks: list[str] = field(default_factory=list)
    nodeid: str = ""                            # the test that compared ("" before 14)
    baselines: dict[str, Judgement] | None = None   # the gate's verdict per runner
    # An LLM's generations: the speed-up of each phase (prefill, ttft, decode); {} otherwise.
    phase_speedups: dict[str, Interval] = field(default_factory=dict)
    # The pairs (0-based) whose two blocks the machine-state probe saw at two machine speeds,
    # left out of the verdict, and the largest speed ratio across one (1.0: none).
    straddled_pairs: list[int] = field(default_factory=list)
    machine_switch: float = 1.0
    # The paired rule's verdict, its reason saying why (None in documents before it).
    judgement: Judgement | None = None
    extra: dict[str, Any] = field(default_factory=dict)   # a plugin's keys

    def __post_init__(self) -> None:
        self.baselines = judgements(self.baselines)     # dicts (results.json's) become records
        if isinstance(self.judgement, Mapping):
            self.judgement = Judgement.from_dict(self.judgement)
        self.phase_speedups = {k: _interval(v) if isinstance(v, Mapping) else v
                               for k, v in self.phase_speedups.items() if v is not None}

    @property
    def point(self) -> str:
        return f"{self.model} {self.dtype} t{self.threads}"

    @property
    def name(self) -> str:
        """The test's name without its file, or the point for a document without it."""
        return self.nodeid.split("::")[-1] if self.nodeid else self.point

    def to_json(self) -> dict[str, Any]:
        return {
            **({"nodeid": self.nodeid} if self.nodeid else {}),
            "model": self.model, "dtype": self.dtype, "threads": self.threads,
            "base": self.base, "candidate": self.candidate,
            "base_median_ms": self.base_median_ms,
            "candidate_median_ms": self.candidate_median_ms,
            "speedup": self.speedup.to_dict(),
            "category_speedups": {k: (v.to_dict() if v else None)
                                  for k, v in self.category_speedups.items()},
            "outputs": self.outputs.to_dict() if self.outputs else None,
            "verdict": self.verdict, "margin": self.margin, "emulated": self.emulated,
            "base_block_medians_ms": self.base_block_medians_ms,
            "candidate_block_medians_ms": self.candidate_block_medians_ms,
            "base_blocks": self.base_blocks, "candidate_blocks": self.candidate_blocks,
            **({"baselines": {r: j.to_dict() for r, j in self.baselines.items()}}
               if self.baselines is not None else {}),
            **({"straddled_pairs": self.straddled_pairs, "machine_switch": self.machine_switch}
               if self.straddled_pairs else {}),
            **({"judgement": self.judgement.to_dict()} if self.judgement is not None else {}),
            **({"phase_speedups": {k: v.to_dict() for k, v in self.phase_speedups.items()}}
               if self.phase_speedups else {}),
            **self.extra,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "ComparisonRecord":
        known = {f.name for f in fields(cls)}
        return cls(
            model=d["model"], dtype=d["dtype"], threads=d["threads"], base=d["base"],
            candidate=d["candidate"], base_median_ms=d["base_median_ms"],
            candidate_median_ms=d["candidate_median_ms"], speedup=_interval(d["speedup"]),
            category_speedups={k: _interval(v)
                               for k, v in (d.get("category_speedups") or {}).items()},
            outputs=OutputCheck.from_json(d.get("outputs")), verdict=d["verdict"],
            margin=d["margin"], emulated=bool(d.get("emulated", False)),
            base_block_medians_ms=list(d.get("base_block_medians_ms") or []),
            candidate_block_medians_ms=list(d.get("candidate_block_medians_ms") or []),
            base_blocks=list(d.get("base_blocks") or []),
            candidate_blocks=list(d.get("candidate_blocks") or []),
            nodeid=d.get("nodeid", ""), baselines=d.get("baselines"),
            phase_speedups=dict(d.get("phase_speedups") or {}),
            straddled_pairs=list(d.get("straddled_pairs") or []),
            machine_switch=float(d.get("machine_switch", 1.0)),
            judgement=d.get("judgement"),
            extra={k: v for k, v in d.items() if k not in known})
