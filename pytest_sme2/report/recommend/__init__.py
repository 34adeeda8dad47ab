"""Recommendations derived from a results document, each citing the figure it comes from.

``recommendations(doc)`` returns them most urgent first: outputs that differ (the speed-up is
not like for like), comparisons that went the wrong way or nowhere, which kernels each LLM
scheme ran per phase, operators left outside the delegate, the data movement that surfaces once
convolution and GEMM get faster, framework overhead, unclassified operators, weak kernel
evidence, and noise. Every rule reads the document through :mod:`pytest_sme2.report.digest`, so
the figures match the report's tables.

The rules are grouped by theme (:mod:`.cases`, :mod:`.generation`, :mod:`.operators`,
:mod:`.movement`, :mod:`.runtime`), their thresholds and advice tables apart (:mod:`.advice`),
their shared wording in :mod:`.wording`.

Wording rule: nothing here says SME2 *did* something beyond the kernel-evidence verdict; a
speed-up is attributed to the candidate runner, not to SME2.
"""

from __future__ import annotations

from typing import Any, Callable

from pytest_sme2.report.digest import Unit, units
from pytest_sme2.report.recommend.cases import (find_direction, find_evidence,
                                                find_low_compute_speedup, find_other_ops,
                                                find_outputs)
from pytest_sme2.report.recommend.generation import find_generation_kernels
from pytest_sme2.report.recommend.movement import find_data_movement
from pytest_sme2.report.recommend.operators import find_portable_ops
from pytest_sme2.report.recommend.runtime import find_noise, find_overhead
from pytest_sme2.report.recommend.wording import Recommendation
from pytest_sme2.results import ResultsDoc, load_results

# The rules, most urgent first: each sees one case, or every case at once (a finding said once
# for all the cases it is in).
PER_CASE, ACROSS_CASES = "per case", "across cases"
RULES: tuple[tuple[Callable[[Any], list[Recommendation]], str], ...] = (
    (find_outputs, PER_CASE), (find_direction, PER_CASE),
    (find_generation_kernels, ACROSS_CASES), (find_portable_ops, ACROSS_CASES),
    (find_data_movement, ACROSS_CASES), (find_low_compute_speedup, PER_CASE),
    (find_overhead, ACROSS_CASES), (find_other_ops, PER_CASE), (find_evidence, PER_CASE),
    (find_noise, ACROSS_CASES))


def recommendations(doc: ResultsDoc | dict[str, Any],
                    us: list[Unit] | None = None) -> list[Recommendation]:
    """``us``: the document's units when the caller has them already."""
    out: list[Recommendation] = []
    us = units(load_results(doc)) if us is None else us
    for rule, scope in RULES:
        if scope == ACROSS_CASES:
            out.extend(rule(us))
        else:
            for unit in us:
                out.extend(rule(unit))
    return out


__all__ = ["Recommendation", "recommendations"]
