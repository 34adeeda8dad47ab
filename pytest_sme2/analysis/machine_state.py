"""The machine's speed, as the probe saw it, and the speeds a set of times fell into.

Why: a shared VM (two vCPUs on one core's resources) runs the same program at two speeds 1.8x
apart, each for seconds; a phone migrates a thread to a little core, steps its clock, throttles.
Steal time does not show it. What does is a fixed workload of the same kind as the models — a
16x128x128 fp32 GEMM through XNNPACK (``machine_probe``) — timed in each block's own process
right before its first run and right after its last (a canary, as MongoDB's performance CI runs
one): it moves with the machine and never with the code under test. Measured on this kind of
VM (docs/measurements/machine-state.md): its time tracks toy_cnn's (correlation 0.78 over
half-second windows); a scalar loop's does not (-0.04).

Three uses, all pure functions here:

- :func:`find_modes`: the speeds a set of values fell into (a block's runs, a benchmark's
  blocks, the session's probe times) — reported, never averaged away;
- :func:`straddle`: whether two blocks ran at different machine speeds (or the machine moved
  during one): such a pair measures the machine, and the paired rule leaves it out;
- :func:`session_states`: the session's machine states, each block's probe placed in one.
"""

from __future__ import annotations

import math
from statistics import median
from typing import Hashable, Iterable, Sequence

import numpy as np

from pytest_sme2.results.block import BlockResult
from pytest_sme2.results.machine import MachineStates, Mode, ProbeReading

# The probe's workload (models/machine_probe.py), exported in fp32 like any model.
PROBE_MODEL = "machine_probe"
# Two probe times further apart than this ratio are two machine speeds: the probe's own noise
# between blocks of one speed stays within it (docs/measurements/machine-state.md).
STRADDLE = 1.15
# What makes values fall into separate speeds: centres at least this ratio apart, ...
MODE_RATIO = 1.15
# ... each speed holding at least this share and count of the values, ...
MODE_SHARE = 0.15
MODE_COUNT = 3
# ... and cleanly apart: Ashman's D (the gap between the centres over their spreads) at least 2.
MODE_SEPARATION = 2.0
MOST_MODES = 3


def _split(logs: np.ndarray, total: int) -> int | None:
    """Where to cut sorted ``logs`` in two — the cut with the least within-group variance —
    if the two groups are separate speeds by the rules above (``total``: how many values all
    groups hold, the base of a speed's share); None otherwise."""
    n = logs.size
    if n < 2:
        return None
    csum, csq = np.cumsum(logs), np.cumsum(logs ** 2)
    k = np.arange(1, n)
    left = csq[:-1] - csum[:-1] ** 2 / k
    right = (csq[-1] - csq[:-1]) - (csum[-1] - csum[:-1]) ** 2 / (n - k)
    cut = int(np.argmin(left + right)) + 1
    a, b = logs[:cut], logs[cut:]
    if min(a.size, b.size) < max(MODE_COUNT, MODE_SHARE * total):
        return None
    if math.exp(float(np.median(b)) - float(np.median(a))) < MODE_RATIO:
        return None
    spread = math.sqrt(float(a.var()) + float(b.var()))
    if spread > 0 and math.sqrt(2) * (b.mean() - a.mean()) / spread < MODE_SEPARATION:
        return None
    return cut


def find_modes(values: Iterable[float]) -> tuple[Mode, ...]:
    """The speeds ``values`` (times, positive) fell into, fastest first: one mode when they
    fell into one; up to :data:`MOST_MODES`. Empty for no values."""
    x = np.sort(np.asarray([v for v in values if v > 0], dtype=float))
    if x.size == 0:
        return ()
    groups = [np.log(x)]
    while len(groups) < MOST_MODES:
        for i, g in enumerate(groups):
            cut = _split(g, x.size)
            if cut is not None:
                groups[i:i + 1] = [g[:cut], g[cut:]]
                break
        else:
            break
    n = x.size
    return tuple(Mode(math.exp(float(np.median(g))), g.size / n, int(g.size)) for g in groups)


_WORDS = {2: "two", 3: "three"}


def describe_modes(modes: Sequence[Mode], unit: str = "ms", digits: int = 3) -> str:
    """``two speeds: 62% at 0.107 ms, 38% at 0.190 ms (1.8x)``; "" for one speed."""
    if len(modes) < 2:
        return ""
    parts = ", ".join(f"{m.share:.0%} at {m.centre:.{digits}f} {unit}" for m in modes)
    spread = modes[-1].centre / modes[0].centre
    return f"{_WORDS.get(len(modes), len(modes))} speeds: {parts} ({spread:.1f}x)"


def typical_levels(readings: Sequence[ProbeReading | None],
                   groups: Sequence[Hashable]) -> list[float | None]:
    """Each reading's group's typical probe time (the median of the group's), None where not
    probed. The probe's own time depends on who times it — the Python runtime adds its
    binding's microseconds to every execute, two threads split the GEMM — so a machine's
    speed is read against the same runner's, at the same threads, on the same device."""
    by: dict[Hashable, list[float]] = {}
    for r, g in zip(readings, groups):
        if r is not None and r.before_us:
            by.setdefault(g, []).append(r.level)
    typical = {g: float(median(v)) for g, v in by.items()}
    return [typical[g] if r is not None and r.before_us else None
            for r, g in zip(readings, groups)]


def straddle(a: ProbeReading | None, b: ProbeReading | None, scale_a: float = 1.0,
             scale_b: float = 1.0) -> float | None:
    """How far apart the machine's speed was across two blocks (a pair) — between their probe
    times, each over its own runner's typical one (``scale``: :func:`typical_levels`), or
    within either block — when past :data:`STRADDLE`; None when both ran at one speed, or a
    block was not probed."""
    if a is None or b is None or not (a.before_us and b.before_us):
        return None
    la, lb = a.level / scale_a, b.level / scale_b
    ratio = max(la, lb) / min(la, lb) if min(la, lb) > 0 else 1.0
    worst = max(ratio, a.moved, b.moved)
    return worst if worst > STRADDLE else None


def session_states(readings: Sequence[ProbeReading | None],
                   groups: Sequence[Hashable] | None = None, note: str = "") -> MachineStates:
    """The session's machine states from its blocks' probe readings (None: not probed), each
    over its group's typical probe time (``groups``: who timed it, see :func:`typical_levels`;
    None: one group): a state's centre is relative, 1.0 the typical speed. Each reading's
    ``state`` is set to its nearest speed (None when the machine moved during it)."""
    groups = list(groups) if groups is not None else [0] * len(readings)
    scales = typical_levels(readings, groups)
    probed = [(r, s) for r, s in zip(readings, scales) if r is not None and s]
    if not probed:
        return MachineStates(note=note)
    states = find_modes(r.level / s for r, s in probed)
    moved = 0
    for r, s in probed:
        if r.moved > STRADDLE:
            r.state, moved = None, moved + 1
            continue
        r.state = min(range(len(states)),
                      key=lambda i: abs(math.log(r.level / s / states[i].centre)))
    return MachineStates(probed=len(probed), states=states, moved=moved, note=note)


def describe_states(machine: MachineStates) -> str:
    """The session's one line: ``the machine changed speed (40 blocks probed): two speeds 1.8x
    apart: 70% at the fastest, 30% of blocks at 1.80x the fastest's probe time; 3 block(s)
    saw it move during their runs``; "" when it held one speed (or a note: why nothing was
    probed)."""
    if not machine.probed:
        return machine.note
    moved = (f"; {machine.moved} block(s) saw it move during their runs"
             if machine.moved else "")
    if not machine.changed_speed:
        return f"the machine held one speed{moved}" if moved else ""
    states = machine.states
    shares = ", ".join(f"{m.share:.0%} of blocks at {m.centre / states[0].centre:.2f}x the "
                       "fastest's probe time" if i else f"{m.share:.0%} at the fastest"
                       for i, m in enumerate(states))
    spread = states[-1].centre / states[0].centre
    return (f"the machine changed speed ({machine.probed} blocks probed): "
            f"{_WORDS.get(len(states), len(states))} speeds {spread:.1f}x apart: {shares}{moved}")




def mixture_note(modes: Sequence[Mode], what: str = "runs", unit: str = "ms") -> str:
    """``its runs fell into two speeds: 62% at 0.107 ms, 38% at 0.190 ms (1.8x): its median
    is a mixture's``; "" for one speed."""
    text = describe_modes(modes, unit)
    return f"its {what} fell into {text}: its median is a mixture's" if text else ""


def moved_note(probe: ProbeReading | None) -> str:
    """``the machine's speed moved 1.6x during its runs (probe 14.0 -> 22.4 us)``, or ""."""
    if probe is None or not probe.before_us or probe.moved <= STRADDLE:
        return ""
    return (f"the machine's speed moved {probe.moved:.1f}x during its runs (probe "
            f"{probe.before:.1f} -> {probe.after:.1f} us)")


def machine_of(results: Sequence[BlockResult]) -> MachineStates:
    """The session's machine states from its blocks, with why nothing was probed when
    nothing was."""
    readings = [r.probe for r in results]
    groups = [(r.runner_name, r.threads, r.device_label) for r in results]
    note = ""
    if results and all(r.emulated for r in results):
        note = ("the machine-state probe does not run on an emulated CPU: its speed says "
                "nothing about a real one's")
    elif results and not any(readings):
        note = ("no block was probed (--sme2-probe off, or runners that cannot time the probe "
                "in their own process): the machine's speed was not watched")
    return session_states(readings, groups, note)
