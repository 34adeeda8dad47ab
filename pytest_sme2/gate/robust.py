"""The stored-baseline rule that one bad session cannot blind (issue 24).

Today's rule (:func:`pytest_sme2.gate.levels.judge_levels`) learns its noise floor from the
spread of the baseline's session levels. With three sessions and one that ran under a CPU hog, that
spread — and Student's t with 2 degrees of freedom — made a floor of 52% at 1 thread: nothing
short of +52% could fail. This rule screens the sessions first:

- a session whose level lies further from the median of the *others* than
  ``max(OUTLIER_SCALES`` robust scales of the others (1.4826 x MAD of log levels),
  ``OUTLIER_LEAST)`` is an outlier; at most one session in three is left out, the worst first,
  and only an excursion (the next session agrees with the rest): a step to a new level, the
  newest session among them, is kept;
- the others are judged by today's rule unchanged (level, bootstrap interval, floor): the
  false-alarm rate stays today's, since fewer sessions never narrow the floor below its
  minimum (25% below 3 sessions);
- the verdict says so: ``noise floor 25% (52% with it) because session 3 ran 16% slow (left
  out)`` and, whenever the floor is wider than the threshold, suggests ``--sme2-gate-mode ab``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from pytest_sme2.gate.decide import floor_remedy
from pytest_sme2.stats import noise_floor

if TYPE_CHECKING:
    from pytest_sme2.results.judgement import Judgement

OUTLIER_SCALES = 4.0        # robust scales away from the others' median ...
OUTLIER_LEAST = math.log(1.10)   # ... and at least 10% away: ordinary drift stays in


@dataclass(frozen=True)
class Outlier:
    index: int          # 0-based session index
    pct: float          # how far its level lies from the others' median (+ = slower)

    def __str__(self) -> str:
        word = "slow" if self.pct > 0 else "fast"
        return f"session {self.index + 1} ran {abs(self.pct):.0f}% {word}"


def screen(sessions: Sequence[Sequence[float]]) -> list[Outlier]:
    """The sessions to leave out, worst first; at most one in three. Only an *excursion* is
    left out: a session the next one disagrees with. The newest session, or one the next
    session agrees with, may be a new level (a change accepted and re-recorded): kept, so
    the floor stays wide rather than the new level being judged against the old."""
    levels = [float(np.median(s)) for s in sessions if len(s)]
    if len(levels) < 3 or min(levels) <= 0:
        return []
    logs = np.log(levels)
    found: list[Outlier] = []
    left = list(range(len(logs)))
    while len(found) < len(levels) // 3:
        worst = None
        for k in left[:-1]:
            others = logs[[i for i in left if i != k]]
            centre = float(np.median(others))
            scale = 1.4826 * float(np.median(np.abs(others - centre)))
            bound = max(OUTLIER_SCALES * scale, OUTLIER_LEAST)
            dev = float(logs[k] - centre)
            after = float(logs[left[left.index(k) + 1]] - centre)
            if abs(dev) > bound and abs(after) <= bound and \
                    (worst is None or abs(dev) > abs(worst[1])):
                worst = (k, dev)
        if worst is None:
            break
        found.append(Outlier(worst[0], math.expm1(worst[1]) * 100))
        left.remove(worst[0])
    return found


def judge_robust(judge: Callable[..., Judgement], base_sessions: Sequence[Sequence[float]],
                 current: Sequence[float], threshold_pct: float, **kwargs) -> Judgement:
    """``judge`` (today's rule, :func:`pytest_sme2.gate.levels.judge_levels`: passed in, so the gate
    can call this without a circle) on the screened sessions, the reason for a wide floor
    said."""
    kept_idx = [i for i, s in enumerate(base_sessions) if len(s)]
    sessions = [base_sessions[i] for i in kept_idx]
    out = screen(sessions)
    gone = {o.index for o in out}
    kept = [s for i, s in enumerate(sessions) if i not in gone]
    j = judge(kept, current, threshold_pct, **kwargs)
    if j.noise_floor_pct is None:
        return j
    notes = []
    if out:
        full, _ = noise_floor(sessions)
        notes.append(f"noise floor {j.noise_floor_pct:.0f}% ({full * 100:.0f}% with it) "
                     f"because {', '.join(map(str, out))} (left out)")
    if j.noise_floor_pct > threshold_pct:
        notes.append(floor_remedy(j.noise_floor_pct, threshold_pct, j.measure))
    if not notes:
        return j
    return replace(j, reason=j.reason + "; " + "; ".join(notes))
