"""Recommendations derived from a results document, each citing the figure it comes from.

``recommendations(doc)`` returns them most urgent first: outputs that differ (the speed-up is
not like for like), comparisons that went the wrong way or nowhere, which kernels each LLM
scheme ran per phase, operators left outside the delegate, the data movement that surfaces once
convolution and GEMM get faster, framework overhead, unclassified operators, weak kernel
evidence, and noise. Every rule reads the document through :mod:`pytest_sme2.report.digest`, so
the figures match the report's tables.

The rules are grouped by theme (:mod:`.cases`: one case at a time; :mod:`.scheme_kernels`: an
LLM scheme's kernels; :mod:`.graph`: operators outside the delegate and data movement;
:mod:`.runtime`: framework overhead and noise), their thresholds and advice tables apart
(:mod:`.advice`), their shared wording in :mod:`.wording`.

Wording rule: nothing here says SME2 *did* something beyond the kernel-evidence verdict; a
speed-up is attributed to the candidate runner, not to SME2.
"""

from __future__ import annotations

from typing import Any, Callable

from pytest_sme2.report.digest import Unit
from pytest_sme2.report.view import Source, view_of
from pytest_sme2.report.recommend.cases import (find_direction, find_evidence,
                                                find_low_compute_speedup, find_other_ops,
                                                find_outputs)
from pytest_sme2.report.recommend.scheme_kernels import find_generation_kernels
from pytest_sme2.report.recommend.graph import find_data_movement, find_portable_ops
from pytest_sme2.report.recommend.runtime import find_noise, find_overhead
from pytest_sme2.report.recommend.wording import Recommendation

# The rules, most urgent first: each sees one case, or every case at once (a finding said once
# for all the cases it is in); a rule that reads times (speed-ups, shares of E2E, CVs) never
# sees a case measured on an emulated CPU, whose times say nothing about speed.
PER_CASE, ACROSS_CASES = "per case", "across cases"
READS_TIMES, NOT_TIMES = True, False
RULES: tuple[tuple[Callable[[Any], list[Recommendation]], str, bool], ...] = (
    (find_outputs, PER_CASE, NOT_TIMES), (find_direction, PER_CASE, READS_TIMES),
    (find_generation_kernels, ACROSS_CASES, NOT_TIMES),
    (find_portable_ops, ACROSS_CASES, READS_TIMES),
    (find_data_movement, ACROSS_CASES, READS_TIMES),
    (find_low_compute_speedup, PER_CASE, READS_TIMES),
    (find_overhead, ACROSS_CASES, READS_TIMES), (find_other_ops, PER_CASE, READS_TIMES),
    (find_evidence, PER_CASE, NOT_TIMES), (find_noise, ACROSS_CASES, READS_TIMES))


def recommendations(source: Source, us: list[Unit] | None = None) -> list[Recommendation]:
    """What to do next, for the view's units (``us``: only these, e.g. one benchmark's page)."""
    out: list[Recommendation] = []
    us = view_of(source).units if us is None else us
    timed = [u for u in us if not u.emulated]
    for rule, scope, reads_times in RULES:
        seen = timed if reads_times else us
        if scope == ACROSS_CASES:
            out.extend(rule(seen))
        else:
            for unit in seen:
                out.extend(rule(unit))
    return out


__all__ = ["Recommendation", "recommendations"]
