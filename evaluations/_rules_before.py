"""The paired rule before issue 44, kept for before/after figures on the same blocks: the mean
of the pairs' log ratios with its t-interval, disturbed pairs screened out (at most one in
four: more than 4 robust scales and 5% from the others' median), the sign test beside it, and
the same four verdicts (``decide``). The library's rule now is ``pytest_sme2.api.judge_ab``
(Hodges-Lehmann with the signed-rank interval, pairs that straddled a machine speed left
out)."""

from __future__ import annotations

import math
from statistics import median

import numpy as np

import _common  # noqa: F401  (the repository root on sys.path)
from pytest_sme2.api import CANNOT_TELL, IMPROVEMENT, REGRESSION, Interval, decide, t_quantile

SCREEN_SCALES, SCREEN_LEAST, SIGN_ALPHA, MARGIN = 4.0, math.log(1.05), 0.05, 0.02


def t_slowdown(base, candidate) -> Interval:
    """candidate / base: exp of the mean log ratio and its t-interval."""
    logs = np.log(np.asarray(candidate, float) / np.asarray(base, float))
    mean = float(logs.mean())
    if logs.size < 2:
        return Interval(math.exp(mean), 0.0, math.inf)
    half = t_quantile(0.975, logs.size - 1) * float(logs.std(ddof=1)) / math.sqrt(logs.size)
    return Interval(math.exp(mean), math.exp(mean - half), math.exp(mean + half))


def screen(base, candidate) -> list[int]:
    logs = [math.log(c / b) for b, c in zip(base, candidate)]
    out: list[int] = []
    while len(out) < len(logs) // 4:
        kept = [i for i in range(len(logs)) if i not in out]
        centre = median(logs[i] for i in kept)
        worst = max(kept, key=lambda i: abs(logs[i] - centre))
        others = [logs[i] for i in kept if i != worst]
        middle = median(others)
        scale = 1.4826 * median(abs(x - middle) for x in others)
        if abs(logs[worst] - middle) <= max(SCREEN_SCALES * scale, SCREEN_LEAST):
            break
        out.append(worst)
    return out


def _agree(base, candidate, status: str) -> bool:
    up = status == REGRESSION
    n = len(base)
    k = sum((c / b > 1 + MARGIN) if up else (c / b < 1 / (1 + MARGIN))
            for b, c in zip(base, candidate))
    return sum(math.comb(n, j) for j in range(k, n + 1)) / 2 ** n < SIGN_ALPHA


def judge_before(base, candidate, threshold_pct: float) -> tuple[str, Interval]:
    """Issue 37's paired verdict and its interval (candidate / base)."""
    out = screen(base, candidate)
    keep = [i for i in range(len(base)) if i not in out]
    b = [base[i] for i in keep]
    c = [candidate[i] for i in keep]
    r = t_slowdown(b, c)
    status, _ = decide(r, threshold_pct)
    if status in (REGRESSION, IMPROVEMENT) and not _agree(b, c, status):
        status = CANNOT_TELL
    return status, r
