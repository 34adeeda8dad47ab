"""The one results schema: what a benchmark measured, and ``results.json`` (versioned)."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from pytest_sme2.analysis.latency import LatencyStats

RESULTS_SCHEMA = "pytest-sme2/results/1"


@dataclass
class BenchmarkResult:
    nodeid: str
    model: str
    dtype: str
    threads: int
    runner: dict[str, Any]          # RunnerInfo.to_dict(): name, kind, labels
    device: dict[str, Any]          # DeviceFacts.to_dict()
    runs: int
    warmup: int
    e2e_ms: list[float]             # timed runs, in order
    e2e: LatencyStats
    etdump: str
    pte: str
    export_key: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def runner_name(self) -> str:
        return self.runner["name"]

    @property
    def median_ms(self) -> float:
        return self.e2e.median_ms

    @property
    def categories_ms(self) -> dict[str, float]:
        """Mean ms per timed run by operator category (sums to ``e2e.mean_ms``)."""
        return self.extra.get("categories_ms", {})

    @property
    def operators(self) -> list[dict[str, Any]]:
        return self.extra.get("operators", [])

    @property
    def kernel_evidence(self) -> dict[str, Any]:
        return self.extra.get("kernel_evidence", {})

    def to_json(self) -> dict[str, Any]:
        return {
            "nodeid": self.nodeid, "model": self.model, "dtype": self.dtype,
            "threads": self.threads, "runner": self.runner_name,
            "runner_info": self.runner, "device": self.device,
            "runs": self.runs, "warmup": self.warmup, "e2e_ms": self.e2e_ms,
            "median_ms": self.e2e.median_ms, "p90_ms": self.e2e.p90_ms,
            "cv_pct": self.e2e.cv_pct, "e2e": self.e2e.to_dict(),
            "etdump": self.etdump, "pte": self.pte, "export_key": self.export_key,
            **self.extra,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "BenchmarkResult":
        known = {"nodeid", "model", "dtype", "threads", "runner", "runner_info", "device", "runs",
                 "warmup", "e2e_ms", "median_ms", "p90_ms", "cv_pct", "e2e", "etdump", "pte",
                 "export_key"}
        return cls(nodeid=d["nodeid"], model=d["model"], dtype=d["dtype"], threads=d["threads"],
                   runner=d.get("runner_info") or {"name": d["runner"]}, device=d["device"],
                   runs=d["runs"], warmup=d["warmup"], e2e_ms=list(d["e2e_ms"]),
                   e2e=LatencyStats(**d["e2e"]), etdump=d["etdump"], pte=d["pte"],
                   export_key=d.get("export_key", ""),
                   extra={k: v for k, v in d.items() if k not in known})


def atomic_write_text(path: Path, text: str) -> None:
    """Write via a temporary file and rename: readers see the old or the new file, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def results_document(results: Iterable[BenchmarkResult], comparisons: Iterable[Any] = (),
                     session: dict[str, Any] | None = None) -> dict[str, Any]:
    """The results.json document: ``session`` (configuration, versions), ``benchmarks`` (one
    per measured block) and ``comparisons`` (``Comparison.to_json()``)."""
    return {"schema": RESULTS_SCHEMA, "session": session or {},
            "benchmarks": [r.to_json() for r in results],
            "comparisons": [c if isinstance(c, dict) else c.to_json() for c in comparisons]}


def write_results(path: Path, results: Iterable[BenchmarkResult], comparisons: Iterable[Any] = (),
                  session: dict[str, Any] | None = None) -> None:
    doc = results_document(results, comparisons, session)
    atomic_write_text(path, json.dumps(doc, indent=2) + "\n")


_SLOT = "\0benchmarks\0"   # where the kept texts go in the document's layout


class ResultsWriter:
    """``results.json`` rewritten after every benchmark at the cost of what changed: each
    benchmark is laid out once and its text kept (the pure-Python indenting encoder took ~1 s of
    a 28-benchmark session, laying out every earlier benchmark again on each write). The file is
    byte-identical to :func:`write_results`'. A result must not change once written."""

    def __init__(self) -> None:
        self._kept: dict[int, tuple[BenchmarkResult, str]] = {}

    def _text(self, result: BenchmarkResult) -> str:
        kept = self._kept.get(id(result))
        if kept is None or kept[0] is not result:
            # As json.dumps(document, indent=2) lays out an element of a top-level list.
            kept = (result, json.dumps(result.to_json(), indent=2).replace("\n", "\n    "))
            self._kept[id(result)] = kept
        return kept[1]

    def text(self, results: Iterable[BenchmarkResult], comparisons: Iterable[Any] = (),
             session: dict[str, Any] | None = None) -> str:
        doc = results_document((), comparisons, session)
        items = [self._text(r) for r in results]
        doc["benchmarks"] = _SLOT if items else []
        text = json.dumps(doc, indent=2)
        if items:
            text = text.replace(json.dumps(_SLOT), "[\n    " + ",\n    ".join(items) + "\n  ]", 1)
        return text + "\n"

    def write(self, path: Path, results: Iterable[BenchmarkResult],
              comparisons: Iterable[Any] = (), session: dict[str, Any] | None = None) -> None:
        atomic_write_text(path, self.text(results, comparisons, session))
