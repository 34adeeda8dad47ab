"""A session's results as every renderer reads them, built once: :class:`SessionView`.

The terminal summary, the GitHub step summary, pytest-benchmark's JSON, the llama-bench rows
and report.md all show the same benchmarks; each used to take the flat block list apart again.
A view groups the document once (:mod:`.grouping`: a test's benchmark, a comparison's two
sides, one :class:`~pytest_sme2.report.grouping.Side` each; report.md's units,
:mod:`.digest`), and each side pools its blocks once (:mod:`pytest_sme2.results.pooling`), on
first use, so a figure read by two renderers is one number.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Union

from pytest_sme2.report import digest
from pytest_sme2.report.grouping import (Side, benchmark_sides, comparison_record,
                                         device_labels, forward_and_generations,
                                         sides_per_device)
from pytest_sme2.results import (BlockResult, ComparisonRecord, ResultsDoc, SessionInfo,
                                 load_results)


@dataclass(eq=False)
class SessionView:
    """One results document, grouped once for every renderer."""

    doc: ResultsDoc

    @classmethod
    def of(cls, results: Iterable[BlockResult],
           comparisons: Iterable[ComparisonRecord | Mapping[str, Any]] = (),
           session: SessionInfo | None = None) -> SessionView:
        """The view of a session's records as it holds them (blocks, comparisons, and their
        JSON documents as they travel on a test report)."""
        return cls(ResultsDoc(session=session or SessionInfo(), benchmarks=list(results),
                              comparisons=[comparison_record(c) for c in comparisons]))

    @property
    def results(self) -> list[BlockResult]:
        return self.doc.benchmarks

    @property
    def comparisons(self) -> list[ComparisonRecord]:
        return self.doc.comparisons

    @cached_property
    def sides(self) -> list[Side]:
        """Each test's benchmark, then each comparison's two sides, as the summaries list
        them."""
        return benchmark_sides(self.results, self.comparisons)

    @cached_property
    def _kinds(self) -> tuple[list[Side], list[Side]]:
        return forward_and_generations(self.sides)

    @property
    def forward_sides(self) -> list[Side]:
        """:attr:`sides` that are forward passes: the latency tables' rows."""
        return self._kinds[0]

    @property
    def generation_sides(self) -> list[Side]:
        """:attr:`sides` that are LLM generations: the generation tables' rows."""
        return self._kinds[1]

    def per_device(self, sides: list[Side]) -> dict[str, list[Side]]:
        """``sides`` (all or a kind of them) per device, every device of the session in the
        order it first measured, even one without such a side."""
        return sides_per_device(sides, device_labels(self.results))

    @cached_property
    def units(self) -> list[digest.Unit]:
        """report.md's units: comparisons first, then the other benchmarks per point."""
        return digest.units(self.doc)


# What a renderer is given: the view built already, or what load_results reads.
Source = Union[SessionView, ResultsDoc, Mapping[str, Any], str, Path]


def view_of(source: Source) -> SessionView:
    """The view of ``source``: a view is returned as it is (the session builds one for every
    renderer); a document, or a results.json path, goes through the one loader."""
    return source if isinstance(source, SessionView) else SessionView(load_results(source))
