"""What the Python runner's child shares between its forward pass (:mod:`.python_child`) and
its generation loop (:mod:`.python_generation`): the process's memory and clock readings, the
runtime's log watched for a missing operator, the one-line refusal, and the summary's keys of a
run timed without the tracer."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass

import numpy as np


def status_kb(field: str) -> int | None:
    """A ``VmRSS:`` / ``VmHWM:`` value of /proc/self/status in kB; None where there is none."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field):
                    return int(line[len(field):].split()[0])
    except (OSError, ValueError, IndexError):
        pass
    return None


def first_line(e: BaseException) -> str:
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__


MISSING_OP = re.compile(r"Missing operator: (?:\[\d+\] )?(\S+)")


def missing_operator_line(pte: str, method: str, ops: list[str]) -> str:
    """The one line for a program that needs operators this runtime does not register (the
    native runner words it the same way)."""
    ops = list(dict.fromkeys(ops))  # each once, in the order the runtime named them
    names = ", ".join(ops[:4])
    line = (f"{pte}: method '{method}' needs operator{'s' if len(ops) > 1 else ''} {names}, "
            "which this runner (built against the ExecuTorch wheel) does not register")
    if "llama::" in names:
        return line + ("; export with plain attention (export_llama -kv without "
                       "--use_sdpa_with_kv_cache) to run it here, or run it with a llama_main "
                       "built with ExecuTorch's custom LLM ops")
    return line + "; export without it, or use a runner built with the library that registers it"


@contextlib.contextmanager
def watched_stderr(seen: list[str]):
    """The runtime's log (C stdio on fd 2) copied into ``seen`` and still written to stderr:
    it names a missing operator only there."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            text = tmp.read().decode(errors="replace")
            seen.append(text)
            sys.stderr.write(text)
            sys.stderr.flush()


def nonfinite_elements(arrays) -> int:
    """NaN and infinite elements of the floating-point arrays among ``arrays``."""
    return int(sum(int(np.count_nonzero(~np.isfinite(x))) for x in arrays
                   if np.issubdtype(x.dtype, np.floating)))


def clock_overhead_ns() -> float:
    """What one timing (two perf_counter_ns reads) costs here: the median of 2001 pairs."""
    clock = time.perf_counter_ns
    pairs = []
    for _ in range(2001):
        a = clock()
        pairs.append(clock() - a)
    return float(np.median(pairs))


class Refused(Exception):
    """A --generate failure: one line on stderr and status 1, printed once by :func:`_generate`
    (the native runner's ``Failure``), so that the pieces below can stop it from any depth."""


@dataclass
class Steps:
    """What a pass records of its forwards: each one's wall time (ms, in order) and, for the
    first generation only, the sampled steps whose logits were not finite."""

    execute_ms: list[float]
    nonfinite: int = 0


def untraced_keys(a, record: Steps, traced: Steps) -> dict:
    """The summary's keys of a run timed without the tracer (the native runner's), and the
    traced pass's forward() wall times: beside its Method::execute events they give what the
    bindings themselves cost per call, which the analysis takes off the untraced walls."""
    return {"timing": "untraced", "clock_overhead_ns": clock_overhead_ns(),
            "execute_ms": [round(v, 6) for v in record.execute_ms],
            "execute_span": "forward()",
            "traced_forward_ms": [round(v, 6) for v in traced.execute_ms],
            "first_pass": "traced",
            "traced": {"warmup": a.trace_warmup, "runs": traced_runs(a),
                       "executions": len(traced.execute_ms)}}


def traced_runs(a) -> int:
    """The traced pass's runs: at least one, whose load and first run are the start-up's."""
    return max(a.trace_runs, 1)
