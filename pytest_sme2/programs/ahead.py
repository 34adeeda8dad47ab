"""Exporting a session's models ahead, side by side: on a fresh machine the first
``pytest benchmarks`` spends nearly all its time exporting (ten models one after another, one
core busy of two: 218 s of 235 s measured), while a timed run needs a quiet machine, not many
cores. So before the first measurement the collected (model, dtype) points that the cache
lacks are exported by a pool of processes, longest first, and the session then measures with
every export a cache hit. Nothing is measured while they run.

Only what a fresh process can build is exported ahead: the built-in and entry-point models
and library specs (``transformers:...``), whose builders are named by module; a model a
conftest registered with a function is exported by its test as before. An export that fails
ahead is left to its test, which exports it again and fails with its own one-line error."""

from __future__ import annotations

import multiprocessing
import os
import time
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from pytest_sme2.errors import Sme2Error
from pytest_sme2.programs.export import cached_export, export_model, first_line
from pytest_sme2.programs.export_watch import mem_available
from pytest_sme2.programs.export_output import ExportOutput, captured_stderr
from pytest_sme2.programs.exported import ExportError
from pytest_sme2.programs.registry import ModelEntry, get_model, register_model
from pytest_sme2.programs.spec import is_library, is_pte

# The header of what an export process's native code printed.
NATIVE = "the export process's native log (stderr)"
# What one export process needs at most (measured: 1.4 GB peak for the default matrix's
# tiny_llama 8da8w and mobilenet_v3_small int8): no more processes than memory holds.
EXPORT_PROCESS_BYTES = 2 << 30


@dataclass
class AheadOutcome:
    """What exporting ahead did: the points exported, those that failed (their tests say why),
    the processes used and the wall time."""

    exported: list[tuple[str, str]] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    jobs: int = 0
    wall_s: float = 0.0


def default_jobs() -> int:
    """CPUs this process may use, and no more processes than available memory holds."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:      # macOS
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, _available_bytes() // EXPORT_PROCESS_BYTES or 1))


def _available_bytes() -> int:
    return mem_available() or 1 << 62      # unknown: CPUs decide


def _buildable(model: str) -> tuple[bool, ModelEntry | None]:
    """Whether a fresh process can build ``model``, and the registry entry to give it (None: a
    library spec, which needs none). Not: a .pte, a builder given as a function, an unknown
    name."""
    if is_pte(model):
        return False, None
    if is_library(model):
        return True, None
    try:
        entry = get_model(model)
    except Sme2Error:
        return False, None
    return isinstance(entry.target, str), entry


def _cost_rank(entry: ModelEntry | None, dtype: str) -> int:
    """Longest first, from what the default matrix measured: an LLM (~60 s), then static
    int8 (calibrated: 26-44 s), then the rest."""
    if entry is not None and entry.llm:
        return 0
    return 1 if dtype == "int8" else 2


def missing_points(points: Iterable[tuple[str, str]], cache_dir: Path | None
                   ) -> list[tuple[str, str, ModelEntry | None]]:
    """The points a fresh process can export and the cache lacks, longest first."""
    out = []
    for model, dtype in dict.fromkeys(points):
        ok, entry = _buildable(model)
        if not ok:
            continue
        try:
            if cached_export(model, dtype, cache_dir) is not None:
                continue
        except Sme2Error:
            continue            # its test says what is wrong
        out.append((model, dtype, entry))
    return sorted(out, key=lambda p: _cost_rank(p[2], p[1]))


def _export_in_worker(model: str, dtype: str, entry: ModelEntry | None,
                      cache_dir: Path | None) -> tuple[str, list[ExportOutput]]:
    """In a pool process: register the entry as the session has it, export, and give back
    the export's last line (``exported ... in N s (...)``) and what its third-party code
    warned and printed (:mod:`.export_output`: this process's stderr is captured meanwhile,
    where the runtime's native log goes); a failure's error carries them."""
    if entry is not None:
        register_model(entry.name, entry.target, description=entry.description, llm=entry.llm,
                       dtypes=entry.dtypes, heavy=entry.heavy, **entry.kwargs)
    said: list[str] = []
    with captured_stderr() as stderr:
        try:
            export_model(model, dtype, cache_dir, progress=said.append)
        except Sme2Error as e:
            failure = e
        else:
            failure = None
    native = ExportOutput.of(model, dtype, NATIVE, stderr)
    if failure is not None:     # a plain ExportError: it crosses back to the session pickled
        raise ExportError("\n".join(filter(None, [str(failure), native]))) from None
    lines = [m for m in said if not isinstance(m, ExportOutput)]
    outputs = [m for m in said if isinstance(m, ExportOutput)] + ([native] if native else [])
    return lines[-1] if lines else f"{model} {dtype}: in the cache", outputs


def export_ahead(points: Iterable[tuple[str, str]], cache_dir: Path | None, jobs: int,
                 progress: Callable[[str], None] | None = None) -> AheadOutcome:
    """Export the points the cache lacks in ``jobs`` processes at once, and wait for all.
    Fewer than two missing, or one job: nothing is done here (each test exports its own, as
    always)."""
    say = progress or (lambda msg: None)
    todo = missing_points(points, cache_dir)
    jobs = min(jobs, len(todo))
    if jobs < 2:
        return AheadOutcome()
    outcome = AheadOutcome(jobs=jobs)
    t0 = time.perf_counter()
    say(f"exporting {len(todo)} models ahead in {jobs} processes (nothing is measured until "
        f"they are done): {', '.join(f'{m} {d}' for m, d, _ in todo)}")
    # spawn: a fresh interpreter, never a fork of this one (pytest's threads, its capture)
    pool = ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn"))
    try:
        running: dict[Future, tuple[str, str]] = {
            pool.submit(_export_in_worker, m, d, e, cache_dir): (m, d) for m, d, e in todo}
        while running:
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                point = running.pop(future)
                try:
                    line, outputs = future.result()
                    say(line)
                    outcome.exported.append(point)
                except Exception as e:  # noqa: BLE001 - the test exports it again and says why
                    outcome.failed.append(point)
                    say(f"{point[0]} {point[1]}: not exported ahead ({first_line(e)}); its "
                        "test exports it")
                    outputs = _outputs_of(e)
                for output in outputs:      # under pytest: with -v only
                    say(output)
    except BaseException:
        # Ctrl-C (or a signal to this process alone): the exports are stopped now, not waited
        # for; the cache keeps only whole entries (export_model renames a finished folder).
        _stop(pool)
        raise
    pool.shutdown(wait=True)
    outcome.wall_s = time.perf_counter() - t0
    say(f"exported {len(outcome.exported)} of {len(todo)} models ahead in "
        f"{outcome.wall_s:.1f} s")
    return outcome


def _outputs_of(error: BaseException) -> list[ExportOutput]:
    """What a failed export's third-party code warned and printed: its error's lines after the
    first, which the session says with -v (the test that exports it again fails with its
    own error and warnings)."""
    rest = str(error).split("\n", 1)[1:]
    return [ExportOutput(rest[0])] if rest and rest[0].strip() else []


def _stop(pool: ProcessPoolExecutor) -> None:
    """End the pool's processes at once. ``shutdown`` alone would wait for the exports that
    are running (a minute for an LLM); the executor keeps its processes in ``_processes``."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process in processes:
        process.join(timeout=5)
