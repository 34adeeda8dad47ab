"""A comparison of two runners as results.json stores it, and the output check of its two
sides."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from pytest_sme2.results.codec import NOT_STORED, added, decode, decode_optional, encode
from pytest_sme2.stats import Interval
from pytest_sme2.results.judgement import Judgement, judgements

# -- comparisons -----------------------------------------------------------------------------

@dataclass
class OutputCheck:
    max_abs_diff: float
    # max_abs_diff / max |base output| (documents before it: 0)
    max_rel_diff: float = field(default=0.0, kw_only=True)
    tolerance: float
    equal: bool

    to_dict = encode
    from_json = classmethod(decode_optional)


@dataclass
class ComparisonRecord:
    """What a comparison of two runners found, as ``results.json`` holds it: the figures and
    the node ids of its blocks (the benchmarks of the same document), not the blocks. Written
    and read by the codec's rule, its keys in the order of these fields (a plugin's ``extra``
    keys after them)."""

    # The test that compared (documents before 14 have none: then not written).
    nodeid: str = field(default="", kw_only=True, metadata=added())
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
    # The gate's verdict per runner.
    baselines: dict[str, Judgement] | None = field(default=None, metadata=added())
    # The pairs (0-based) whose two blocks the machine-state probe saw at two machine speeds,
    # left out of the verdict, and the largest speed ratio across one (1.0: none).
    straddled_pairs: list[int] = field(default_factory=list, metadata=added("straddled"))
    machine_switch: float = field(default=1.0, metadata=added("straddled"))
    # The paired rule's verdict, its reason saying why (None in documents before it).
    judgement: Judgement | None = field(default=None, metadata=added())
    # An LLM's generations: the speed-up of each phase (prefill, ttft, decode); {} otherwise.
    phase_speedups: dict[str, Interval] = field(default_factory=dict, metadata=added())
    # A plugin's keys, written after the record's own.
    extra: dict[str, Any] = field(default_factory=dict, metadata=NOT_STORED)

    def __post_init__(self) -> None:
        self.baselines = judgements(self.baselines)     # dicts (results.json's) become records
        if isinstance(self.judgement, Mapping):
            self.judgement = Judgement.from_dict(self.judgement)
        self.phase_speedups = {k: decode(Interval, v) if isinstance(v, Mapping) else v
                               for k, v in self.phase_speedups.items() if v is not None}

    @property
    def point(self) -> str:
        return f"{self.model} {self.dtype} t{self.threads}"

    @property
    def name(self) -> str:
        """The test's name without its file, or the point for a document without it."""
        return self.nodeid.split("::")[-1] if self.nodeid else self.point

    def to_json(self) -> dict[str, Any]:
        return {**encode(self), **self.extra}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "ComparisonRecord":
        known = {f.name for f in fields(cls)}
        return replace(decode(cls, d), extra={k: v for k, v in d.items() if k not in known})
