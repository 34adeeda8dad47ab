"""The session's LLM generations as llama-bench rows (``--sme2-llama-bench FILE``), in the
format the file's extension names — ``.json`` (a list), ``.jsonl`` (one object a line),
``.csv`` (a header, then a row each) or ``.sqlite`` (rows appended to the ``llama_bench``
table) — so that llama.cpp's ``scripts/compare-llama-bench.py -i FILE -b A -c B`` compares two
commits' sessions unchanged.

A llama-bench *test* is one phase of a generation: prefill is ``n_prompt=P, n_gen=0``
(``pp64``), decode ``n_prompt=0, n_gen=N`` (``tg32``). Its samples are one per repetition, as
llama-bench's are one per timed run of the test: each timed generation's phase time (the
phase's ``samples_ms``, every block's in turn). A document written before those were kept gives
decode per generation from ``e2e_ms`` (N decode steps summed) and prefill one per block (its
median). ``avg_ts`` and ``stddev_ts`` are the mean and sample deviation of tokens / sample, as
llama-bench computes them.
Fields that mean something different here are listed in docs/outputs.md; a field with no
ExecuTorch counterpart holds llama-bench's neutral value, never null (the script's join drops a
row with a null key).
"""

from __future__ import annotations

import csv
import io
import json
import sqlite3
import statistics
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pytest_sme2.errors import Sme2Error
from pytest_sme2._util.checkout import git
from pytest_sme2.measure.option_values import LLAMA_BENCH_FORMATS
from pytest_sme2.programs.exported import recorded_parameters
from pytest_sme2.report.grouping import Side
from pytest_sme2.report.view import Source, view_of
from pytest_sme2.results import BlockResult, atomic_write_text

TABLE = "llama_bench"
FORMATS = LLAMA_BENCH_FORMATS
# llama-bench's fields in its order, with their SQL types (tools/llama-bench/llama-bench.cpp,
# test::get_fields and get_field_type); samples_ns and samples_ts go to JSON and JSONL only.
FIELDS: dict[str, str] = {
    "build_commit": "TEXT", "build_number": "INTEGER", "cpu_info": "TEXT", "gpu_info": "TEXT",
    "backends": "TEXT", "model_filename": "TEXT", "model_type": "TEXT",
    "model_size": "INTEGER", "model_n_params": "INTEGER", "n_batch": "INTEGER",
    "n_ubatch": "INTEGER", "n_threads": "INTEGER", "cpu_mask": "TEXT", "cpu_strict": "INTEGER",
    "poll": "INTEGER", "type_k": "TEXT", "type_v": "TEXT", "n_gpu_layers": "INTEGER",
    "split_mode": "TEXT", "main_gpu": "INTEGER", "no_kv_offload": "INTEGER",
    "flash_attn": "INTEGER", "tensor_split": "TEXT", "tensor_buft_overrides": "TEXT",
    "use_mmap": "INTEGER", "embeddings": "INTEGER", "no_op_offload": "INTEGER",
    "n_prompt": "INTEGER", "n_gen": "INTEGER", "n_depth": "INTEGER", "test_time": "TEXT",
    "avg_ns": "INTEGER", "stddev_ns": "INTEGER", "avg_ts": "REAL", "stddev_ts": "REAL",
    # Newer llama-bench fields the comparison script joins on too.
    "n_cpu_moe": "INTEGER", "fit_target": "INTEGER", "fit_min_ctx": "INTEGER",
}
SAMPLES = ("samples_ns", "samples_ts")
# What llama-bench writes where ExecuTorch has nothing of the kind: no GPU, no offload, no
# split, no flash attention (the programs use plain attention), no mmap (our runner reads the
# file: Module::LoadMode::File), no embeddings mode, llama-bench's default poll.
NEUTRAL: dict[str, Any] = {
    "gpu_info": "", "cpu_strict": 0, "poll": 50, "n_gpu_layers": 0, "split_mode": "none",
    "main_gpu": 0, "no_kv_offload": 0, "flash_attn": 0, "tensor_split": "0.00",
    "tensor_buft_overrides": "none", "use_mmap": 0, "embeddings": 0, "no_op_offload": 0,
    "type_k": "f32", "type_v": "f32", "n_depth": 0, "n_cpu_moe": 0, "fit_target": 0,
    "fit_min_ctx": 0,
}


def build_info(rootdir: Path, commit: str | None = None) -> tuple[str, int]:
    """(``git rev-parse --short`` of ``commit``, the session's (its identity's; None: HEAD),
    in the user's repository at ``rootdir``, its commit count): "unknown" and 0 outside git."""
    short = git(["rev-parse", "--short", commit or "HEAD"], rootdir)
    count = git(["rev-list", "--count", commit or "HEAD"], rootdir) if short else None
    return short or "unknown", int(count) if count and count.isdigit() else 0


def _block_samples(b: BlockResult, phase: str) -> list[float]:
    """One ms sample per timed generation of ``b``'s ``phase`` (see the module's docstring for
    a document written before they were kept)."""
    stats = b.generation.phase(phase)
    if stats.samples_ms:
        return list(stats.samples_ms)
    if phase == "prefill":
        return [stats.median_ms] if stats.median_ms is not None else []
    steps, per = list(b.e2e_ms), max(stats.executes, 1)   # e2e_ms: every timed decode step
    return [sum(steps[i:i + per]) for i in range(0, len(steps) - per + 1, per)]


def _samples(side: Side, phase: str) -> list[float]:
    """One ns sample per repetition (a timed generation), every block's in turn."""
    return [ms * 1e6 for b in side.blocks for ms in _block_samples(b, phase)]


def _cpu_mask(mask: str | None) -> str:
    """llama-bench's ``--cpu-mask`` text: hexadecimal with ``0x``; ``0x0`` (its default) where
    the runner was pinned to no mask."""
    return f"0x{mask.lower().removeprefix('0x')}" if mask else "0x0"


def _spread(values: Sequence[float]) -> float:
    return statistics.stdev(values) if len(values) > 1 else 0.0


def _row(side: Side, phase: str, tokens: int, build: tuple[str, int],
         test_time: str) -> dict[str, Any] | None:
    first: BlockResult = side.first
    g = first.generation
    ns = _samples(side, phase)
    if not ns or tokens <= 0 or min(ns) <= 0:
        return None
    ts = [tokens * 1e9 / s for s in ns]
    startup = side.startup
    size = sum(v or 0 for v in ((startup.pte_bytes, startup.ptd_bytes) if startup else ()))
    return {
        **NEUTRAL,
        "build_commit": build[0], "build_number": build[1],
        "cpu_info": first.device.cpu or first.device.model or first.device.kind,
        # llama-bench's -m as given: the model as the session named it, the same at every
        # commit (the export cache's path changes with the program, and the script joins on it).
        "backends": "XNNPACK", "model_filename": first.model,
        "model_type": f"{Path(first.model).name} {first.dtype} ({first.runner_name} runner)",
        "model_size": size, "model_n_params": recorded_parameters(first.pte) or 0,
        "n_batch": g.prompt_tokens, "n_ubatch": g.prompt_tokens, "n_threads": first.threads,
        "cpu_mask": _cpu_mask(first.cpu_mask),
        "n_prompt": tokens if phase == "prefill" else 0,
        "n_gen": tokens if phase == "decode" else 0, "n_depth": g.depth,
        "test_time": test_time,
        "avg_ns": round(statistics.fmean(ns)), "stddev_ns": round(_spread(ns)),
        "avg_ts": statistics.fmean(ts), "stddev_ts": _spread(ts),
        "samples_ns": [round(s) for s in ns], "samples_ts": ts,
    }


def llama_bench_rows(source: Source, build: tuple[str, int], now: datetime | None = None
                     ) -> list[dict[str, Any]]:
    """One row per phase of every benchmark measured as a generation; ``build`` is
    (build_commit, build_number): :func:`build_info`."""
    test_time = (now or datetime.now(timezone.utc)).strftime("%Y-%m-%dT%H:%M:%SZ")
    rows = []
    for side in view_of(source).generation_sides:
        g = side.first.generation
        for phase, tokens in (("prefill", g.prompt_tokens), ("decode", g.new_tokens)):
            row = _row(side, phase, tokens, build, test_time)
            if row is not None:
                rows.append(row)
    return rows


def _sqlite(path: Path, rows: list[dict[str, Any]]) -> None:
    """Rows appended to the ``llama_bench`` table (created as llama-bench's ``-o sql`` does):
    two sessions' files in one database are what the comparison script reads."""
    with sqlite3.connect(path) as db:
        db.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} ("
                   + ", ".join(f"{k} {t}" for k, t in FIELDS.items()) + ")")
        db.executemany(f"INSERT INTO {TABLE} ({', '.join(FIELDS)}) VALUES "
                       f"({', '.join('?' * len(FIELDS))})",
                       [tuple(r[k] for k in FIELDS) for r in rows])


def write_llama_bench(path: Path, rows: list[dict[str, Any]]) -> Path:
    """``rows`` in ``path``'s format: JSON and CSV written whole, JSONL and SQLite appended to
    (as llama-bench's output is collected across commits)."""
    fmt = path.suffix.lower()
    if fmt not in FORMATS:
        raise Sme2Error(f"--sme2-llama-bench {path}: the extension names the format; use one "
                        f"of {', '.join(FORMATS)}")
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt == ".sqlite":
        _sqlite(path, rows)
    elif fmt == ".jsonl":
        with open(path, "a", encoding="utf-8") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in rows)
    elif fmt == ".json":
        atomic_write_text(path, json.dumps(rows, indent=2) + "\n")
    else:
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=list(FIELDS), extrasaction="ignore",
                                lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        atomic_write_text(path, out.getvalue())
    return path
