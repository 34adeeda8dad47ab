"""The machine's speed in the outputs: what a benchmark's line adds when its runs fell into
several speeds or the machine moved during them, what a comparison adds when pairs straddled
two speeds or a side's blocks fell into several, and the session's one line. The analysis is
:mod:`pytest_sme2.analysis.machine_state`; this module only words it."""

from __future__ import annotations

from collections.abc import Iterable

from pytest_sme2.analysis.machine_state import (describe_modes, describe_states, find_modes,
                                                machine_of, mixture_note, moved_note)
from pytest_sme2.results import BlockResult, ComparisonRecord


def block_notes(r: BlockResult) -> list[str]:
    """What the machine did to one block: its runs' speeds, the probe's move, the session's
    own work beside it."""
    beside = r.context.beside or []
    ran = (f"ran beside {len(beside)} of this session's own processes: {beside[0]}"
           + (f" and {len(beside) - 1} more" if len(beside) > 1 else "")) if beside else ""
    return [n for n in (mixture_note(r.modes), moved_note(r.probe), ran) if n]


def mixed(blocks: Iterable[BlockResult]) -> bool:
    """A benchmark's runs (in any block) or its blocks fell into several speeds: its pooled
    median is a mixture's."""
    blocks = list(blocks)
    return any(b.modes for b in blocks) or len(find_modes(b.median_ms for b in blocks)) > 1


def comparison_notes(c: ComparisonRecord) -> list[str]:
    """``14 of 40 pairs ran their two blocks at machine speeds 1.8x apart: left out``, and
    each side whose blocks fell into several speeds (judged pair by pair, at one speed
    each)."""
    out = []
    n = len(c.base_block_medians_ms)
    if c.straddled_pairs:
        out.append(f"{len(c.straddled_pairs)} of {n} pairs ran their two blocks at machine "
                   f"speeds {c.machine_switch:.1f}x apart (the probe saw it): left out of the "
                   "verdict")
    for side, medians in ((c.base, c.base_block_medians_ms),
                          (c.candidate, c.candidate_block_medians_ms)):
        text = describe_modes(find_modes(medians))
        if text:
            out.append(f"{side}'s blocks fell into {text}; each pair is judged at its own "
                       "speed, so the speed-up holds; a median over all the blocks would not")
    base, cand, s = c.base_median_ms, c.candidate_median_ms, c.speedup.point
    if base > 0 and cand > 0 and (base / cand - 1) * (s - 1) < 0 and abs(s - 1) > c.margin:
        out.append(f"the medians ({base:.4g} -> {cand:.4g} ms) point the other way from the "
                   f"speed-up ({s:.3f}x): believe the speed-up, made pair by pair from blocks "
                   "measured back to back; medians pool blocks measured minutes apart")
    return out


def session_lines(results: Iterable[BlockResult]) -> list[str]:
    """The session's one line when the machine changed speed, or was not watched; none when
    it held one speed. And one when blocks ran beside the session's own work."""
    results = list(results)
    line = describe_states(machine_of(results))
    out = [f"sme2: {line}"] if line else []
    beside = [r for r in results if r.context.beside]
    if beside:
        out.append(f"sme2: {len(beside)} of {len(results)} blocks ran beside this session's own "
                   "processes on this machine (exports, a fork server, another worker's "
                   "block): their lines and results.json's 'beside' name them")
    return out


def report_lines(results: Iterable[BlockResult],
                 comparisons: Iterable[ComparisonRecord]) -> list[str]:
    """report.md's Machine State: the session's line, then every benchmark whose runs fell
    into several speeds or saw the machine move, and every comparison the machine swung;
    nothing when the machine held one speed throughout."""
    results = list(results)
    out = [describe_states(machine_of(results))]
    for r in results:
        for note in block_notes(r):
            out.append(f"{r.name} ({r.runner_name}): {note}")
    for c in comparisons:
        out += [f"{c.name}: {note}" for note in comparison_notes(c)]
    return [line for line in out if line]
