"""The search, apart from git and measuring: commits are indices ``0..last`` (0 the known good
end, ``last`` the known bad one); a probe says which side a commit is on. Pure, so that its
order and its end (a culprit, skipped commits around it, or "cannot tell") are tested alone.

- :func:`next_probe`: the commit nearest the middle of the open range that is not skipped (ties
  to the older), as ``git bisect`` picks one beside a skipped commit.
- :func:`bisect_range`: the binary search to one step (``lo`` good, ``hi`` bad, adjacent but for
  skipped commits), or an unclear end when a probe cannot tell.
- :func:`find_steps`: each step in a range — after a culprit, the sub-ranges on either side
  whose ends still differ are searched too, up to ``most`` steps.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

GOOD = "good"           # on the good end's side of the step
BAD = "bad"             # on the bad end's side
SKIP = "skip"           # could not be exported, built or run: never a culprit
UNCLEAR = "unclear"     # the probe's comparisons could not tell


@dataclass(frozen=True)
class Step:
    """Where a search ended: ``lo`` the last good commit, ``hi`` the first bad one (the
    culprit), ``skipped`` the skipped commits between them (then the culprit is one of those
    or ``hi``); ``unclear``: the probe at ``hi`` could not tell, and the step lies in
    ``lo..hi``'s range unresolved."""

    lo: int
    hi: int
    skipped: tuple[int, ...] = ()
    unclear: int | None = None


def next_probe(lo: int, hi: int, skipped: set[int] | frozenset[int]) -> int | None:
    """The commit to probe in ``lo..hi`` (both ends excluded), None when none is left."""
    left = [i for i in range(lo + 1, hi) if i not in skipped]
    if not left:
        return None
    middle = (lo + hi) / 2
    return min(left, key=lambda i: (abs(i - middle), i))


def bisect_range(lo: int, hi: int, probe: Callable[[int, int, int], str],
                 skipped: set[int] | None = None) -> Step:
    """Binary search ``lo..hi`` (``lo`` good, ``hi`` bad) with ``probe(commit, lo, hi)``
    saying GOOD, BAD, SKIP or UNCLEAR; ``skipped`` gathers the skipped commits."""
    skipped = set() if skipped is None else skipped
    while True:
        m = next_probe(lo, hi, skipped)
        if m is None:
            return Step(lo, hi, tuple(sorted(i for i in skipped if lo < i < hi)))
        side = probe(m, lo, hi)
        if side == SKIP:
            skipped.add(m)
        elif side == GOOD:
            lo = m
        elif side == BAD:
            hi = m
        else:
            return Step(lo, hi, tuple(sorted(i for i in skipped if lo < i < hi)), unclear=m)


@dataclass
class Steps:
    """Every step :func:`find_steps` found, oldest first, and the commits it skipped."""

    steps: list[Step] = field(default_factory=list)
    skipped: set[int] = field(default_factory=set)
    unchecked: list[tuple[int, int]] = field(default_factory=list)   # past ``most``


def find_steps(last: int, probe: Callable[[int, int, int], str],
               ends_differ: Callable[[int, int], bool], most: int = 3) -> Steps:
    """The steps in ``0..last`` (its ends known to differ): bisect to one, then search each
    side's sub-range (``0..step.lo``, ``step.hi..last``) whose ends ``ends_differ`` says still
    differ, up to ``most`` steps; ranges left over are listed in ``unchecked``."""
    out = Steps()
    todo = [(0, last)]
    while todo:
        lo, hi = todo.pop(0)
        if len(out.steps) >= most:
            out.unchecked.append((lo, hi))
            continue
        step = bisect_range(lo, hi, probe, out.skipped)
        out.steps.append(step)
        if step.unclear is not None:
            continue
        for a, b in ((lo, step.lo), (step.hi, hi)):
            if b - a >= 1 and ends_differ(a, b):
                todo.append((a, b))
    out.steps.sort(key=lambda s: s.hi)
    return out


def expected_probes(commits: int) -> int:
    """Probes a binary search over ``commits`` commits takes: ceil(log2(commits + 1))."""
    n, probes = commits, 0
    while n > 0:
        n //= 2
        probes += 1
    return max(probes, 1)
