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

from pytest_sme2.readers.pte_data import data_problem


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
            "which neither this runner (built against the ExecuTorch wheel) nor the wheel's "
            "operator libraries register")
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
    """What a timed pass records: each execute's time (ms, in order) and, for the first
    generation only, the sampled steps whose logits were not finite."""

    execute_ms: list[float]
    nonfinite: int = 0


def refusal(pte: str, seen: list[str], otherwise: str, data: str | None = None) -> Refused:
    """The runtime's log names a missing operator, or a missing or wrong ``.ptd`` (``data``),
    only on stderr: that line when it did (it says what to do), else ``otherwise``."""
    log = "".join(seen)
    ops = MISSING_OP.findall(log)
    if ops:
        return Refused(missing_operator_line(pte, "forward", ops))
    return Refused(data_problem(pte, data, log) or otherwise)


class TimedMethod:
    """An untraced program's method, called as a module's ``forward()`` is: its inputs set,
    then ``ExecuTorchMethod.execute()`` alone timed — Method::execute and one call into the
    bindings, none of forward()'s conversion of inputs and outputs — then its outputs read.
    Each execute's time goes to ``record``."""

    def __init__(self, method, record: Steps) -> None:
        self.method, self.record = method, record

    def forward(self, inputs):
        self.method.set_inputs(tuple(inputs))
        t = time.perf_counter_ns()
        self.method.execute()
        self.record.execute_ms.append((time.perf_counter_ns() - t) / 1e6)
        return self.method.get_outputs()


def load_untraced(runtime, pte: str, seen: list[str], data: str | None = None):
    """(program, its ``forward`` method, program load ms, method load ms), without any event
    tracer, the runtime's log watched (a missing operator is named only there). The method
    loads here, not lazily in a first call: its load is timed apart from the first execute.
    ``data``: the program's ``.ptd`` (its weights), loaded with it."""
    with watched_stderr(seen):
        t0 = time.perf_counter()
        program = runtime._load_program(pte, enable_etdump=False, data_path=data)
        t1 = time.perf_counter()
        method = program.load_method("forward")
        t2 = time.perf_counter()
    return program, method, (t1 - t0) * 1e3, (t2 - t1) * 1e3


def untraced_keys(a, record: Steps, traced_executions: int) -> dict:
    """The summary's keys of runs timed without the tracer (as the native runner's)."""
    return {"timing": "untraced", "clock_overhead_ns": clock_overhead_ns(),
            "execute_ms": [round(v, 6) for v in record.execute_ms],
            "execute_span": "ExecuTorchMethod.execute()",
            "traced": {"warmup": a.trace_warmup, "runs": a.trace_runs,
                       "executions": traced_executions}}


class MachineProbe:
    """``--probe``: the machine-state probe's program (pytest-sme2's machine_probe, one XNNPACK
    GEMM), loaded untraced beside the program under test and timed ``runs`` times (after
    :data:`WARMUP` untimed) right before the first warm-up (:meth:`before`) and right after the last
    timed run (:meth:`after`): the native runner's ``--probe_path``. Without a path it does
    nothing."""

    # Untimed executes before each end's timed ones. A process forked from the fork server
    # runs slowly for its first millisecond or so (its first writes to pages it shares with
    # the server are copied): with 8 before the first end, that end read 1.7x the second's
    # probe time in the median block; with 100 (~0.7 ms), the two ends agree.
    WARMUP = {"before": 100, "after": 8}

    def __init__(self, runtime, torch, path: str | None, runs: int) -> None:
        self.path, self.runs = path, runs
        self.before_us: list[float] = []
        self.after_us: list[float] = []
        if path is None:
            return
        seen: list[str] = []
        try:
            self.program, self.method, _, _ = load_untraced(runtime, path, seen)
        except Exception as e:  # noqa: BLE001 - the runtime's refusal, in one line
            raise Refused(f"{path}: the machine-state probe's program was refused "
                          f"({first_line(e)})") from None
        meta = self.method.method_meta()
        self.inputs = tuple(torch.ones(tuple(meta.input_tensor_meta(i).sizes()))
                            for i in range(meta.num_inputs()))

    def _time(self, out: list[float], warmup: int) -> None:
        if self.path is None:
            return
        clock, method = time.perf_counter_ns, self.method
        for i in range(warmup + self.runs):
            method.set_inputs(self.inputs)
            t = clock()
            method.execute()
            if i >= warmup:
                out.append((clock() - t) / 1e3)

    def before(self) -> None:
        self._time(self.before_us, self.WARMUP["before"])

    def after(self) -> None:
        self._time(self.after_us, self.WARMUP["after"])

    def keys(self) -> dict:
        """The summary's ``probe`` (each execute in µs), as the native runner writes it."""
        if self.path is None:
            return {}
        return {"probe": {"before_us": [round(v, 3) for v in self.before_us],
                          "after_us": [round(v, 3) for v in self.after_us]}}
