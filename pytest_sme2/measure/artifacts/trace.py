"""One run of an ETDump as a Chrome trace-event JSON, openable in ui.perfetto.dev and
chrome://tracing.

The run shown is the median of the timed runs (by ``Method::execute``), so the picture is a
typical run, not the fastest or a hiccup. Every profiling event of that run becomes a complete
event (``"ph": "X"``, ``ts``/``dur`` in microseconds from the run's ``Method::execute`` start):
``Method::execute`` outermost, ``DELEGATE_CALL`` and ``OPERATOR_CALL`` inside it, XNNPACK's
per-operator events and the portable ``native_call_*`` kernels inside those — nested by their
own start and end times. The viewers draw a stack only from properly nested slices, so an event
that spills past its enclosing one (clock granularity) is clipped to it, and the clipped
nanoseconds are kept in its ``args``.

An LLM measured as a generation (issue 30) is drawn as one whole generation instead: the
median of the timed generations (:func:`median_generation`), every ``Method::execute`` of it
on one time line, inside a ``prefill`` and a ``decode`` slice, each event with its ``phase``
(and a decode execute's ``token``) in ``args`` (:func:`generation_trace_events`,
:func:`write_generation_trace`).

Pure: a DataFrame in, a dict out; :func:`write_trace` writes it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from pytest_sme2.analysis.latency import E2E_EVENT, e2e_per_run
from pytest_sme2.analysis.operators import DELEGATE_CALL, OPERATOR_CALL, annotate
from pytest_sme2.errors import Sme2Error
from pytest_sme2.readers.etdump import TICKS_PER_MS
from pytest_sme2.analysis.phases import phase_tags

TRACE_SCHEMA = "pytest-sme2/trace/1"
PID, TID = 1, 1
_TICKS_PER_US = TICKS_PER_MS / 1000.0
# Among events starting at the same tick, containers open first so their operators nest.
_RANK = {E2E_EVENT: 0, DELEGATE_CALL: 1, OPERATOR_CALL: 1}

__all__ = ["TRACE_SCHEMA", "GenerationLoop", "generation_trace_events", "median_generation",
           "median_run", "trace_events", "write_generation_trace", "write_trace"]


def median_run(events: pd.DataFrame, warmup: int = 0, source: str = "ETDump",
               e2e: pd.Series | None = None) -> int:
    """The timed run whose ``Method::execute`` is the median (the lower one of an even count;
    the earliest run among equal durations). ``e2e``: the ms per run when already known
    (``Analysis.e2e_all``)."""
    per_run = e2e if e2e is not None else e2e_per_run(events, source=source)
    timed = per_run[per_run.index >= warmup]
    if timed.empty:
        raise Sme2Error(f"{source}: warm-up {warmup} leaves no timed runs (the file holds "
                        f"{len(per_run)} runs with Method::execute)")
    order = timed.sort_values(kind="stable")
    return int(order.index[(len(order) - 1) // 2])


def _cat(name: str, leaf: bool) -> str:
    if leaf:
        return "operator"
    if name == DELEGATE_CALL:
        return "delegate"
    return "runtime"


def trace_events(events: pd.DataFrame, run: int | None = None, *, warmup: int = 0,
                 source: str = "ETDump", e2e: pd.Series | None = None) -> dict:
    """The trace of one run of ``events`` (a :func:`pytest_sme2.readers.etdump.read_etdump` frame,
    annotated by :func:`pytest_sme2.analysis.operators.annotate` or not). ``run`` None: the
    median of the runs after ``warmup`` (``e2e``: their ms per run, when already known)."""
    if run is None:
        run = median_run(events, warmup, source, e2e)
    ev = events[events["run"] == run]
    if ev.empty:
        raise Sme2Error(f"{source}: no events for run {run}")
    if "leaf" not in ev.columns or "category" not in ev.columns:
        ev = annotate(ev)
    names = ev["name"].astype(str).to_numpy()
    start = ev["start"].to_numpy().astype(np.int64)
    end = np.maximum(ev["end"].to_numpy().astype(np.int64), start)
    is_e2e = names == E2E_EVENT
    if not is_e2e.any():
        raise Sme2Error(f"{source}: run {run} has no {E2E_EVENT} event")
    outer = int(np.flatnonzero(is_e2e)[np.argmax((end - start)[is_e2e])])
    t0, t1 = int(start[outer]), int(end[outer])
    # Everything of the run is drawn inside its Method::execute: what spills out is clipped.
    s_in = np.clip(start, t0, t1)
    e_in = np.clip(end, s_in, t1)
    rank = np.array([_RANK.get(n, 2) for n in names])
    seq = ev["seq"].to_numpy() if "seq" in ev.columns else np.arange(len(ev))
    # Begin order: start, containers before what they hold, longer first, then file order.
    rest = np.flatnonzero(np.arange(len(ev)) != outer)
    rest = rest[np.lexsort((seq[rest], -(e_in - s_in)[rest], rank[rest], s_in[rest]))]
    order = np.concatenate(([outer], rest)).astype(np.int64)
    leaf = ev["leaf"].to_numpy(dtype=bool)
    category = ev["category"].astype(str).to_numpy()
    backend = ev["backend"].astype(str).to_numpy() if "backend" in ev.columns else \
        np.full(len(ev), "", dtype=object)
    delegated = ev["delegated"].to_numpy(dtype=bool)
    instr = ev["instruction_id"].to_numpy()
    debug_id = ev["delegate_debug_id"].to_numpy() if "delegate_debug_id" in ev.columns else \
        np.full(len(ev), -1)

    out: list[dict] = []
    stack: list[int] = []          # end ticks of the open slices; [0] is Method::execute
    clipped = 0
    for i in order.tolist():
        s, e = int(s_in[i]), int(e_in[i])
        while len(stack) > 1 and stack[-1] <= s:
            stack.pop()
        if stack and e > stack[-1]:
            e = stack[-1]
        clip = (int(end[i]) - int(start[i])) - (e - s)
        clipped += bool(clip)
        args = {"category": category[i], "backend": backend[i], "delegated": bool(delegated[i]),
                "instruction_id": int(instr[i])}
        if int(debug_id[i]) != -1:
            args["delegate_debug_id"] = int(debug_id[i])
        if clip:
            args["clipped_ns"] = clip
        out.append({"name": names[i], "cat": _cat(names[i], bool(leaf[i])), "ph": "X",
                    "ts": (s - t0) / _TICKS_PER_US, "dur": (e - s) / _TICKS_PER_US,
                    "pid": PID, "tid": TID, "args": args})
        stack.append(e)
    meta = [{"name": "process_name", "ph": "M", "ts": 0, "pid": PID, "tid": TID,
             "args": {"name": f"ExecuTorch run {run}"}},
            {"name": "thread_name", "ph": "M", "ts": 0, "pid": PID, "tid": TID,
             "args": {"name": "Method::execute"}}]
    return {"traceEvents": meta + out, "displayTimeUnit": "ms",
            "otherData": {"schema": TRACE_SCHEMA, "source": source, "run": int(run),
                          "runs": int(events["run"].max()) + 1, "warmup": int(warmup),
                          "e2e_ms": (int(end[outer]) - t0) / TICKS_PER_MS,
                          "events": len(out), "clipped": clipped,
                          "time_origin": f"{E2E_EVENT} start of run {run}"}}


def write_trace(events: pd.DataFrame, path: str | Path, run: int | None = None, *,
                warmup: int = 0, source: str = "ETDump", e2e: pd.Series | None = None) -> Path:
    """Write :func:`trace_events` as ``path`` (compact JSON) and return the path."""
    path = Path(path)
    trace = trace_events(events, run, warmup=warmup, source=source, e2e=e2e)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(trace, separators=(",", ":")) + "\n")
    return path


# -- an LLM's generation ---------------------------------------------------------------------

@dataclass(frozen=True)
class GenerationLoop:
    """How a generation run laid out its executes: ``generations`` (warm-up ones first), each
    ``prefill_executes`` then ``decode_executes``, after ``depth_executes`` that fill the KV
    cache untimed (a runner's ``GenerationSummary`` has the same fields and does as well)."""

    generations: int
    prefill_executes: int
    decode_executes: int
    warmup: int = 0
    depth_executes: int = 0


def median_generation(events: pd.DataFrame, loop: GenerationLoop, source: str = "ETDump",
                      e2e: pd.Series | None = None) -> tuple[int, list[int]]:
    """The timed generation whose summed ``Method::execute`` time is the median (the lower of
    an even count; the earliest among equal), and its runs (execute ids) in order. The
    executes are tagged as :func:`pytest_sme2.analysis.phases.phase_tags` tags them."""

    generations, warmup = loop.generations, loop.warmup
    per_run = e2e if e2e is not None else e2e_per_run(events, source=source)
    runs = per_run.index.to_numpy()
    gen_of, _ = phase_tags(len(per_run), generations, loop.prefill_executes,
                           loop.decode_executes, source, loop.depth_executes)
    if warmup >= generations:
        raise Sme2Error(f"{source}: warm-up {warmup} leaves none of the {generations} "
                        "generations")
    timed_run = gen_of >= 0     # a depth fill's executes (-1) are in no generation's time
    totals = pd.Series(np.bincount(gen_of[timed_run], weights=per_run.to_numpy()[timed_run],
                                   minlength=generations))
    timed = totals[totals.index >= warmup].sort_values(kind="stable")
    g = int(timed.index[(len(timed) - 1) // 2])
    return g, [int(r) for r in runs[gen_of == g]]


def generation_trace_events(events: pd.DataFrame, loop: GenerationLoop, *,
                            source: str = "ETDump", e2e: pd.Series | None = None) -> dict:
    """The trace of the median timed generation of ``events`` (:func:`median_generation`),
    each of its executes drawn as :func:`trace_events` draws a run, placed at its own start on
    one time line from the generation's first execute, inside a ``prefill`` and a ``decode``
    slice (``cat`` ``phase``). Every event's ``args`` carry its ``phase`` and ``run``; a decode
    execute's its ``token`` (1 .. decode_executes)."""

    generations, warmup = loop.generations, loop.warmup
    prefill_executes, decode_executes = loop.prefill_executes, loop.decode_executes
    per_run = e2e if e2e is not None else e2e_per_run(events, source=source)
    generation, runs = median_generation(events, loop, source, per_run)
    ev = events[events["run"].isin(runs)]
    if "leaf" not in ev.columns or "category" not in ev.columns:
        ev = annotate(ev)
    starts = {}
    e2e_rows = ev[ev["name"].astype(str) == E2E_EVENT]
    for run, start in e2e_rows.groupby("run")["start"].min().items():
        starts[int(run)] = int(start)
    missing = [r for r in runs if r not in starts]
    if missing:
        raise Sme2Error(f"{source}: runs {missing[:5]} of generation {generation} have no "
                        f"{E2E_EVENT} event")
    t0 = starts[runs[0]]
    body: list[dict] = []
    phase_span: dict[str, list[float]] = {}
    clipped = 0
    for i, run in enumerate(runs):
        phase = "prefill" if i < prefill_executes else "decode"
        one = trace_events(ev, run, source=source)
        shift = (starts[run] - t0) / _TICKS_PER_US
        clipped += one["otherData"]["clipped"]
        for e in one["traceEvents"]:
            if e["ph"] != "X":
                continue
            e["ts"] += shift
            e["args"] = {"phase": phase, "run": run, **(
                {"token": i - prefill_executes + 1} if phase == "decode" else {}), **e["args"]}
            body.append(e)
            if e["name"] == E2E_EVENT:
                span = phase_span.setdefault(phase, [e["ts"], e["ts"] + e["dur"]])
                span[0], span[1] = min(span[0], e["ts"]), max(span[1], e["ts"] + e["dur"])
    phases = [{"name": name, "cat": "phase", "ph": "X", "ts": lo, "dur": hi - lo, "pid": PID,
               "tid": TID, "args": {"phase": name, "generation": int(generation),
                                    "executes": prefill_executes if name == "prefill"
                                    else decode_executes}}
              for name, (lo, hi) in phase_span.items()]
    # Begin order: the phase slice before the executes it holds (the prefill's first).
    out = sorted(phases + body, key=lambda e: (e["ts"], e["cat"] != "phase"))
    meta = [{"name": "process_name", "ph": "M", "ts": 0, "pid": PID, "tid": TID,
             "args": {"name": f"ExecuTorch generation {generation}"}},
            {"name": "thread_name", "ph": "M", "ts": 0, "pid": PID, "tid": TID,
             "args": {"name": "prefill + decode"}}]
    ms = {p: (hi - lo) / 1000.0 for p, (lo, hi) in phase_span.items()}
    return {"traceEvents": meta + out, "displayTimeUnit": "ms",
            "otherData": {"schema": TRACE_SCHEMA, "source": source,
                          "generation": int(generation), "generations": int(generations),
                          "warmup": int(warmup), "runs": runs,
                          "prefill_executes": int(prefill_executes),
                          "decode_executes": int(decode_executes),
                          "prefill_span_ms": ms.get("prefill"),
                          "decode_span_ms": ms.get("decode"),
                          "execute_ms": float(per_run.loc[runs].sum()),
                          "events": len(body), "clipped": clipped,
                          "time_origin": f"{E2E_EVENT} start of run {runs[0]}"}}


def write_generation_trace(events: pd.DataFrame, path: str | Path, loop: GenerationLoop, *,
                           source: str = "ETDump", e2e: pd.Series | None = None) -> Path:
    """Write :func:`generation_trace_events` as ``path`` (compact JSON) and return the path;
    ``loop``: a runner's ``GenerationSummary`` or a :class:`GenerationLoop`."""
    path = Path(path)
    trace = generation_trace_events(events, loop, source=source, e2e=e2e)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(trace, separators=(",", ":")) + "\n")
    return path
