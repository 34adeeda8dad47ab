"""Interleaved pairs, written once: every paired measurement — ``sme2_compare``'s two runners,
the gate's pairs against the base program, ``pytest-sme2 bisect``'s probes — takes its blocks
through :func:`take_pairs`.

A pair is one block (one fresh process) of each side, back to back, so the machine's slow drift
cancels within it. The order alternates, ABBA (A B, B A, A B, ...), so neither side always runs
first. The plan says how many: the first pairs; then, while the judge cannot tell, the count
doubles up to the pair budget (:func:`pytest_sme2.gate.decide.until_told`); or, with
``--sme2-precision``, pairs until the interval is that narrow. Emulated timings say nothing
about speed, so no pair is added on an emulated CPU."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from pytest_sme2.devices.base import Device
from pytest_sme2.errors import Sme2Error
from pytest_sme2.gate.ab import Pairs, pairs_of
from pytest_sme2.gate.decide import PairBudget, Told, until_told
from pytest_sme2.gate.policy import DEFAULT_THRESHOLD_PCT
from pytest_sme2.measure.block import BenchmarkRun, run_benchmark
from pytest_sme2.measure.comparison import Comparison, check_outputs, make_comparison
from pytest_sme2.measure.generation import check_tokens
from pytest_sme2.measure.precision import Goal, Precision
from pytest_sme2.measure.settings import MIN_BLOCKS, BenchSettings
from pytest_sme2.readers.tensorfile import read_tensors
from pytest_sme2.results import BlockResult, Judgement
from pytest_sme2.runners.base import Runner
from pytest_sme2.stats import DEFAULT_MARGIN

BASE, CANDIDATE = "base", "candidate"
# Measures block ``i`` of one side (``i``: the pair's index) and returns it.
Measure = Callable[[int], BlockResult]
# Measures one block of a run on a runner: (run, runner, the comparison's first block?).
MeasureOn = Callable[[BenchmarkRun, Runner, bool], BlockResult]


@dataclass(frozen=True)
class PairPlan:
    """How pairs are taken: ``first`` pairs at least; then, while the judge cannot tell, the
    count doubles within ``budget`` (``until_told`` False: stop at ``first``); with
    ``precision`` (a percent, ``--sme2-precision``), pairs until the interval is that narrow
    within ``precision_budget_s`` instead. ``lead``: the side that runs first in pair 0."""

    first: int = MIN_BLOCKS
    budget: PairBudget = PairBudget()
    until_told: bool = True
    precision: float | None = None
    precision_budget_s: float = PairBudget().seconds
    lead: str = BASE

    def __post_init__(self) -> None:
        if self.first < 2:
            raise Sme2Error(f"pairs need at least 2 blocks per side, got {self.first}")
        if self.lead not in (BASE, CANDIDATE):
            raise Sme2Error(f"a pair is led by {BASE!r} or {CANDIDATE!r}, not {self.lead!r}")


@dataclass
class Paired:
    """The blocks of each side, pair by pair (``base[i]`` beside ``candidate[i]``), how the
    doubling ended (None: not asked) and ``--sme2-precision``'s outcome (None: not asked)."""

    base: list[BlockResult] = field(default_factory=list)
    candidate: list[BlockResult] = field(default_factory=list)
    told: Told | None = None
    precision: Precision | None = None

    @property
    def pairs(self) -> Pairs:
        """The complete pairs' block values, with those that straddled two machine speeds."""
        return pairs_of(self.base, self.candidate)

    @property
    def spent(self) -> str:
        """What stopped the doubling short of a verdict (``the most pairs asked (40,
        --sme2-max-pairs)``), or ""."""
        return self.told.spent if self.told is not None else ""

    @property
    def stopped(self) -> str:
        """``"; stopped by ..."`` for a verdict's reason, or ""."""
        return f"; stopped by {self.spent}" if self.spent else ""


def take_pairs(base: Measure, candidate: Measure, judge: Callable[[Paired], Judgement],
               plan: PairPlan = PairPlan(), have: Paired | None = None) -> Paired:
    """Pairs of ``base`` and ``candidate`` blocks in ABBA order, as ``plan`` says; ``judge``
    gives the verdict the doubling waits for. ``have``: blocks already measured (the gate's
    first candidate block): an unfinished pair is finished first, in its order."""
    paired = have if have is not None else Paired()
    sides = {BASE: (paired.base, base), CANDIDATE: (paired.candidate, candidate)}
    other = CANDIDATE if plan.lead == BASE else BASE

    def one_pair() -> None:
        i = min(len(paired.base), len(paired.candidate))   # the pair to finish or begin
        order = (plan.lead, other) if i % 2 == 0 else (other, plan.lead)
        for side in order:
            blocks, measure = sides[side]
            if len(blocks) == i:
                blocks.append(measure(i))

    while len(paired.base) != len(paired.candidate):      # finish the pair begun
        one_pair()
    if plan.precision is not None:
        goal = Goal(plan.precision, plan.precision_budget_s).start()
        while len(paired.base) < plan.first or goal.more(paired.pairs):
            one_pair()
        paired.precision = goal.outcome(paired.pairs)
        return paired
    while len(paired.base) < plan.first:
        one_pair()
    if plan.until_told and not paired.base[0].emulated:   # emulated times: no verdict to seek
        paired.told = until_told(len(paired.base), one_pair, lambda: judge(paired),
                                 plan.budget)
    return paired


@dataclass(frozen=True)
class Interleaving:
    """How a comparison of two runners is taken: its pairs (``plan``), the speed-up's noise
    margin, the change "no change" rules out, who hears of every block as soon as it is
    measured, and how a block is measured."""

    plan: PairPlan = PairPlan()
    margin: float = DEFAULT_MARGIN
    threshold_pct: float = DEFAULT_THRESHOLD_PCT
    on_block: Callable[[BlockResult], None] | None = None
    # How one block is measured (None: run_benchmark with the comparison's settings; a
    # session's loop measures its own way).
    measure: MeasureOn | None = None


def run_comparison(run: BenchmarkRun, base: Runner, candidate: Runner, device: Device,
                   settings: BenchSettings, how: Interleaving = Interleaving()) -> Comparison:
    """``base`` and ``candidate`` in interleaved pairs of blocks on ``device``, compared: the
    speed-up, the outputs (the first pair's; an LLM's token ids), the verdict."""
    if base.info.name == candidate.info.name:
        raise Sme2Error(f"compare needs two different runners, got {base.info.name!r} twice")
    label = run.label or f"{run.model}-{run.dtype}-t{run.threads}"
    samples: dict[str, Path | None] = {}     # each side's evidence process, run once
    measured = [0]

    def default(block_run: BenchmarkRun, runner: Runner, first: bool) -> BlockResult:
        # --sme2-reexport means one fresh export per comparison, not one per block.
        return run_benchmark(block_run, runner, device,
                             settings if first else replace(settings, reexport=False))

    def side(runner: Runner) -> Measure:
        def block(i: int) -> BlockResult:
            name = runner.info.name
            block_run = replace(run, label=f"{label}[{name}#{i}]", block=i, benchmark=label,
                                save_outputs=(i == 0), kernel_sample=samples.get(name))
            result = (how.measure or default)(block_run, runner, measured[0] == 0)
            measured[0] += 1
            sampled = result.context.kernel_sample
            samples.setdefault(name, Path(sampled) if sampled else None)
            if how.on_block:
                how.on_block(result)
            return result
        return block

    def judge(paired: Paired) -> Judgement:
        return make_comparison(paired.base, paired.candidate, margin=how.margin,
                               threshold_pct=how.threshold_pct).judgement

    paired = take_pairs(side(base), side(candidate), judge, how.plan)
    a, b = paired.base, paired.candidate
    outputs = None
    if a[0].context.outputs and b[0].context.outputs:
        outputs = check_outputs(read_tensors(Path(a[0].context.outputs)),
                                read_tensors(Path(b[0].context.outputs)), run.dtype)
    elif a[0].generation is not None and b[0].generation is not None:
        outputs = check_tokens(a[0].generation, b[0].generation)   # the same token ids
    return replace(make_comparison(a, b, outputs, how.margin, nodeid=label,
                                   threshold_pct=how.threshold_pct),
                   stopped_by=paired.spent, precision=paired.precision)
