"""Stored baselines: one JSON file per :class:`~pytest_sme2.baselines.key.BaselineKey` keeping
the last N *sessions* of raw per-run samples, grouped by *block* (one runner process), each
with what was under test when it was recorded.

The file is written for ``git diff``: sorted keys, indent 2, every sample list on one line,
newest session last. Saving holds a lock on the folder and replaces the file atomically.

Schema ``pytest-sme2/baseline/2``. Files of schema 1 (whose key also held the export hash and
the runner's build labels) are migrated when read: their key moves to the session's under-test
record, and every schema-1 file of one benchmark whose migrated key matches joins one history.
``--save-baseline`` writes it as one schema-2 file and removes the schema-1 files it merged.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from statistics import median
from typing import Any, Iterable, Sequence

from pytest_sme2.baselines import programs as base_programs
from pytest_sme2.baselines.key import MEASURE_TIME, BaselineKey, under_test_of
from pytest_sme2.errors import Sme2Error
from pytest_sme2._util.checkout import head_commit
from pytest_sme2._util.locking import folder_lock
from pytest_sme2.results import (BlockResult, DeviceFacts, UnderTest, atomic_write_text,
                                 block_phases, probe_levels)
from pytest_sme2.results.codec import added, encode
from pytest_sme2.results.device import sme_class
from pytest_sme2.results.generation import PREFILL, TTFT
from pytest_sme2._util.versions import package_version

SCHEMA = "pytest-sme2/baseline/2"
SCHEMA_V1 = "pytest-sme2/baseline/1"
SCHEMA_PREFIX = "pytest-sme2/baseline/"
DEFAULT_KEEP = 10                 # sessions kept per file
_FIX = "delete it or re-record it with --save-baseline"


class BaselineError(Sme2Error):
    """A baseline file that cannot be used; the message names the file and the fix."""


@dataclass
class Session:
    """One pytest session's measurements of one key: one sample list per block (process)."""

    timestamp: str
    blocks: list[list[float]]
    git_commit: str | None = None
    versions: dict[str, str] = field(default_factory=dict)
    device: DeviceFacts = field(default_factory=DeviceFacts)   # where the session ran
    categories_ms: list[dict[str, float]] = field(default_factory=list)  # per block
    session_id: str | None = None
    under_test: UnderTest = field(default_factory=UnderTest)
    # One value per cold runner process (pytest_sme2.results.Startup): load time and peak
    # resident memory, judged by the gate like the blocks; empty in files from before them.
    load_ms: list[float] = field(default_factory=list, metadata=added())
    peak_rss_kb: list[float] = field(default_factory=list, metadata=added())
    # An LLM's blocks (generations): each block's prefill time and time to first token (ms,
    # medians over its generations), judged like the blocks (its decode steps); else empty.
    prefill_ms: list[float] = field(default_factory=list, metadata=added())
    ttft_ms: list[float] = field(default_factory=list, metadata=added())
    # An LLM's instruction baseline (measure "instructions"): each block's instructions per
    # prefill; its ``blocks`` hold the instructions per decode token.
    prefill_instructions: list[float] = field(default_factory=list, metadata=added())
    # The machine-state probe's time (µs) of each probed block: the machine's speed when the
    # baseline was recorded (pytest_sme2.analysis.machine_state); empty when not probed.
    probe_us: list[float] = field(default_factory=list, metadata=added())

    @property
    def block_medians(self) -> list[float]:
        return [float(median(b)) for b in self.blocks]

    @property
    def median_ms(self) -> float:
        """Median of the block medians: a block is the unit, not a run."""
        return float(median(self.block_medians))

    def to_json(self) -> dict[str, Any]:
        """The fields, and each block's median and their median beside them (written for a
        reader of the file; :func:`dumps` sorts the keys)."""
        return {**encode(self), "block_medians": [round(m, 6) for m in self.block_medians],
                "median_ms": round(self.median_ms, 6)}


@dataclass
class Baseline:
    key: BaselineKey
    sessions: list[Session]
    path: Path | None = None
    migrated: list[Path] = field(default_factory=list)   # schema-1 files read into this one

    @property
    def median_ms(self) -> float:
        return float(median([s.median_ms for s in self.sessions]))

    @property
    def under_test(self) -> UnderTest | None:
        """What the newest session measured: "changed since baseline" is relative to it."""
        return self.sessions[-1].under_test if self.sessions else None

    def excluding(self, session_id: str | None) -> Baseline:
        """Without the session being recorded right now (never judge a session by itself)."""
        if session_id is None:
            return self
        return replace(self, sessions=[s for s in self.sessions if s.session_id != session_id])

    def to_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "key": self.key.to_dict(), "digest": self.key.digest,
                "sessions": [s.to_json() for s in self.sessions]}


# A list of numbers as json.dumps(indent=2) lays it out: "[" then a newline (a raw newline cannot
# occur inside a JSON string, so the pattern never matches a string's text), one number a line.
_NUMBER_LIST = re.compile(r"\[\n\s*(-?[0-9][0-9.eE+-]*(?:,\n\s*-?[0-9][0-9.eE+-]*)*)\n\s*\]")


def dumps(baseline: Baseline) -> str:
    """Sorted keys, indent 2, every sample list on one line: a new session is a small block of
    added lines at the end, so diffs and merges stay readable."""
    text = json.dumps(baseline.to_json(), indent=2, sort_keys=True)
    return _NUMBER_LIST.sub(lambda m: "[" + re.sub(r"\s*,\s*", ", ", m.group(1)) + "]",
                            text) + "\n"


# -- reading ---------------------------------------------------------------------------------


def _malformed(path: Path, detail: str) -> BaselineError:
    return BaselineError(f"baseline {path}: malformed ({detail}); {_FIX}")


def _positive_times(block: Any) -> bool:
    return isinstance(block, list) and bool(block) and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 and math.isfinite(v)
        for v in block)


def _parse_session(path: Path, i: int, d: Any, v1_key: dict[str, Any] | None) -> Session:
    if not isinstance(d, dict):
        raise _malformed(path, f"session {i} is not an object")
    blocks = d.get("blocks")
    if not isinstance(blocks, list) or not blocks or not all(map(_positive_times, blocks)):
        raise _malformed(path, f"session {i} needs 'blocks': non-empty lists of positive "
                               "times in ms")
    if not isinstance(d.get("timestamp"), str):
        raise _malformed(path, f"session {i} has no 'timestamp'")
    versions = {str(k): str(v) for k, v in (d.get("versions") or {}).items()}
    for name in ("load_ms", "peak_rss_kb", "prefill_ms", "ttft_ms", "prefill_instructions",
                 "probe_us"):
        if d.get(name) is not None and not _positive_times(d[name]):
            raise _malformed(path, f"session {i} '{name}' is not a list of positive numbers")
    if v1_key is not None:   # schema 1: what was under test lived in the file's key
        under_test = UnderTest(
            export_key=str(v1_key.get("export_key") or ""),
            versions={p: versions[p] for p in ("torch", "executorch", "torchao")
                      if versions.get(p)},
            runner_labels={str(k): str(v) for k, v in (v1_key.get("runner_labels") or {}).items()})
    else:
        under_test = UnderTest.from_dict(d.get("under_test") or {})
    return Session(timestamp=d["timestamp"], blocks=[[float(v) for v in b] for b in blocks],
                   git_commit=d.get("git_commit"), versions=versions,
                   device=DeviceFacts.from_dict(d.get("device") or {}),
                   categories_ms=list(d.get("categories_ms") or []),
                   session_id=d.get("session_id"), under_test=under_test,
                   load_ms=[float(v) for v in d.get("load_ms") or []],
                   peak_rss_kb=[float(v) for v in d.get("peak_rss_kb") or []],
                   prefill_ms=[float(v) for v in d.get("prefill_ms") or []],
                   ttft_ms=[float(v) for v in d.get("ttft_ms") or []],
                   prefill_instructions=[float(v)
                                         for v in d.get("prefill_instructions") or []],
                   probe_us=[float(v) for v in d.get("probe_us") or []])


def _v1_key(old: dict[str, Any], sessions: list[Session]) -> BaselineKey:
    """A schema-1 key as a schema-2 key: the fields it lacked (SME, emulated) come from the
    device facts its newest session recorded, as a key made now would take them."""
    device = sessions[-1].device if sessions else DeviceFacts()
    return BaselineKey(device_kind=old["device_kind"], cpu=old["cpu"], abi=old["abi"],
                       sme=device.sme, sme2=old["sme2"], cpu_set=old["cpu_set"],
                       emulated=device.emulated,
                       model=old["model"], dtype=old["dtype"], threads=int(old["threads"]),
                       runner=old["runner"])


def load(path: Path) -> Baseline:
    """Read a baseline file (schema 1 is migrated). Anything unusable is a BaselineError naming
    the file and the fix: a corrupt baseline must never turn into a silent pass."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise BaselineError(f"baseline {path}: cannot read it ({e.strerror}); {_FIX}") from None
    try:
        doc = json.loads(text)
    except ValueError as e:
        what = "empty" if not text.strip() else \
            f"not valid JSON at line {e.lineno} column {e.colno}: {e.msg}" \
            if isinstance(e, json.JSONDecodeError) else "not valid JSON"
        raise BaselineError(f"baseline {path} is corrupt or truncated ({what}); {_FIX}") from None
    schema = doc.get("schema") if isinstance(doc, dict) else None
    if not isinstance(schema, str) or not schema.startswith(SCHEMA_PREFIX):
        raise BaselineError(f"baseline {path}: not a pytest-sme2 baseline (schema {schema!r}, "
                            f"expected {SCHEMA!r}); {_FIX}")
    if schema not in (SCHEMA, SCHEMA_V1):
        raise BaselineError(f"baseline {path}: schema {schema!r} is not one this pytest-sme2 "
                            f"reads ({SCHEMA!r}); upgrade pytest-sme2, or re-record it with "
                            "--save-baseline")
    raw_sessions = doc.get("sessions")
    if not isinstance(raw_sessions, list):
        raise _malformed(path, "'sessions' is not a list")
    raw_key = doc.get("key")
    if not isinstance(raw_key, dict):
        raise _malformed(path, "'key' lacks fields")
    v1 = raw_key if schema == SCHEMA_V1 else None
    sessions = [_parse_session(path, i, s, v1) for i, s in enumerate(raw_sessions)]
    try:
        key = _v1_key(raw_key, sessions) if v1 is not None else BaselineKey.from_dict(raw_key)
    except (KeyError, TypeError, ValueError):
        raise _malformed(path, "'key' lacks fields") from None
    return Baseline(key, sessions, path, [path] if v1 is not None else [])


def _schema_of(path: Path) -> str | None:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    schema = doc.get("schema") if isinstance(doc, dict) else None
    return schema if isinstance(schema, str) else None


@dataclass(frozen=True)
class Lookup:
    """The baseline for a key: its file (or the schema-1 files it migrates from), or — for the
    reason why not — the newest file of the same benchmark recorded elsewhere, or nothing."""

    baseline: Baseline | None
    foreign_reason: str | None = None


def _foreign(baseline: Baseline, key: BaselineKey) -> str | None:
    diffs = baseline.key.differences(key)
    if not diffs:
        return None
    where = f" ({baseline.path.name})" if baseline.path else ""
    then, now = sme_class(baseline.key.sme, baseline.key.sme2), sme_class(key.sme, key.sme2)
    # Another SME class runs another ISA's kernels (SME1 on a device with SME but no SME2):
    # said first, whatever else differs.
    isa = (f"; a device of class {now} is never judged against a baseline of class {then}"
           if then != now else "")
    return ("baseline recorded in another environment" + where + ": " + "; ".join(diffs)
            + isa)


def _merged(key: BaselineKey, path: Path, parts: list[Baseline]) -> Baseline:
    """Schema-1 files of one key (one per export or runner build before) as one history."""
    sessions = sorted((s for b in parts for s in b.sessions), key=lambda s: s.timestamp)
    return Baseline(key, sessions[-DEFAULT_KEEP:], path, [p for b in parts for p in b.migrated])


def find(baseline_dir: Path, key: BaselineKey) -> Lookup:
    """Raises BaselineError for an unreadable file: a corrupt baseline fails loudly."""
    folder = Path(baseline_dir)
    exact = folder / key.filename
    if exact.exists():
        base = load(exact)
        return Lookup(base, _foreign(base, key))
    others = [load(p) for p in sorted(folder.glob(f"{key.stem}-*.json"))
              if re.fullmatch(re.escape(key.stem) + r"-[0-9a-f]{10}\.json", p.name)]
    # A schema-1 file knew no test: it is the asking test's (its blocks were).
    same = [b for b in others if b.migrated and replace(b.key, test=key.test) == key]
    if same:
        return Lookup(_merged(key, exact, same))
    others = [b for b in others if b.sessions]
    if not others:
        return Lookup(None)
    newest = max(others, key=lambda b: b.sessions[-1].timestamp)
    return Lookup(newest, _foreign(newest, key) or f"baseline {newest.path.name} has another key")


# -- writing ---------------------------------------------------------------------------------


def _versions(result: BlockResult) -> dict[str, str]:
    out = {pkg: v for pkg in ("torch", "torchao") if (v := package_version(pkg)) != "missing"}
    labels = result.runner.labels
    out["executorch"] = str(result.device.executorch or labels.get("executorch") or "")
    py = result.device.extra.get("python")
    if py:
        out["python"] = str(py)
    return out


def group_by_key(results: Iterable[BlockResult]) -> dict[BaselineKey, list[BlockResult]]:
    """Results of one session by key, in first-seen order: one baseline session (or one
    judgement) per key, with one block per result."""
    groups: dict[BaselineKey, list[BlockResult]] = {}
    for r in results:
        groups.setdefault(BaselineKey.from_result(r), []).append(r)
    return groups


def _keep_program(folder: Path, result: BlockResult) -> None:
    """The measured .pte, by hash, for the A/B gate (pytest_sme2.baselines.programs); a result
    whose program file is gone (a results.json read back elsewhere) keeps none."""
    pte = Path(result.pte) if result.pte else None
    if pte is not None and pte.is_file():
        base_programs.keep(folder, pte)


def save(results: Sequence[BlockResult], baseline_dir: Path, keep: int = DEFAULT_KEEP,
         session_id: str | None = None, commit: str | None | bool = True,
         now: datetime | None = None, measure: str = MEASURE_TIME) -> Path:
    """Add one session (one block per result) to the key's file and keep the last ``keep``.

    All results must share a key. With ``session_id``, blocks are added to the session of that
    id if the file has one (an xdist worker saving each block as it comes), else to a new one.
    ``commit=True`` asks git for HEAD; a string is taken as is; False/None records none.
    Read-modify-write happens under a lock and the file is replaced atomically, so concurrent
    savers never lose a session or leave half a file. A corrupt file is kept beside as
    ``<name>.corrupt`` and a new history starts (that is what re-recording means). Schema-1
    files of the key are merged into the new file and removed.

    ``measure="instructions"``: the file keyed so, one block per result holding its
    instructions per execute (results without a count are an error); an LLM's per decode
    token, with its instructions per prefill in ``prefill_instructions``."""
    if not results:
        raise BaselineError("nothing to save: no results")
    if keep < 1:
        raise BaselineError(f"keep must be at least 1 session, got {keep}")
    key = BaselineKey.from_result(results[0], measure)
    for r in results[1:]:
        if BaselineKey.from_result(r, measure) != key:
            raise BaselineError(f"cannot save {r.nodeid or r.model!r} with "
                                f"{results[0].nodeid or results[0].model!r}: different keys")
    folder = Path(baseline_dir)
    path = folder / key.filename
    sha = head_commit() if commit is True else (commit or None)
    stamp = (now or datetime.now(timezone.utc)).isoformat(timespec="seconds")
    loads: list[float] = []
    peaks: list[float] = []
    prefill: list[float] = []
    ttft: list[float] = []
    prefill_counts: list[float] = []
    probes: list[float] = []
    if measure == MEASURE_TIME:
        blocks = [[round(float(v), 6) for v in r.e2e_ms] for r in results]
        cats = [{k: round(float(v), 6) for k, v in r.categories_ms.items()} for r in results]
        processes = [p for r in results if r.startup for p in r.startup.processes]
        loads = [round(float(p.load_ms), 6) for p in processes if p.load_ms]
        peaks = [float(p.peak_rss_kb) for p in processes if p.peak_rss_kb]
        phases = block_phases(results)
        prefill, ttft = ([round(v, 6) for v in phases.get(key, [])] for key in (PREFILL, TTFT))
        probes = [round(level, 3) for level in probe_levels(results)]
    else:
        counts = [r.instructions_per_execute for r in results]
        if any(c is None or not c > 0 for c in counts):
            raise BaselineError(f"cannot save {results[0].nodeid or results[0].model!r} in "
                                f"{measure}: a block has no count")
        blocks, cats = [[round(float(c), 3)] for c in counts], []
        prefill_counts = [round(float(r.instructions.prefill), 3) for r in results
                          if r.instructions is not None and r.instructions.prefill]
    with folder_lock(folder):
        baseline = Baseline(key, [], path)
        if path.exists():
            try:
                baseline = load(path)
            except BaselineError:
                if _schema_of(path) not in (None, SCHEMA):
                    raise  # a newer format: never overwrite what we cannot read
                os.replace(path, path.with_name(path.name + ".corrupt"))
        else:
            found = find(folder, key).baseline
            if found is not None and found.migrated and found.key == key:
                baseline = found
        same = [s for s in baseline.sessions if session_id and s.session_id == session_id]
        if same:
            same[0].blocks.extend(blocks)
            same[0].categories_ms.extend(cats)
            same[0].load_ms.extend(loads)
            same[0].peak_rss_kb.extend(peaks)
            same[0].prefill_ms.extend(prefill)
            same[0].ttft_ms.extend(ttft)
            same[0].prefill_instructions.extend(prefill_counts)
            same[0].probe_us.extend(probes)
        else:
            baseline.sessions.append(Session(
                timestamp=stamp, blocks=blocks, git_commit=sha, versions=_versions(results[0]),
                device=results[0].device, categories_ms=cats, session_id=session_id,
                under_test=under_test_of(results[0]), load_ms=loads, peak_rss_kb=peaks,
                prefill_ms=prefill, ttft_ms=ttft, prefill_instructions=prefill_counts,
                probe_us=probes))
        baseline.sessions = baseline.sessions[-keep:]
        atomic_write_text(path, dumps(replace(baseline, path=path)))
        _keep_program(folder, results[0])
        for old in baseline.migrated:
            if old != path:
                old.unlink(missing_ok=True)
    return path
