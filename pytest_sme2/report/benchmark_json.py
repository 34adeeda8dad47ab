"""Our results in pytest-benchmark's JSON format (``--sme2-benchmark-json PATH``), so that
``pytest-benchmark compare`` and CI tools that read that format (continuous benchmark charts)
work on them unchanged.

One entry per benchmark — a matrix test's setting, or one side of a comparison — whose timed
runs are the ``Method::execute`` samples of all its blocks (runner processes), in seconds, as
:func:`pytest_sme2.results.pool` pools blocks; an LLM measured as a generation has one entry
per phase (:func:`generation_entries`). ``stats`` are computed the way pytest-benchmark's
``Stats`` computes them (``iterations`` is 1: every sample is one execute). ``machine_info``
describes the device the benchmarks ran on (from our device facts) with pytest-benchmark's keys;
``commit_info`` is what pytest-benchmark reads from ``git``, the commit and branch the
session's identity.

pytest-benchmark is not a dependency: the format is written here.
"""

from __future__ import annotations

import json
import platform
import re
import statistics
from bisect import bisect_left, bisect_right
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pytest_sme2.report.columns import JSON, LATENCY, shown
from pytest_sme2.report.grouping import Side
from pytest_sme2.report.view import Source, view_of
from pytest_sme2.results import atomic_write_text, block_phases
from pytest_sme2._util.checkout import git
from pytest_sme2._util.versions import package_version

# The pytest-benchmark JSON layout this module writes (its "version" field names the writer's
# version; the layout has been the same since 3.1, when "ops" was added).
FORMAT_VERSION = "5.1.0"
TIMER = "ExecuTorch ETDump Method::execute"
# Where the runner timed its runs with no tracer in the process (results.timing).
UNTRACED_TIMER = "ExecuTorch Method::execute, untraced (the runner's clock)"


# -- stats, as pytest_benchmark.stats.Stats computes them -----------------------------------

def _quartiles(data: Sequence[float]) -> tuple[float, float]:
    """Q1 and Q3 of sorted ``data`` (Wikipedia's methods 3 (odd n) and 2 (even n), as
    pytest-benchmark)."""
    n = len(data)
    if n == 1:
        return data[0], data[0]
    if n % 2:
        k, q = n // 4, n % 4
        if q == 1:
            return (0.25 * data[k - 1] + 0.75 * data[k],
                    0.75 * data[3 * k] + 0.25 * data[3 * k + 1])
        return (0.75 * data[k] + 0.25 * data[k + 1],
                0.25 * data[3 * k + 1] + 0.75 * data[3 * k + 2])
    return statistics.median(data[: n // 2]), statistics.median(data[n // 2:])


def benchmark_stats(samples: Sequence[float]) -> dict[str, Any]:
    """pytest-benchmark's ``stats`` of ``samples`` (seconds), its keys in its order, then
    ``iterations`` (1) and ``data``."""
    data = [float(x) for x in samples]
    if not data:
        raise ValueError("no samples")
    s = sorted(data)
    n = len(data)
    mean = statistics.mean(data)
    stddev = statistics.stdev(data) if n > 1 else 0
    q1, q3 = _quartiles(s)
    iqr = q3 - q1
    low_fence, high_fence = q1 - 1.5 * iqr, q3 + 1.5 * iqr
    iqr_outliers = sum(1 for x in data if x < low_fence or x > high_fence)
    stddev_outliers = sum(1 for x in data if x < mean - stddev or x > mean + stddev)
    if n == 1:
        ld15iqr = hd15iqr = data[0]
    else:
        ld15iqr = s[bisect_left(s, low_fence)]
        hd15iqr = s[bisect_right(s, high_fence) - 1]
    total = sum(data)
    return {"min": s[0], "max": s[-1], "mean": mean, "stddev": stddev, "rounds": n,
            "median": statistics.median(data), "iqr": iqr, "q1": q1, "q3": q3,
            "iqr_outliers": iqr_outliers, "stddev_outliers": stddev_outliers,
            "outliers": f"{stddev_outliers};{iqr_outliers}", "ld15iqr": ld15iqr,
            "hd15iqr": hd15iqr, "ops": n / total if total else 0, "total": total,
            "iterations": 1, "data": data}


# -- entries ---------------------------------------------------------------------------------

def _unique(name: str, seen: set[str]) -> str:
    out, k = name, 2
    while out in seen:
        out, k = f"{name}#{k}", k + 1
    seen.add(out)
    return out


def benchmark_entry(side: Side, seen: set[str] | None = None) -> dict[str, Any]:
    """One pytest-benchmark entry: its blocks' timed runs pooled, in seconds. ``group`` is the
    model/dtype/threads point, so pytest-benchmark's table puts its runners side by side."""
    r = side.first
    seen = set() if seen is None else seen
    params = {"model": r.model, "dtype": r.dtype, "threads": r.threads, "runner": r.runner_name}
    param = f"{r.model}-{r.dtype}-t{r.threads}-{r.runner_name}"
    func = side.test.split("[", 1)[0]
    name = _unique(f"{func}[{param}]", seen)
    module = side.nodeid.split("::", 1)[0] if "::" in side.nodeid else ""
    p = side.latency
    ev = r.kernel_evidence
    extra: dict[str, Any] = {
        "nodeid": side.nodeid, **{f.key: f.value(p) for f in shown(LATENCY, JSON)},
        "block_medians_ms": list(p.block_medians_ms),
        "runner_kind": r.runner.kind, "runner_labels": dict(r.runner.labels),
        "device": r.device.kind, "emulated": r.emulated,
        "sme2": ev.sme2 if ev else "unknown"}
    c = side.comparison
    if c is not None:
        extra.update(role=side.role, base=c.base, candidate=c.candidate, verdict=c.verdict,
                     speedup=c.speedup.to_dict() if side.role == "candidate" else None)
    if r.judgement and r.judgement.status:
        extra["baseline"] = r.judgement.status
    startup = side.startup
    if startup is not None:   # load and memory beside the samples, for charts that read them
        extra.update(load_ms=startup.load_ms, first_inference_ms=startup.first_inference_ms,
                     peak_rss_kb=startup.peak_rss_kb, pte_bytes=startup.pte_bytes,
                     cold_loads=startup.loads)
    samples_s = [ms / 1000.0 for b in side.blocks for ms in b.e2e_ms]
    return {
        "group": f"{r.model} {r.dtype} t{r.threads}", "name": name,
        "fullname": f"{module}::{name}" if module else name, "params": params, "param": param,
        "extra_info": extra,
        "options": {"timer": UNTRACED_TIMER if r.timing and r.timing.untraced else TIMER,
                    "warmup": r.warmup, "blocks": p.blocks,
                    "disable_gc": False, "min_rounds": r.runs, "max_time": None,
                    "min_time": None},
        "stats": benchmark_stats(samples_s),
    }


def generation_entries(side: Side, seen: set[str] | None = None
                       ) -> list[dict[str, Any]]:
    """An LLM's generation as one entry per phase, ``func[param][prefill]`` and
    ``func[param][decode]``, each grouped by point and phase so pytest-benchmark compares
    runners phase by phase. Decode's samples are the blocks' ``e2e_ms``, decode time per
    token; prefill's are the blocks' prefill medians per generation
    (results.json keeps no per-generation prefill times), so its ``rounds`` is the number of
    blocks. Both in seconds, with tokens/s, TTFT and the phase's SME2 verdict in
    ``extra_info``."""
    base = benchmark_entry(side, set())
    g = side.generation
    assert g is not None
    seen = set() if seen is None else seen
    r = side.first
    func = side.test.split("[", 1)[0]
    module = side.nodeid.split("::", 1)[0] if "::" in side.nodeid else ""
    out = []
    for p in g.phases:
        if p.phase == "decode":
            samples_s = [ms / 1000.0 for b in side.blocks for ms in b.e2e_ms]
            samples = "the blocks' e2e_ms: decode ms per token"
        else:
            samples_s = [ms / 1000.0 for ms in block_phases(side.blocks).get(p.phase, [])]
            samples = "prefill median ms per generation of each block"
        if not samples_s:
            continue
        name = _unique(f"{func}[{base['param']}][{p.phase}]", seen)
        extra = {**base["extra_info"], "phase": p.phase, "samples": samples,
                 "prompt_tokens": g.prompt_tokens, "new_tokens": g.new_tokens,
                 "phase_tokens": p.tokens, "phase_executes": p.executes,
                 "generations": p.generations, "phase_median_ms": p.median_ms,
                 "phase_p90_ms": p.p90_ms, "phase_cv_pct": p.cv_pct,
                 "tokens_per_s": p.tokens_per_s, "token_median_ms": p.token_median_ms,
                 "token_p90_ms": p.token_p90_ms, "ttft_ms": g.ttft_ms,
                 "sme2": p.sme2 if p.evidence is not None else "unknown"}
        j = (r.phase_judgements or {}).get("prefill") if p.phase == "prefill" else r.judgement
        extra.pop("baseline", None)
        if j and j.status:
            extra["baseline"] = j.status
        out.append({**base, "group": f"{base['group']} {p.phase}", "name": name,
                    "fullname": f"{module}::{name}" if module else name,
                    "params": {**base["params"], "phase": p.phase},
                    "param": f"{base['param']}-{p.phase}", "extra_info": extra,
                    "stats": benchmark_stats(samples_s)})
    return out


# -- machine and commit ----------------------------------------------------------------------

def machine_info(devices: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """pytest-benchmark's ``machine_info`` for the device the benchmarks ran on (the first,
    when a session used several: all are under ``sme2_devices``); the ``python_*`` keys are
    the Python that drove the session."""
    d = dict(devices[0]) if devices else {}
    flags = [f for f in ("sme", "sme2") if d.get(f)]
    return {
        "node": str(d.get("serial") or d.get("model") or platform.node()),
        "processor": str(d.get("cpu") or ""),
        "machine": str(d.get("abi") or ""),
        "python_compiler": platform.python_compiler(),
        "python_implementation": platform.python_implementation(),
        "python_implementation_version": platform.python_version(),
        "python_version": platform.python_version(),
        "python_build": list(platform.python_build()),
        "release": str(d.get("kernel") or ""),
        "system": str(d.get("os") or d.get("kind") or ""),
        "cpu": {"brand_raw": str(d.get("cpu") or ""), "arch_string_raw": str(d.get("abi") or ""),
                "count": d.get("cores"), "flags": flags},
        "sme2_devices": [dict(x) for x in devices],
    }


def commit_info(cwd: Path | None = None,
                identity: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What pytest-benchmark's ``get_commit_info`` records: the commit and branch from the
    session's identity (``SessionInfo.identity``) where it has them, the rest from ``git`` in
    ``cwd``."""
    cwd = Path.cwd() if cwd is None else Path(cwd)
    identity = identity or {}
    project = cwd.name
    if url := git(["config", "--local", "remote.origin.url"], cwd):
        parts = [p for p in re.split(r"[/:\s\\]|\.git", url) if p]
        project = parts[-1].strip() if parts else project
    if git(["rev-parse", "--git-dir"], cwd) is None:
        return {"id": "unversioned", "time": None, "author_time": None, "dirty": False,
                "project": project, "branch": "(unknown)"}
    asked = {"describe": ["describe", "--dirty", "--always", "--long", "--abbrev=40"],
             "commit time": ["show", "-s", "--pretty=format:%cI"],
             "author time": ["show", "-s", "--pretty=format:%aI"],
             "branch": ["rev-parse", "--abbrev-ref", "HEAD"]}
    said = {what: git(args, cwd) for what, args in asked.items()}
    if failed := [" ".join(asked[what]) for what, out in said.items() if out is None]:
        return {"id": "unknown", "time": None, "author_time": None, "dirty": False,
                "error": f"git {failed[0]} failed", "project": project, "branch": "(unknown)"}
    desc = said["describe"].split("-")
    dirty = desc[-1].strip() == "dirty"
    commit = desc[-2 if dirty else -1].strip("g")
    branch = identity.get("branch") or said["branch"]
    return {"id": identity.get("commit") or commit, "time": said["commit time"],
            "author_time": said["author time"], "dirty": dirty, "project": project,
            "branch": "(detached head)" if branch == "HEAD" else branch}


# -- the document ----------------------------------------------------------------------------

def benchmark_document(source: Source, cwd: Path | None = None,
                       identity: Mapping[str, Any] | None = None) -> dict[str, Any]:
    view = view_of(source)
    sides = view.sides
    devices: list[dict[str, Any]] = []
    for r in view.results:
        if (d := r.device.to_dict()) not in devices:
            devices.append(d)
    seen: set[str] = set()
    return {"machine_info": machine_info(devices), "commit_info": commit_info(cwd, identity),
            "benchmarks": [e for s in sides for e in (
                generation_entries(s, seen) if s.first.generation is not None
                else [benchmark_entry(s, seen)])],
            "datetime": datetime.now(timezone.utc).isoformat(), "version": FORMAT_VERSION,
            "generator": f"pytest-sme2 {package_version('pytest-sme2')}"}


def write_benchmark_json(path: Path, source: Source, cwd: Path | None = None,
                         identity: Mapping[str, Any] | None = None) -> Path:
    doc = benchmark_document(source, cwd, identity)
    atomic_write_text(Path(path), json.dumps(doc, indent=4) + "\n")
    return Path(path)
