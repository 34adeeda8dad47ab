"""Instructions executed per ``Method::execute``: a measure of the work a model does that does
not drift with the machine, counted under valgrind (callgrind) on the host.

What is counted. The native runner (``pytest_sme2.runners.native``) runs the benchmark's model
with its inputs and thread count under ``valgrind --tool=callgrind`` (no cache or branch
simulation). Collection is off at start; it is toggled on inside
``executorch::runtime::Method::execute()`` on the calling thread (``--toggle-collect``: process
start-up, model loading and setting inputs between executions are not counted) and for the whole
life of every other thread (``--toggle-collect=start_thread``: the thread pool's workers, which
do their share of an execution outside the caller's call stack). Two processes run the same
model ``n_low`` and ``n_high`` times; the count per execute is the slope
``(I(n_high) - I(n_low)) / (n_high - n_low)``, which cancels everything both have in common: the
first execution (19% dearer than the others for mobilenet_v3_small: buffers, first reshape), the
workers' start-up, the dumps.

An LLM (:func:`count_generation`) is counted per phase the same way, with generations for
executions: the prefill from a pair of prefill-only processes, the decode per token from a
pair of whole-generation processes minus that (docs/instruction-counts.md).

What is left out. The thread pool's own code (``libexecutorch_threadpool.so``: pthreadpool's
spin-waiting and work hand-out) is the only part whose count changes between identical runs
(valgrind runs one thread at a time, and how long a worker spins before the work reaches it
depends on scheduling). It is reported per library, not counted in ``per_execute``. Measured on
mobilenet_v3_small fp32 (slope 2 -> 12 executions, three process pairs each): 1 thread 26,431,863
per execute with a spread of 1 instruction (4e-8) — the pool's code spread 937; 2 threads
26,538,675 with a spread of 475 (1.8e-5) — the pool's code 108,223-130,666 per execute, a spread
of 22,443 (8e-4) that would otherwise be most of the noise. ``--fair-sched=yes`` changed
neither (1.4e-5). See ``evaluations/instruction_gate_evaluation.py`` for the figures over the
matrix.

What the counts are not. valgrind's virtual CPU has no AVX-512 (nor AMX, SME ...), so XNNPACK
picks the kernels it would pick on an AVX2 machine: the counts follow the work a change adds or
removes, not the instructions of the timed run on this CPU. valgrind runs the threads one at a
time, so a count says nothing about parallel speed.

Symbols: the x86 executorch wheel hides XNNPACK's internal functions (microkernels read as
``0x00000000000ffcc0 [libexecutorch_backend_xnnpack.so]``); per-operator attribution is exact
for operators outside the delegate (their kernels are named) and the delegate is one entry.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from pytest_sme2 import units
from pytest_sme2.devices.kinds import HOST
from pytest_sme2.instructions.callgrind import Costs, Function
from pytest_sme2.results.generation import Generation
from pytest_sme2.results.instructions import InstructionCount
from pytest_sme2.runners.base import RunRequest
from pytest_sme2.instructions.valgrind import (
    DEFAULT_TIMEOUT_S, METHOD_EXECUTE, THREAD_START,
    InstructionCountError, process_costs, ValgrindProcess, run_all, callgrind_argv,
    execute_symbol, find_valgrind)
from pytest_sme2.devices.registry import DeviceSpec
from pytest_sme2.runners.native import native_runner

if TYPE_CHECKING:   # types only
    from pytest_sme2.devices.base import Device

EXECUTE_INSTRUCTION = "executorch::runtime::Method::execute_instruction()"
POOL_LIBRARY = "libexecutorch_threadpool.so"
DEFAULT_EXECUTIONS = (2, 4)             # n_low, n_high: the first of each is a warm-up
HOTTEST = 10
HOST_ONLY = "instructions are counted on the host only; measuring time only"
METHOD = "callgrind"




def host_only_reason(device: Device) -> str | None:
    """None where instructions can be counted (the host), else the one line to show."""

    if DeviceSpec.parse(device.spec).kind == HOST.name and device.target == "host":
        return None
    return f"--device {device.spec}: {HOST_ONLY}"


# -- from two processes to one count ------------------------------------------------------------


def _library(obj: str) -> str:
    return os.path.basename(obj) or obj


def _is_pool(obj: str) -> bool:
    return _library(obj).startswith(POOL_LIBRARY)


def short_name(fn: str) -> str:
    """A function name without its parameter list: ``ns::f(int, float) const`` -> ``ns::f``."""
    name = fn.strip()
    if name.endswith(" const"):
        name = name[:-6]
    if not name.endswith(")"):
        return name
    depth = 0
    for i in range(len(name) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(name[i], 0)
        if depth == 0:
            return name[:i] or fn
    return fn


def _is_address(fn: str) -> bool:
    return bool(re.fullmatch(r"0x[0-9a-fA-F]+", fn))


def _slope(low: dict, high: dict, span: int) -> dict:
    return {k: (high.get(k, 0) - low.get(k, 0)) / span for k in set(low) | set(high)}


def _operator_name(callee: Function, costs: Costs) -> str:
    obj, fn = callee
    if "Backend::execute" in fn:                  # a delegate: one entry per backend
        backend = short_name(fn).split("::")[-2]
        return f"{backend} delegate"
    if _is_address(fn):             # an unnamed wrapper: name it by the kernel it calls
        named = [(cost, f) for (o, f), cost in costs.calls.get(callee, {}).items()
                 if f.startswith("torch::executor::")]
        if named:
            fn = max(named)[1]
    name = short_name(fn)
    for prefix in ("torch::executor::native::", "torch::executor::"):
        if name.startswith(prefix):
            return name[len(prefix):]
    return name if not _is_address(name) else f"{name} [{_library(obj)}]"


def _operators(main: Costs) -> dict[str, int]:
    """Inclusive cost of each kernel or delegate that ``Method::execute_instruction`` called on
    the calling thread, by operator name."""
    out: dict[str, int] = {}
    for caller, callees in main.calls.items():
        if caller[1] != EXECUTE_INSTRUCTION:
            continue
        for callee, cost in callees.items():
            obj, fn = callee
            lib = _library(obj)
            if not (lib.startswith(("libexecutorch_kernels", "libexecutorch_backend")) or
                    "::native::" in fn or "Backend::execute" in fn):
                continue
            name = _operator_name(callee, main)
            out[name] = out.get(name, 0) + cost
    return out


def summarize(low: tuple[Costs, Costs], high: tuple[Costs, Costs], n_low: int, n_high: int,
              threads: int, wall_s: float = 0.0, valgrind: str = "") -> InstructionCount:
    """The count per execute from the profiles of two processes that ran the same model
    ``n_low`` and ``n_high`` times: (calling thread, other threads) costs of each."""
    span = n_high - n_low
    if span <= 0:
        raise InstructionCountError(f"the slope needs more executions in the second process "
                                    f"({n_low} -> {n_high})")
    for (main, _), n in ((low, n_low), (high, n_high)):
        if main.total == 0:
            raise InstructionCountError(
                f"nothing was counted inside {METHOD_EXECUTE} in a run of {n} execution(s): the "
                "runner never entered it under that name")
    if threads > 1 and high[1].total == 0:
        raise InstructionCountError(
            f"no instruction of the thread pool's workers was counted at {threads} threads "
            f"(valgrind did not see glibc's {THREAD_START}: a libc without symbols?)")

    def merged(pair: tuple[Costs, Costs]) -> dict[Function, int]:
        out = dict(pair[0].self_cost)
        for k, v in pair[1].self_cost.items():
            out[k] = out.get(k, 0) + v
        return out

    per_fn = _slope(merged(low), merged(high), span)
    per_library: dict[str, float] = {}
    for (obj, _), v in per_fn.items():
        per_library[_library(obj)] = per_library.get(_library(obj), 0.0) + v
    per_library = {lib: v for lib, v in per_library.items() if abs(v) >= 0.5}
    excluded = {lib: v for lib, v in per_library.items() if _is_pool(lib)}
    per_execute = sum(v for lib, v in per_library.items() if lib not in excluded)
    if per_execute <= 0:
        raise InstructionCountError(f"{n_high} executions counted no more instructions than "
                                    f"{n_low} ({per_execute:+.0f} per execute)")
    hottest = sorted(((f"{short_name(fn)} [{_library(obj)}]", v)
                      for (obj, fn), v in per_fn.items() if v > 0), key=lambda kv: -kv[1])
    operators = _slope(_operators(low[0]), _operators(high[0]), span)
    if threads > 1:
        workers = _slope({k: v for k, v in low[1].self_cost.items() if not _is_pool(k[0])},
                         {k: v for k, v in high[1].self_cost.items() if not _is_pool(k[0])},
                         span)
        operators["pool workers (operator not known)"] = sum(workers.values())
    pool = sum(excluded.values())
    if not excluded:
        note = (f"{threads} thread(s): every counted instruction; no separate thread-pool "
                "library to leave out (a static runner build), so pool spinning is counted")
    elif threads == 1:
        note = (f"1 thread: instructions inside {METHOD_EXECUTE}; the thread pool's own code "
                f"({POOL_LIBRARY}, {pool:,.0f} per execute) is left out: it varies between "
                "identical runs")
    else:
        note = (f"{threads} threads: the calling thread inside {METHOD_EXECUTE} plus the pool's "
                "workers, summed (the share each thread takes varies from run to run, the sum "
                f"does not); the pool's own spinning and work hand-out ({POOL_LIBRARY}, "
                f"{pool:,.0f} per execute) is left out: it varies between identical runs")
    return InstructionCount(
        per_execute=per_execute, executions=span,
        method=(f"{METHOD}: {METHOD_EXECUTE} on the calling thread + pool workers, slope of "
                f"{n_low} -> {n_high} executions, {POOL_LIBRARY} left out"),
        threads=threads, hottest=hottest[:HOTTEST],
        per_library=dict(sorted(per_library.items(), key=lambda kv: -kv[1])),
        deterministic_note=note,
        per_operator=dict(sorted(((k, v) for k, v in operators.items() if v > 0),
                                 key=lambda kv: -kv[1])),
        excluded=excluded, wall_s=round(wall_s, 3), valgrind=valgrind)


# -- the entry point ----------------------------------------------------------------------------


def _profiles(pte: Path, requests: list[RunRequest], runner: Any, timeout_s: float,
              keep_dir: Path | None, progress: Callable[[str], None] | None
              ) -> tuple[list[tuple[Costs, Costs]], float, str]:
    """Run ``requests`` (each one process of ``runner``: default, the host's native build)
    under callgrind side by side; the (calling thread, other threads) costs of each, the wall
    time and valgrind's version. The profiles stay in ``keep_dir`` if given, else in a
    temporary folder, removed."""

    valgrind, version = find_valgrind()
    runner = runner if runner is not None else native_runner(progress=progress)
    symbol = execute_symbol(runner.binary, runner.libs)
    folder = Path(keep_dir) if keep_dir else Path(tempfile.mkdtemp(prefix="sme2-callgrind-"))
    t0 = time.perf_counter()
    try:
        processes, argvs = [], []
        for i, request in enumerate(requests):
            sub = folder / f"p{i}-n{request.runs}"
            shutil.rmtree(sub, ignore_errors=True)
            sub.mkdir(parents=True)
            request = replace(request, etdump=sub / "run.etdump")
            processes.append(ValgrindProcess(request.runs, sub))
            argvs.append(callgrind_argv(valgrind, symbol, sub / "callgrind.out",
                                        sub / "valgrind.log") + runner.command(request))
        run_all(processes, argvs, timeout_s, runner.info.name, pte)
        return ([process_costs(p.folder) for p in processes], time.perf_counter() - t0,
                version)
    finally:
        if keep_dir is None:
            shutil.rmtree(folder, ignore_errors=True)


def _shown(pte: Path) -> str:
    """``folder/model.pte`` (an export's folder names its dtype and key), or a user's file."""
    return f"{pte.parent.name}/{pte.name}" if pte.parent.name else pte.name


def _checked(pte: Path, threads: int, executions: tuple[int, int]) -> Path:
    n_low, n_high = executions
    if threads < 1:
        raise InstructionCountError(f"threads must be 1 or more, got {threads}")
    if not 1 <= n_low < n_high:
        raise InstructionCountError(f"executions must be two counts 1 <= low < high, got "
                                    f"{executions}")
    pte = Path(pte)
    if not pte.is_file():
        raise InstructionCountError(f"{pte}: model file not found")
    return pte


def count_instructions(pte: Path, *, threads: int = 1, inputs: Path | None = None,
                       runner: Any = None, executions: tuple[int, int] = DEFAULT_EXECUTIONS,
                       timeout_s: float = DEFAULT_TIMEOUT_S, keep_dir: Path | None = None,
                       progress: Callable[[str], None] | None = None) -> InstructionCount:
    """Instructions per ``Method::execute`` of ``pte`` at ``threads`` threads with ``inputs``
    (a tensor file, as the benchmark feeds; None: ones), from the native runner under valgrind.

    ``runner``: a ``NativeRunner`` (default: the host build, built on first use).
    ``executions``: (n_low, n_high) executions of the two processes, run in parallel.
    ``keep_dir``: keep the callgrind profiles there (default: a temporary folder, removed)."""
    n_low, n_high = executions
    pte = _checked(pte, threads, executions)
    if progress:
        progress(f"counting instructions of {_shown(pte)} at {threads} thread(s) under "
                 f"valgrind ({n_low} and {n_high} executions) ...")
    requests = [RunRequest(pte=pte, etdump=Path(), threads=threads, runs=n, warmup=0,
                           inputs=inputs) for n in (n_low, n_high)]
    (low, high), wall, version = _profiles(pte, requests, runner, timeout_s, keep_dir, progress)
    return summarize(low, high, n_low, n_high, threads, wall, version)


def count_generation(pte: Path, generation: Generation, *, threads: int = 1,
                     runner: Any = None, executions: tuple[int, int] = DEFAULT_EXECUTIONS,
                     timeout_s: float = DEFAULT_TIMEOUT_S, keep_dir: Path | None = None,
                     progress: Callable[[str], None] | None = None) -> InstructionCount:
    """An LLM's instructions per phase: ``per_execute`` per decode token and ``prefill`` per
    prefill of ``generation.prompt_tokens`` tokens, inside ``Method::execute`` (the runner's
    sampling and bookkeeping are not counted), from four native-runner processes under
    valgrind, side by side: prefill only (P,0) and the whole generation (P,D), each ``n_low``
    and ``n_high`` generations.

    Prefill is the slope over generations of the prefill-only pair. Decode is the slope of
    the whole pair minus that one, over ``D`` tokens: ``[(W_high - W_low) - (P_high - P_low)]
    / ((n_high - n_low) D)``. What both processes of a pair share (loading, the first
    generation's reshapes) cancels, and the decode steps counted are those of the timed
    generation, at positions P .. P+D-1 (attention grows with the position)."""
    n_low, n_high = executions
    pte = _checked(pte, threads, executions)
    if generation.depth:
        raise InstructionCountError(f"{pte}: instructions at context depth {generation.depth} "
                                    "are not counted yet (the prefill-only processes would "
                                    "count the depth fill as prefill); count at depth 0")
    if progress:
        progress(f"counting instructions of {_shown(pte)}'s prefill and decode "
                 f"({generation.prompt_tokens} + {generation.new_tokens} tokens) at {threads} "
                 f"thread(s) under valgrind ({n_low} and {n_high} generations) ...")
    requests = [RunRequest(pte=pte, etdump=Path(), threads=threads, runs=n, warmup=0,
                           generation=g)
                for g in (generation.prefill_only(), generation) for n in (n_low, n_high)]
    (pre_low, pre_high, whole_low, whole_high), wall, version = _profiles(
        pte, requests, runner, timeout_s, keep_dir, progress)
    prefill = summarize(pre_low, pre_high, n_low, n_high, threads, wall, version)
    shape = (f"{generation.prompt_tokens} + {generation.new_tokens} tokens, slopes over "
             f"{n_low} -> {n_high} generations, {POOL_LIBRARY} left out")
    if generation.new_tokens == 0:
        return replace(prefill, prefill=prefill.per_execute,
                       prompt_tokens=generation.prompt_tokens, new_tokens=0,
                       method=f"{METHOD}: {METHOD_EXECUTE}, one whole prefill ({shape})")
    tokens = (n_high - n_low) * generation.new_tokens
    decode = summarize(_sum(whole_low, pre_high), _sum(whole_high, pre_low), 0, tokens,
                       threads, wall, version)
    return replace(decode, executions=tokens, prefill=prefill.per_execute,
                   prompt_tokens=generation.prompt_tokens, new_tokens=generation.new_tokens,
                   method=(f"{METHOD}: {METHOD_EXECUTE} per decode token (whole generation "
                           f"minus prefill only) and per prefill ({shape})"))


def _sum(a: tuple[Costs, Costs], b: tuple[Costs, Costs]) -> tuple[Costs, Costs]:
    return a[0] + b[0], a[1] + b[1]


def format_count(count: InstructionCount, top: int = 3) -> str:
    """One line for the terminal: ``2,570,512 instructions per execute (1 thread; slope of 2
    executions); top: 0x...ffcc0 [libexecutorch_backend_xnnpack.so] 73%, ...``; an LLM's
    count per decode token and per prefill."""
    hot = ", ".join(f"{n} {v / count.per_execute:.0%}" for n, v in count.hottest[:top])
    tail = f"{count.wall_s:.1f} s under valgrind {count.valgrind}); hottest: {hot}"
    if count.prefill is None:
        return (f"{units.count(count.per_execute)} instructions per execute ({count.threads} "
                f"thread(s), slope over {count.executions} execution(s), {tail}")
    prompt = count.prompt_tokens or 0
    prefill = (f"{units.count(count.prefill)} per prefill of {prompt} tokens"
               + (f" ({units.count(count.prefill / prompt)} per prompt token)" if prompt else ""))
    if not count.new_tokens:
        return f"{prefill} ({count.threads} thread(s), {tail}"
    return (f"{units.count(count.per_execute)} per decode token, {prefill} ({count.threads} "
            f"thread(s), decode slope over {count.executions} token(s), {tail} (decode)")
