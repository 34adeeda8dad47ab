"""The records of one block's analysis as results.json stores them: operators, kernel
evidence (logged, traced, sampled), the analysis, and where and how the block ran, the thermal
hold before it included (:class:`ThermalState`, one look at a device's sensors, and
:class:`CooldownRecord`, ``cooldown``; the policy that reads and judges them is
:mod:`pytest_sme2.devices.thermal`). Every record writes the keys it reads, in the same order.

The analysis (:mod:`pytest_sme2.analysis`) emits these records itself: there is one class per
concept, whether it was just computed or read back from a document."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_sme2.results.codec import NOT_STORED, added, decode, decode_optional, encode

# A kernel's tile-size accessor, not a kernel (pytest_sme2.analysis.isa.is_accessor's rule: the
# analysis layer is above this one).
_ACCESSOR = re.compile(r"(^kai_get_|_get_(mr|nr|kr|sr|m_step|n_step)$)", re.IGNORECASE)

# -- the analysis of one block --------------------------------------------------------------

@dataclass
class OperatorStats:
    """One operator (name and instruction) of a benchmark, as ``analysis/operators.py``
    computed it: per timed run means, share of E2E and the bottleneck flags."""

    name: str
    instruction_id: int = -1
    category: str = ""
    delegated: bool = False
    backend: str = ""
    calls_per_run: float = 0.0
    mean_ms_per_run: float = 0.0
    pct_e2e: float = 0.0
    bottleneck: bool = False          # above analysis.operators.BOTTLENECK_PCT of E2E
    should_delegate: bool = False     # a bottleneck outside the delegate
    op_types: list[str] = field(default_factory=list)
    module_paths: list[str] = field(default_factory=list)
    kernel_hint: str = ""
    # Every event read 0: the operator ran under its clock's resolution (XNNPACK counts whole
    # microseconds), so its mean says nothing and its time is in Other.
    below_resolution: bool = field(default=False, metadata=added())

    to_json = encode
    from_json = classmethod(decode)


@dataclass
class LoggedKernel:
    """A micro-kernel an XNNPACK log (xnntrace) names as selected (``kind``: the word before
    "microkernel" in the log line; ``isa``: the name's suffix after its last ``__``)."""

    name: str
    kind: str = ""
    isa: str = ""
    sme2: bool = False


@dataclass
class TracedKernel:
    """A micro-kernel a kernel trace shows executed; ``blocks``: its translated blocks, of which
    ``streaming_blocks`` hold SME instructions. ``kind``: kleidiai, xnnpack or other.

    ``streaming_blocks`` is the kernel trace's (its CSV and ``kernels.csv`` keep it); results.json
    does not store it, so a record read back from a document has 0 there."""

    name: str
    isa_family: str = ""
    kind: str = ""
    library: str = ""
    blocks: int = 0
    streaming_blocks: int = field(default=0, metadata=NOT_STORED)

    to_json = encode


@dataclass
class SampledKernel:
    """A micro-kernel the sampler caught executing; ``samples``, and their share of all."""

    name: str
    isa_family: str = ""
    kind: str = ""
    library: str = ""
    samples: int = 0
    share: float = 0.0


@dataclass
class KernelEvidence:
    """The SME2 verdict (``proven``, ``indicated``, ``absent``, ``unknown``; ``mixed`` for
    blocks that disagree) and what it rests on; beside it the SME (SME1) level's verdict
    (``sme``, ``sme_reason``), from the same evidence: a device with SME but no SME2 runs SME1
    kernels, and says so."""

    sme2: str = "unknown"
    reason: str = ""
    kleidiai_ops: list[str] = field(default_factory=list)
    kernels: list[LoggedKernel] = field(default_factory=list)
    executed_kernels: list[TracedKernel] = field(default_factory=list)
    streaming_sme_blocks: int | None = None     # None: no kernel trace was read
    kernel_trace_source: str = ""
    # Sampling (an evidence process): what was caught, out of how many samples (None: none
    # taken), and the CSV. Written to results.json only when a sample was taken.
    sampled_kernels: list[SampledKernel] = field(default_factory=list,
                                                 metadata=added("sampling"))
    samples_total: int | None = field(default=None, metadata=added("sampling"))
    kernel_sample_source: str = field(default="", metadata=added("sampling"))
    # The SME level: proven when SME1 kernels executed (or were sampled), absent when the
    # process has no SME or ran no SME code, indicated by KleidiAI packed operators on a device
    # with SME but no SME2, else unknown. Written only when known (older documents lack it).
    sme: str = field(default="unknown", metadata=added("sme"))
    sme_reason: str = field(default="", metadata=added("sme"))

    @property
    def traced(self) -> bool:
        """A kernel trace was read, so ``executed_kernels`` is what ran (possibly nothing)."""
        return self.streaming_sme_blocks is not None or bool(self.executed_kernels)

    @property
    def sampled(self) -> bool:
        return self.samples_total is not None

    @property
    def sme1_kernels(self) -> list[str]:
        """The SME1 micro-kernels the evidence names (executed, else sampled), compute kernels
        before packing ones, tile-size accessors left out
        (:func:`pytest_sme2.analysis.isa.is_accessor`)."""
        ran = [k for k in self.executed_kernels or self.sampled_kernels
               if k.isa_family == "SME" and not _ACCESSOR.search(k.name)]
        return [k.name for k in sorted(ran, key=lambda k: "pack" in k.name.lower())]

    @property
    def shows_sme_level(self) -> bool:
        """Whether the SME level says something the SME2 verdict does not: it is known, and
        SME2 neither proven nor indicated (SME1 packing beside SME2 kernels is a detail)."""
        return self.sme != "unknown" and self.sme2 not in ("proven", "indicated")

    @property
    def levels(self) -> str:
        """Both levels in one line: ``SME: proven (SME1 kernels: kai_..._sme_mopa); SME2:
        absent``; the SME2 verdict alone where the SME level adds nothing
        (:attr:`shows_sme_level`)."""
        if not self.shows_sme_level:
            return f"SME2: {self.sme2}"
        ran = self.sme1_kernels
        more = f" and {len(ran) - 2} more" if len(ran) > 2 else ""
        named = f" (SME1 kernels: {', '.join(ran[:2])}{more})" if ran else ""
        return f"SME: {self.sme}{named}; SME2: {self.sme2}"

    to_json = encode
    from_json = classmethod(decode_optional)


@dataclass
class ResultAnalysis:
    """What the ETDump of one block says beyond its latency: mean ms per timed run by category
    (adding up to E2E's mean), framework overheads, operators and the SME2 evidence."""

    categories_ms: dict[str, float] = field(default_factory=dict)
    overheads_ms: dict[str, float] = field(default_factory=dict)
    operators: list[OperatorStats] = field(default_factory=list)
    kernel_evidence: KernelEvidence | None = None

    def to_json(self) -> dict[str, Any]:
        """No kernel evidence is written ``{}``, as it always was."""
        d = encode(self)
        d["kernel_evidence"] = d["kernel_evidence"] or {}
        return d

    # From a benchmark's entry or ``Analysis.to_json()`` (the same keys); the analysis itself
    # gives its record directly (``Analysis.record()``).
    from_json = classmethod(decode)


# -- where and how a block ran ---------------------------------------------------------------

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


@dataclass
class RunContext:
    """Where and how a block ran, beside what it measured."""

    thermal_before: dict[str, float] | None = None   # degrees C per zone (Android)
    thermal_after: dict[str, float] | None = None
    block: int | None = None          # position in a comparison or confirmation; None: first
    # The node id of the test whose benchmark this block is: its own, or the test's a
    # comparison's, confirmation's or A/B block is named after (``test[native#3]``); None in
    # documents written before blocks named it
    benchmark: str | None = field(default=None, metadata=added())
    outputs: str | None = None        # the last run's outputs (runners that write them)
    kernel_trace: str | None = None   # executed kernels CSV (traced devices)
    # Chrome/Perfetto trace JSON of the median run
    trace: str | None = field(default=None, metadata=added())
    # --sme2-cooldown: what the thermal hold before this block did (None: not asked for)
    cooldown: CooldownRecord | None = field(default=None, metadata=added())
    # --sme2-sample: the sampled-kernels CSV of the benchmark's evidence process, or why there
    # is none (the block itself is measured either way)
    kernel_sample: str | None = field(default=None, metadata=added())
    sample_problem: str | None = field(default=None, metadata=added())
    # Outputs (an LLM's sampled logits) that hold NaN or inf: what the runner saw and the
    # likely cause (pytest_sme2.analysis.output_values); None when they were finite.
    output_problem: str | None = field(default=None, metadata=added())
    # The session's other processes that took CPU on this machine while the block ran
    # (pytest_sme2.devices.beside); None when none did.
    beside: list[str] | None = field(default=None, metadata=added())

    @property
    def started_hot(self) -> bool:
        return bool(self.cooldown and self.cooldown.hot)

    # documents written before the keys marked added(): unchanged
    to_json = encode
    from_json = classmethod(decode)
