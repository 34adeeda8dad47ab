"""What a session puts in the history: a results.json (through the one loader) turned into one
:class:`SessionRecord` and one :class:`PointRecord` per benchmark key. Pure: no database."""

from __future__ import annotations

import hashlib
import json
import statistics
from dataclasses import dataclass, field, replace
from typing import Any

from pytest_sme2.baselines.key import BaselineKey, under_test_of
from pytest_sme2.results import (BlockResult, Judgement, ResultsDoc, block_phases, pool,
                                 pool_categories, pool_generation, pool_probe)
from pytest_sme2.results.generation import DECODE, PREFILL
from pytest_sme2.results.judgement import NOT_COMPARED



@dataclass(frozen=True)
class SessionRecord:
    uid: str                  # content hash: the same session imported twice is one row
    commit_sha: str | None
    branch: str | None
    time: str
    ci_run: str | None
    host: str | None
    versions: dict[str, str]
    source: str | None = None


@dataclass(frozen=True)
class PointRecord:
    key_digest: str
    key: dict[str, Any]
    device: str
    model: str
    dtype: str
    threads: int
    runner: str
    emulated: bool
    median_ms: float
    block_medians_ms: list[float]
    runs_ms: list[list[float]]       # one list per block
    under_test: dict[str, Any]
    instructions: float | None
    load_ms: float | None
    peak_rss_kb: float | None
    categories_ms: dict[str, float] = field(default_factory=dict)
    sme2: str = "unknown"
    export_key: str = ""
    executorch: str = ""
    gate: dict[str, Any] | None = None    # gate_of(): the verdict, when it was compared
    probe_us: float | None = None         # the machine-state probe's median over the blocks


@dataclass(frozen=True)
class SessionPoints:
    session: SessionRecord
    points: list[PointRecord]
    warnings: list[str]       # one line each: what was missing, and what was done instead


def session_uid(doc: ResultsDoc) -> str:
    """A hash of the document's content (key order ignored): every real session differs in its
    runs, so two identical documents are the same session."""
    canon = json.dumps(doc.to_json(), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canon.encode()).hexdigest()[:32]


def session_points(doc: ResultsDoc, source: str | None = None,
                   fallback_time: str | None = None) -> SessionPoints:
    identity = dict(doc.session.identity or {})
    warnings = []
    name = source or "the session"
    if not identity.get("commit"):
        warnings.append(f"{name}: no commit recorded; kept, placed by its time and shown as "
                        f"'unknown' in the history")
    time = identity.get("time") or fallback_time or "1970-01-01T00:00:00+00:00"
    if not identity.get("time"):
        warnings.append(f"{name}: no time recorded; placed at {time}")
    versions = {str(k): str(v) for k, v in (doc.session.versions or {}).items()}
    session = SessionRecord(uid=session_uid(doc), commit_sha=identity.get("commit") or None,
                            branch=identity.get("branch") or None, time=str(time),
                            ci_run=identity.get("ci_run") or None,
                            host=identity.get("host") or None, versions=versions,
                            source=source)
    return SessionPoints(session, [p for blocks in _by_key(doc).values()
                                   for p in points(blocks)], warnings)


def _by_key(doc: ResultsDoc) -> dict[str, list[BlockResult]]:
    groups: dict[str, list[BlockResult]] = {}
    for r in doc.benchmarks:
        groups.setdefault(BaselineKey.from_result(r).digest, []).append(r)
    return groups


def point(blocks: list[BlockResult]) -> PointRecord:
    """One key's blocks of one session, pooled (the gate pools them the same way)."""
    first = blocks[0]
    key = BaselineKey.from_result(first)
    pooled = pool(blocks)
    startup = first.startup
    evidence = first.kernel_evidence
    counted = [b.instructions_per_execute for b in blocks if b.instructions_per_execute]
    return PointRecord(
        key_digest=key.digest, key=key.to_dict(), device=first.device_label, model=first.model,
        dtype=first.dtype, threads=int(first.threads), runner=first.runner_name,
        emulated=first.emulated, median_ms=pooled.median_ms,
        block_medians_ms=list(pooled.block_medians_ms),
        runs_ms=[list(b.e2e_ms) for b in blocks],
        under_test=under_test_of(first).to_dict(),
        instructions=statistics.median(counted) if counted else None,
        load_ms=startup.load_ms if startup else None,
        peak_rss_kb=startup.peak_rss_kb if startup else None,
        categories_ms=pool_categories(blocks),
        sme2=str(evidence.sme2) if evidence else "unknown",
        export_key=first.export_key,
        executorch=str(first.device.executorch or ""), gate=gate_of(first.judgement),
        probe_us=_rounded(pool_probe(blocks)))


def _rounded(level: float | None) -> float | None:
    return round(level, 3) if level is not None else None


def gate_of(j: Judgement | None) -> dict[str, Any] | None:
    """What the history keeps of the gate's verdict: its status ("cannot_tell" included),
    ratio and interval, and the pairs behind a paired verdict."""
    if j is None or j.ratio is None or j.status == NOT_COMPARED:
        return None
    out: dict[str, Any] = {"status": j.status, "ratio": j.ratio.point, "low": j.ratio.low,
                           "high": j.ratio.high, "threshold_pct": j.threshold_pct}
    if j.against != "baseline":
        out["pairs"] = j.current_blocks
    return out


# -- an LLM measured as a generation: a series per phase --------------------------------------

PHASE_KEY = "phase"       # in a point's key: which phase of a generation its series follows


def phase_of(key: dict[str, Any]) -> str | None:
    """The generation phase a point's key follows (None: a forward pass)."""
    phase = key.get(PHASE_KEY) if isinstance(key, dict) else None
    return str(phase) if phase else None


def points(blocks: list[BlockResult]) -> list[PointRecord]:
    """One key's blocks of one session as points: one, or for an LLM measured as a generation
    three series: decode time per token (the blocks' own figures, under the gate's key, so
    history baselines still judge it), prefill time per generation and time to first token
    (each under the key plus its phase: ``PointRecord.key["phase"]``). Prefill's and TTFT's
    points are the blocks' medians (results.json keeps no per-generation times of them); the
    decode point's instructions are per decode token, the prefill point's per prefill
    (--sme2-measure instructions)."""
    main = point(blocks)
    generation = pool_generation(blocks)
    if generation is None:
        return [main]
    out = [replace(main, key={**main.key, PHASE_KEY: DECODE})]
    counted = [b.instructions.prefill for b in blocks
               if b.instructions is not None and b.instructions.prefill]
    for phase, kept in block_phases(blocks).items():
        key = {**main.key, PHASE_KEY: phase}
        canon = json.dumps(key, sort_keys=True, separators=(",", ":"))
        out.append(replace(main, key_digest=hashlib.sha256(canon.encode()).hexdigest()[:16],
                           key=key, median_ms=statistics.median(kept),
                           block_medians_ms=kept, runs_ms=[[v] for v in kept],
                           instructions=(statistics.median(counted)
                                         if phase == PREFILL and counted else None),
                           gate=gate_of((blocks[0].phase_judgements or {}).get(phase)),
                           categories_ms=(generation.prefill.categories_ms
                                          if phase == PREFILL else {})))
    return out

