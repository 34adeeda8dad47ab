"""Stored baselines and the regression gate.

A baseline is one JSON file per *key* — what was measured (model, dtype, threads, runner and its
build labels, export hash) on what (device kind, CPU/SoC, ABI, SME2 capability, CPU set) — that
keeps the last N *sessions* of raw per-run samples, grouped by *block* (one runner process).

The gate (:func:`judge`) and why it looks like this
---------------------------------------------------
Timings on a shared machine drift between processes and between sessions far more than runs
within one process vary (NOTES: ±30% between sessions, 15% between two processes a minute
apart, 1-3% within one). So:

1. The unit of replication is a block (its median), never a run. Pooling runs would make a
   30-run block look like 30 independent observations and shrink every interval to nothing.
2. Levels are medians of medians: a session's level is the median of its block medians, the
   baseline's level the median of its session levels (every session weighs the same, however
   many blocks it had); the candidate's level is the median of its block medians.
   ``ratio = candidate / baseline`` (above 1 = slower).
3. Interval: a two-level (cluster) percentile bootstrap — resample baseline sessions, then
   blocks within each drawn session; resample candidate blocks — of the ratio of levels.
4. Noise floor: how far one fresh session may land from the baseline level with no change in
   the code — the baseline's own spread between sessions, as a one-sided 97.5% prediction
   bound on the log scale: ``exp(t(0.975, n-1) * sd(log session levels) * sqrt(1 + 1/n)) - 1``.
   Student's t keeps it honest with few sessions, where a sample SD is often far too small.
   This is what a bootstrap over one or three candidate blocks cannot see: blocks of one
   session share its drift. Below ``MIN_SESSIONS`` (3) sessions, all blocks are pooled instead
   and the floor is at least ``UNMEASURED_DRIFT`` (25%): drift between sessions has not been
   observed yet. (A 90% quantile of pairwise session ratios, tried first, gave 3-25% false
   alarms per judgement with 1-3 sessions in simulation.)
5. Verdict: ``regression`` only when the interval's *lower* bound exceeds
   ``1 + max(threshold, noise floor)``; ``improvement`` when its upper bound is below the
   reciprocal; else ``ok``. A baseline from another environment is ``not_compared`` with the
   reason, never compared silently.
6. Confirmation (:meth:`pytest_sme2.session.BenchSession.confirm`): a regression suspected
   on one block is measured again in fresh processes and judged on all blocks, so one process
   in a bad state cannot fail CI.

:func:`gate_all` adds the same judgement for operator categories (:func:`judge_category`);
a category too small to be a bottleneck (``BOTTLENECK_PCT`` of the time) is not gated.

This trades sensitivity for the absence of false alarms: a CI gate that cries wolf gets
disabled. On a quiet, pinned device the floor is small and the threshold decides; on a noisy VM
the floor grows until recording more sessions (or a quieter runner) narrows it. See
docs/regression-gate.md for the measured behaviour.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import math
import os
import re
import subprocess
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import numpy as np

from pytest_sme2.errors import Sme2Error
from pytest_sme2.results import BenchmarkResult, atomic_write_text
from pytest_sme2.stats import Interval, _t_quantile
from pytest_sme2.versions import package_version

SCHEMA = "pytest-sme2/baseline/1"
SCHEMA_PREFIX = "pytest-sme2/baseline/"
DEFAULT_KEEP = 10                 # sessions kept per file
DEFAULT_THRESHOLD_PCT = 10.0      # used for reporting when --fail-on-regression is not given
MIN_SESSIONS = 3                  # below this, drift between sessions is taken as unmeasured
PREDICTION = 0.975                # one-sided level of the noise floor (a prediction bound)
UNMEASURED_DRIFT = 0.25           # the least noise floor then (this VM: ±30% between sessions)
CONFIDENCE = 0.95
RESAMPLES = 4000

OK, REGRESSION, IMPROVEMENT, NOT_COMPARED = "ok", "regression", "improvement", "not_compared"
_FIX = "delete it or re-record it with --save-baseline"


class BaselineError(Sme2Error):
    """A baseline file that cannot be used; the message names the file and the fix."""


# -- keys ------------------------------------------------------------------------------------


def _cpu_ranges(cpus: Iterable[int]) -> str:
    """[0, 1, 2, 5] -> "0-2,5": short and stable across processes."""
    out: list[str] = []
    ordered = sorted(set(int(c) for c in cpus))
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        out.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(out)


def _cpu_set(result: BenchmarkResult) -> str:
    """The CPUs a benchmark could run on: the taskset mask it was pinned to, if recorded, else
    the process's allowed CPUs (a container limited to 2 of 8 cores is another machine)."""
    extra = result.device.get("extra") or {}
    mask = result.extra.get("cpu_mask") or extra.get("cpu_mask")
    if mask:
        return f"mask={mask}"
    allowed = extra.get("cpus_allowed")
    return _cpu_ranges(allowed) if allowed else ""


@dataclass(frozen=True)
class BaselineKey:
    """What makes two measurements comparable. Serial numbers and host names are left out on
    purpose: another phone with the same SoC, or another CI runner with the same CPU, shares
    the baseline."""

    device_kind: str
    cpu: str
    abi: str
    sme2: bool | None
    cpu_set: str
    model: str
    dtype: str
    threads: int
    runner: str
    runner_labels: dict[str, str]
    export_key: str

    @classmethod
    def from_result(cls, result: BenchmarkResult) -> "BaselineKey":
        dev = result.device
        return cls(device_kind=str(dev.get("kind", "")), cpu=str(dev.get("cpu", "")),
                   abi=str(dev.get("abi", "")), sme2=dev.get("sme2"), cpu_set=_cpu_set(result),
                   model=result.model, dtype=result.dtype, threads=int(result.threads),
                   runner=result.runner_name,
                   runner_labels={str(k): str(v) for k, v in
                                  (result.runner.get("labels") or {}).items()},
                   export_key=result.export_key)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "BaselineKey":
        return cls(**{f: d[f] for f in cls.__dataclass_fields__})

    def __hash__(self) -> int:  # runner_labels is a dict: hash the canonical form instead
        return hash(self.digest)

    @property
    def digest(self) -> str:
        """A stable hash: canonical JSON (sorted keys), so dict order never changes it."""
        canon = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canon.encode()).hexdigest()[:16]

    @property
    def stem(self) -> str:
        """The readable part of the file name, shared by every environment of one benchmark."""
        raw = f"{self.model}-{self.dtype}-t{self.threads}-{self.runner}"
        return re.sub(r"[^A-Za-z0-9._-]+", "_", raw)

    @property
    def filename(self) -> str:
        return f"{self.stem}-{self.digest[:10]}.json"


# -- sessions and files ----------------------------------------------------------------------


@dataclass
class Session:
    """One pytest session's measurements of one key: one sample list per block (process)."""

    timestamp: str
    blocks: list[list[float]]
    git_commit: str | None = None
    versions: dict[str, str] = field(default_factory=dict)
    device: dict[str, Any] = field(default_factory=dict)
    categories_ms: list[dict[str, float]] = field(default_factory=list)  # per block
    session_id: str | None = None

    @property
    def block_medians(self) -> list[float]:
        return [float(np.median(b)) for b in self.blocks]

    @property
    def median_ms(self) -> float:
        """Median of the block medians: a block is the unit, not a run."""
        return float(np.median(self.block_medians))

    def to_json(self) -> dict[str, Any]:
        return {"timestamp": self.timestamp, "git_commit": self.git_commit,
                "versions": self.versions, "device": self.device, "blocks": self.blocks,
                "block_medians": [round(m, 6) for m in self.block_medians],
                "median_ms": round(self.median_ms, 6), "categories_ms": self.categories_ms,
                "session_id": self.session_id}


@dataclass
class Baseline:
    key: BaselineKey
    sessions: list[Session]
    path: Path | None = None

    @property
    def median_ms(self) -> float:
        return float(np.median([s.median_ms for s in self.sessions]))

    @property
    def executorch(self) -> str | None:
        return self.sessions[-1].versions.get("executorch") if self.sessions else None

    def excluding(self, session_id: str | None) -> "Baseline":
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


def _malformed(path: Path, detail: str) -> BaselineError:
    return BaselineError(f"baseline {path}: malformed ({detail}); {_FIX}")


def _parse_session(path: Path, i: int, d: Any) -> Session:
    if not isinstance(d, dict):
        raise _malformed(path, f"session {i} is not an object")
    blocks = d.get("blocks")
    if not isinstance(blocks, list) or not blocks or not all(
            isinstance(b, list) and b and all(isinstance(v, (int, float)) and not
                                              isinstance(v, bool) and v > 0 and math.isfinite(v)
                                              for v in b) for b in blocks):
        raise _malformed(path, f"session {i} needs 'blocks': non-empty lists of positive "
                               "times in ms")
    if not isinstance(d.get("timestamp"), str):
        raise _malformed(path, f"session {i} has no 'timestamp'")
    return Session(timestamp=d["timestamp"], blocks=[[float(v) for v in b] for b in blocks],
                   git_commit=d.get("git_commit"), versions=dict(d.get("versions") or {}),
                   device=dict(d.get("device") or {}),
                   categories_ms=list(d.get("categories_ms") or []),
                   session_id=d.get("session_id"))


def load(path: Path) -> Baseline:
    """Read a baseline file. Anything unusable is a BaselineError naming the file and the fix:
    a corrupt baseline must never turn into a silent pass."""
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
    if schema != SCHEMA:
        raise BaselineError(f"baseline {path}: schema {schema!r} is not one this pytest-sme2 "
                            f"reads ({SCHEMA!r}); upgrade pytest-sme2, or re-record it with "
                            "--save-baseline")
    try:
        key = BaselineKey.from_dict(doc["key"])
    except (KeyError, TypeError):
        raise _malformed(path, "'key' lacks fields") from None
    sessions = doc.get("sessions")
    if not isinstance(sessions, list):
        raise _malformed(path, "'sessions' is not a list")
    return Baseline(key, [_parse_session(path, i, s) for i, s in enumerate(sessions)], path)


def git_commit(cwd: Path | None = None, timeout_s: float = 5.0) -> str | None:
    """HEAD of the repository around ``cwd``, or None (not a repo, no git, too slow)."""
    try:
        proc = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True,
                              text=True, timeout=timeout_s)
    except (OSError, subprocess.SubprocessError):
        return None
    sha = proc.stdout.strip()
    return sha if proc.returncode == 0 and re.fullmatch(r"[0-9a-f]{40,64}", sha) else None


def _versions(result: BenchmarkResult) -> dict[str, str]:
    out = {pkg: v for pkg in ("torch", "torchao") if (v := package_version(pkg)) != "missing"}
    labels = result.runner.get("labels") or {}
    out["executorch"] = str(result.device.get("executorch") or labels.get("executorch") or "")
    py = (result.device.get("extra") or {}).get("python")
    if py:
        out["python"] = str(py)
    return out


@contextmanager
def _dir_lock(folder: Path) -> Iterator[None]:
    """An exclusive flock on the baseline folder itself: no lock files to commit by mistake,
    and saves are short, so one lock per folder costs nothing."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def save(results: Sequence[BenchmarkResult], baseline_dir: Path, keep: int = DEFAULT_KEEP,
         session_id: str | None = None, commit: str | None | bool = True,
         now: datetime | None = None) -> Path:
    """Add one session (one block per result) to the key's file and keep the last ``keep``.

    All results must share a key. With ``session_id``, blocks are added to the session of that
    id if the file has one (an xdist worker saving each block as it comes), else to a new one.
    ``commit=True`` asks git for HEAD; a string is taken as is; False/None records none.
    Read-modify-write happens under a lock and the file is replaced atomically, so concurrent
    savers never lose a session or leave half a file. A corrupt file is kept beside as
    ``<name>.corrupt`` and a new history starts (that is what re-recording means)."""
    if not results:
        raise BaselineError("nothing to save: no results")
    if keep < 1:
        raise BaselineError(f"keep must be at least 1 session, got {keep}")
    key = BaselineKey.from_result(results[0])
    for r in results[1:]:
        if BaselineKey.from_result(r) != key:
            raise BaselineError(f"cannot save {r.nodeid or r.model!r} with "
                                f"{results[0].nodeid or results[0].model!r}: different keys")
    folder = Path(baseline_dir)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / key.filename
    sha = git_commit() if commit is True else (commit or None)
    stamp = (now or datetime.now(timezone.utc)).isoformat(timespec="seconds")
    blocks = [[round(float(v), 6) for v in r.e2e_ms] for r in results]
    cats = [{k: round(float(v), 6) for k, v in r.categories_ms.items()} for r in results]
    with _dir_lock(folder):
        baseline = Baseline(key, [], path)
        if path.exists():
            try:
                baseline = load(path)
            except BaselineError:
                if _schema_of(path) not in (None, SCHEMA):
                    raise  # a newer format: never overwrite what we cannot read
                os.replace(path, path.with_name(path.name + ".corrupt"))
        same = [s for s in baseline.sessions if session_id and s.session_id == session_id]
        if same:
            same[0].blocks.extend(blocks)
            same[0].categories_ms.extend(cats)
        else:
            baseline.sessions.append(Session(
                timestamp=stamp, blocks=blocks, git_commit=sha, versions=_versions(results[0]),
                device=dict(results[0].device), categories_ms=cats, session_id=session_id))
        baseline.sessions = baseline.sessions[-keep:]
        atomic_write_text(path, dumps(baseline))
    return path


def _schema_of(path: Path) -> str | None:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    schema = doc.get("schema") if isinstance(doc, dict) else None
    return schema if isinstance(schema, str) else None


# -- finding a baseline and checking its environment ------------------------------------------

_ENV_FIELDS = {"device_kind": "device kind", "cpu": "CPU/SoC", "abi": "ABI",
               "sme2": "SME2 capability", "cpu_set": "CPU set", "model": "model",
               "dtype": "dtype", "threads": "threads", "runner": "runner",
               "export_key": "export hash (model source, recipe, torch/executorch versions)"}


def compare_environment(baseline: Baseline, result: BenchmarkResult) -> str | None:
    """Why ``baseline`` was recorded in another environment than ``result``, or None.
    One line listing every difference as ``what baseline -> now``."""
    old, new = baseline.key, BaselineKey.from_result(result)
    diffs = []
    for name, label in _ENV_FIELDS.items():
        a, b = getattr(old, name), getattr(new, name)
        if a != b:
            diffs.append(f"{label} {a!r} -> {b!r}")
    if old.runner_labels != new.runner_labels:
        changed = sorted(set(old.runner_labels) | set(new.runner_labels))
        parts = [f"{k}={old.runner_labels.get(k, '(none)')} -> {new.runner_labels.get(k, '(none)')}"
                 for k in changed if old.runner_labels.get(k) != new.runner_labels.get(k)]
        diffs.append("runner build labels " + ", ".join(parts))
    ours = str(result.device.get("executorch") or "")
    if baseline.executorch and ours and baseline.executorch != ours and \
            not any(d.startswith("runner build labels") and "executorch=" in d for d in diffs):
        diffs.append(f"executorch {baseline.executorch} -> {ours}")
    if not diffs:
        return None
    where = f" ({baseline.path.name})" if baseline.path else ""
    return "baseline recorded in another environment" + where + ": " + "; ".join(diffs)


@dataclass(frozen=True)
class Lookup:
    """The baseline for a result: the exact key's file, or (for the reason why not) the newest
    file of the same benchmark recorded elsewhere, or nothing."""

    baseline: Baseline | None
    foreign_reason: str | None = None


def find_baseline(baseline_dir: Path, result: BenchmarkResult) -> Lookup:
    """Raises BaselineError for an unreadable file: a corrupt baseline fails loudly."""
    key = BaselineKey.from_result(result)
    exact = Path(baseline_dir) / key.filename
    if exact.exists():
        base = load(exact)
        return Lookup(base, compare_environment(base, result))
    others = [load(p) for p in sorted(Path(baseline_dir).glob(f"{key.stem}-*.json"))
              if re.fullmatch(re.escape(key.stem) + r"-[0-9a-f]{10}\.json", p.name)]
    others = [b for b in others if b.sessions]
    if not others:
        return Lookup(None)
    newest = max(others, key=lambda b: b.sessions[-1].timestamp)
    return Lookup(newest, compare_environment(newest, result) or
                  f"baseline {newest.path.name} has another key")


# -- the gate ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Judgement:
    """``ratio`` is current time / baseline time (above 1 = slower), with its interval."""

    status: str
    ratio: Interval | None
    threshold_pct: float
    noise_floor_pct: float | None
    reason: str
    baseline_median: float | None = None
    current_median: float | None = None
    baseline_sessions: int = 0
    current_blocks: int = 0
    category: str | None = None
    foreign: bool = False             # a baseline exists but was recorded elsewhere

    @property
    def regressed(self) -> bool:
        return self.status == REGRESSION

    @property
    def limit(self) -> float | None:
        """The ratio the interval's lower bound must exceed to call a regression."""
        if self.noise_floor_pct is None:
            return None
        return 1 + max(self.threshold_pct, self.noise_floor_pct) / 100

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "ratio": self.ratio.to_dict() if self.ratio else None,
                "threshold_pct": self.threshold_pct, "noise_floor_pct": self.noise_floor_pct,
                "reason": self.reason, "baseline_median": self.baseline_median,
                "current_median": self.current_median,
                "baseline_sessions": self.baseline_sessions,
                "current_blocks": self.current_blocks, "category": self.category,
                "foreign": self.foreign}


def not_compared(reason: str, threshold_pct: float = DEFAULT_THRESHOLD_PCT,
                 category: str | None = None) -> Judgement:
    return Judgement(NOT_COMPARED, None, threshold_pct, None, reason, category=category)


def noise_floor(sessions: Sequence[Sequence[float]]) -> tuple[float, str]:
    """(relative floor, where it came from) from per-session block values.

    The floor is how far one fresh session may land from the baseline level with no change in
    the code: a one-sided 97.5% prediction bound on the log scale,
    ``exp(t(0.975, n-1) * sd * sqrt(1 + 1/n)) - 1``. From ``MIN_SESSIONS`` sessions on, sd and
    n are those of the session levels: drift between sessions is what a new session brings.
    With fewer, that drift has barely been seen (one session's blocks cannot show it at all),
    so all blocks are pooled (more degrees of freedom than 2 session levels give: Student's t
    with 1 df would multiply the sd by 12.7) and the floor is at least ``UNMEASURED_DRIFT``."""
    kept = [np.asarray(s, dtype=float) for s in sessions if len(s)]
    if len(kept) >= MIN_SESSIONS:
        values, source = np.array([np.median(s) for s in kept]), f"{len(kept)} sessions"
    else:
        values = np.concatenate(kept) if kept else np.zeros(0)
        source = f"{values.size} block(s) of {len(kept)} session(s)"
    floor = 0.0
    if values.size >= 2:
        logs = np.log(values)
        n = logs.size
        floor = math.expm1(_t_quantile(PREDICTION, n - 1) * float(logs.std(ddof=1)) *
                           math.sqrt(1 + 1 / n))
    if len(kept) < MIN_SESSIONS and floor < UNMEASURED_DRIFT:
        floor = UNMEASURED_DRIFT
        source += f", at least {UNMEASURED_DRIFT:.0%} below {MIN_SESSIONS} sessions"
    return floor, source


def _bootstrap(sessions: Sequence[np.ndarray], current: np.ndarray, confidence: float,
               resamples: int, seed: int) -> tuple[float, float]:
    """Percentile interval of median(current*) / median_s(median(session_s*)), resampling
    sessions, blocks within each drawn session, and current blocks."""
    rng = np.random.default_rng(seed)
    s = len(sessions)
    # draws[j][r, k]: a block-resampled median of session j, for replicate r and slot k
    draws = np.stack([np.median(rng.choice(blk, size=(resamples, s, blk.size)), axis=2)
                      for blk in sessions])                       # (s, resamples, s)
    pick = rng.integers(0, s, size=(resamples, s))
    rows = np.arange(resamples)[:, None]
    base = np.median(draws[pick, rows, np.arange(s)[None, :]], axis=1)
    cur = np.median(rng.choice(current, size=(resamples, current.size)), axis=1)
    ratios = cur / base
    alpha = (1 - confidence) / 2
    return float(np.quantile(ratios, alpha)), float(np.quantile(ratios, 1 - alpha))


def _pct(fraction: float) -> str:
    """A relative number as a percentage; absurd floors (two wildly different sessions and
    Student's t with 1 degree of freedom) read as such rather than as 4180004.1%."""
    return f"{fraction * 100:.1f}%" if fraction < 10 else ">1000%"


def judge_levels(base_sessions: Sequence[Sequence[float]], current: Sequence[float],
                 threshold_pct: float = DEFAULT_THRESHOLD_PCT, unit: str = "ms",
                 confidence: float = CONFIDENCE, resamples: int = RESAMPLES, seed: int = 0,
                 category: str | None = None) -> Judgement:
    """The gate on block-level values: ``base_sessions`` holds one value per block for each
    baseline session, ``current`` one value per block of this session."""
    if threshold_pct < 0:
        raise Sme2Error(f"the regression threshold must be 0% or more, got {threshold_pct:g}%")
    sessions = [np.asarray(s, dtype=float) for s in base_sessions if len(s)]
    cur = np.asarray(current, dtype=float)
    if not sessions:
        return not_compared("the baseline holds no sessions; record one with --save-baseline",
                            threshold_pct, category)
    if cur.size == 0:
        return not_compared("nothing measured to compare", threshold_pct, category)
    if (cur <= 0).any() or any((s <= 0).any() for s in sessions):
        return not_compared("a zero time cannot form a ratio", threshold_pct, category)
    base_level = float(np.median([np.median(s) for s in sessions]))
    cur_level = float(np.median(cur))
    point = cur_level / base_level
    low, high = _bootstrap(sessions, cur, confidence, resamples, seed)
    ratio = Interval(point, min(low, point), max(high, point), confidence)
    floor, source = noise_floor([list(s) for s in sessions])
    limit = 1 + max(threshold_pct / 100, floor)
    if ratio.low > limit:
        status, word = REGRESSION, f"{(point - 1) * 100:.1f}% slower"
    elif ratio.high < 1 / limit:
        status, word = IMPROVEMENT, f"{(1 - point) * 100:.1f}% faster"
    else:
        status, word = OK, "within noise"
    what = f"{category} " if category else ""
    reason = (f"{what}{word}: median {cur_level:.4g} {unit} ({cur.size} block(s)) vs baseline "
              f"{base_level:.4g} {unit} ({len(sessions)} session(s)); ratio {ratio} "
              f"{int(confidence * 100)}% CI; limit {_pct(limit - 1)} slower = max(threshold "
              f"{threshold_pct:g}%, noise floor {_pct(floor)} from {source})")
    return Judgement(status, ratio, threshold_pct, floor * 100, reason, base_level, cur_level,
                     len(sessions), int(cur.size), category)


def judge(baseline: Baseline, current_blocks: Sequence[Sequence[float]],
          threshold_pct: float = DEFAULT_THRESHOLD_PCT, confidence: float = CONFIDENCE,
          resamples: int = RESAMPLES, seed: int = 0) -> Judgement:
    """Judge this session's blocks (per-run ms, one list per runner process) against a
    baseline's end-to-end latency."""
    blocks = [b for b in current_blocks if len(b)]
    return judge_levels([s.block_medians for s in baseline.sessions],
                        [float(np.median(b)) for b in blocks], threshold_pct,
                        confidence=confidence, resamples=resamples, seed=seed)


def judge_category(baseline: Baseline, category: str, current: Sequence[float],
                   threshold_pct: float = DEFAULT_THRESHOLD_PCT, confidence: float = CONFIDENCE,
                   resamples: int = RESAMPLES, seed: int = 0) -> Judgement:
    """The same gate on one operator category's mean ms per run, one value per block
    (``result.categories_ms[category]`` of each current block)."""
    sessions = [[b.get(category, 0.0) for b in s.categories_ms]
                for s in baseline.sessions if s.categories_ms]
    if not any(sessions):
        return not_compared(f"the baseline records no time for category {category!r}",
                            threshold_pct, category)
    return judge_levels(sessions, current, threshold_pct, confidence=confidence,
                        resamples=resamples, seed=seed, category=category)


def group_by_key(results: Iterable[BenchmarkResult]) -> dict[BaselineKey, list[BenchmarkResult]]:
    """Results of one session by key, in first-seen order: one baseline session (or one
    judgement) per key, with one block per result."""
    groups: dict[str, tuple[BaselineKey, list[BenchmarkResult]]] = {}
    for r in results:
        key = BaselineKey.from_result(r)
        groups.setdefault(key.digest, (key, []))[1].append(r)
    return {key: rs for key, rs in groups.values()}


def gate(results: Sequence[BenchmarkResult], baseline_dir: Path,
         threshold_pct: float = DEFAULT_THRESHOLD_PCT, allow_foreign: bool = False,
         exclude_session: str | None = None) -> Judgement:
    """Everything the plugin needs for one key: find the baseline, refuse (or, with
    ``allow_foreign``, annotate) one from another environment, judge. BaselineError for a
    corrupt file propagates: the caller fails the test with its message."""
    return gate_all(results, baseline_dir, threshold_pct, allow_foreign, exclude_session)[0]


def gate_all(results: Sequence[BenchmarkResult], baseline_dir: Path,
             threshold_pct: float = DEFAULT_THRESHOLD_PCT, allow_foreign: bool = False,
             exclude_session: str | None = None, categories: Sequence[str] = ()
             ) -> list[Judgement]:
    """:func:`gate`, then one judgement per category of ``categories`` (``judge_category``;
    a category under the report's bottleneck share of the baseline's time is
    ``not_compared``, with the reason): end to end first."""
    categories = list(categories)

    def for_all(make) -> list[Judgement]:
        return [make(None)] + [make(c) for c in categories]

    if not results:
        return for_all(lambda c: not_compared("nothing measured to compare", threshold_pct, c))
    found = find_baseline(baseline_dir, results[0])
    if found.baseline is None:
        key = BaselineKey.from_result(results[0])
        return for_all(lambda c: not_compared(
            f"no baseline {key.filename} in {baseline_dir}; record one with --save-baseline",
            threshold_pct, c))
    base = found.baseline.excluding(exclude_session)
    if found.foreign_reason and not allow_foreign:
        return for_all(lambda c: replace(not_compared(
            f"not compared: {found.foreign_reason} (compare anyway with "
            "--allow-foreign-baseline, or re-record with --save-baseline)", threshold_pct, c),
            foreign=True))
    verdicts = [judge(base, [r.e2e_ms for r in results], threshold_pct)]
    for category in categories:
        verdicts.append(_gate_category(base, results, category, threshold_pct))
    if found.foreign_reason:
        verdicts = [replace(v, reason=f"{v.reason} [foreign baseline allowed: "
                                      f"{found.foreign_reason}]") for v in verdicts]
    return verdicts


def _gate_category(base: Baseline, results: Sequence[BenchmarkResult], category: str,
                   threshold_pct: float) -> Judgement:
    # A category that is not a bottleneck is not gated: a 50% change of 1% of the time is noise
    # in a small number, not a regression anyone would act on. (Imported here: the module
    # reads and writes baseline files without pandas.)
    from pytest_sme2.analysis.operators import BOTTLENECK_PCT

    shares = [b.get(category, 0.0) / float(np.mean(blk)) for s in base.sessions
              for b, blk in zip(s.categories_ms, s.blocks) if blk]
    if shares and 100 * float(np.median(shares)) < BOTTLENECK_PCT:
        return not_compared(f"{category} is {float(np.median(shares)):.1%} of the baseline's "
                            f"end-to-end time, below the {BOTTLENECK_PCT:g}% a category "
                            "needs to be gated", threshold_pct, category)
    return judge_category(base, category, [r.categories_ms.get(category, 0.0) for r in results],
                          threshold_pct)


def junit_properties(judgement: Judgement) -> list[tuple[str, object]]:
    """``record_property`` pairs, so CI systems show medians and ratios beside the test."""
    pre = "sme2_gate" + (f"_{re.sub(r'[^A-Za-z0-9]+', '_', judgement.category)}"
                         if judgement.category else "")
    props: list[tuple[str, object]] = [(f"{pre}_status", judgement.status)]
    r = judgement.ratio
    if r is not None:
        props += [(f"{pre}_baseline_median", round(judgement.baseline_median or 0.0, 6)),
                  (f"{pre}_current_median", round(judgement.current_median or 0.0, 6)),
                  (f"{pre}_ratio", round(r.point, 4)), (f"{pre}_ratio_ci_low", round(r.low, 4)),
                  (f"{pre}_ratio_ci_high", round(r.high, 4)),
                  (f"{pre}_noise_floor_pct", round(judgement.noise_floor_pct or 0.0, 2)),
                  (f"{pre}_baseline_sessions", judgement.baseline_sessions),
                  (f"{pre}_current_blocks", judgement.current_blocks)]
    props += [(f"{pre}_threshold_pct", judgement.threshold_pct),
              (f"{pre}_reason", judgement.reason)]
    return props
