"""Seed-compatible CSV files: the files the original SME2 profiling kit's ``etdump_to_csv.py``
and ``xnntrace_to_kernels.py`` write, read by its tools (``analyze_etdump_csv.py``,
``robust_latency_analysis.py``, ``generate_kernel_view.py``) and by scripts built on them.

Every file starts with the kit's columns, with the kit's meanings, and goes on with ours;
docs/reference/csv-files.md describes each column.

``<stem>_all_runs_timeline.csv``  one row per event per *timed* run, plus the load/init events
    (``run_index`` 0, as the kit's files hold them). ``run_index`` counts the timed runs from 0:
    the kit ran its warm-up in a process of its own, so its files never hold warm-up runs, and
    its tools average every run they find.
``<stem>_run0_timeline.csv``  the rows of ``run_index`` 0 (load/init and the first timed run).
``<stem>_warmup_timeline.csv``  the warm-up runs, the same columns, ``run_index`` counting them
    from 0 (only the header without warm-up).
``<stem>_ops_stats.csv``  one row per operator (name + instruction), means over timed runs.
``kernels.csv``  the micro-kernels an xnntrace log names; with a kernel trace, the kernels that
    *executed* instead (our columns ``library, blocks, streaming_blocks`` added).

The files are byte for byte what ``DataFrame.to_csv(path, index=False)`` writes; ``csv_text``
produces that text several times faster for the column types these frames hold.
"""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path

import numpy as np
import pandas as pd

from pytest_sme2.analysis.kernel_trace import executed_frame
from pytest_sme2.analysis.categories import op_name
from pytest_sme2.analysis.isa import kernel_category, kernel_name_fields
from pytest_sme2.analysis.kernels import (KERNEL_COLUMNS, kernels_frame, log_category,
                                          operator_kernel_hints)
from pytest_sme2.analysis.operators import PORTABLE, UNKNOWN_DELEGATE
from pytest_sme2.analysis.summary import Analysis
from pytest_sme2.readers.etdump import TICKS_PER_MS

# The kit's columns, in the kit's order; ours follow them.
TIMELINE_COLUMNS = ["model_id", "name", "type", "delegate_backend", "start_us", "end_us",
                    "duration_ms", "pct_total", "node_id", "run_index", "block"]
OPS_STATS_COLUMNS = ["model_id", "name", "type", "delegate_backend", "count", "total_ms",
                     "avg_ms", "pct_total"]
KIT_KERNEL_COLUMNS = ["model_id", "kernel_name", "category", "count", "dtype", "xnn_op",
                      "variant", "ukernel_shape", "arch_chain", "has_sme", "has_sme2"]
# The kit's delegate_backend of a delegated event whose backend no .etrecord names.
DELEGATED = "delegated"

# Characters that can make the csv module quote a field under pandas' dialect (QUOTE_MINIMAL,
# "," and '"', os.linesep); "\0" because the module may refuse it. A field holding one is
# written by the csv module itself, so the quoting rule is never restated here.
_SPECIAL = (",", '"', "\r", "\n", "\0")


def write_csvs(analysis: Analysis, out_dir: Path, stem: str,
               model_id: str | None = None) -> list[Path]:
    """Write the five files; ``model_id`` (the kit's first column) defaults to ``stem``.
    Returns their paths: all-runs timeline, ops stats, kernels, run-0 and warm-up timelines."""
    out_dir.mkdir(parents=True, exist_ok=True)
    model = stem if model_id is None else model_id
    timed, run0, warm = timeline_frames(analysis, model)
    texts = {f"{stem}_all_runs_timeline.csv": csv_text(timed),
             f"{stem}_ops_stats.csv": csv_text(ops_stats_frame(analysis, model)),
             "kernels.csv": _kernels_text(analysis, model),
             f"{stem}_run0_timeline.csv": csv_text(run0),
             f"{stem}_warmup_timeline.csv": csv_text(warm)}
    paths = []
    for name, text in texts.items():
        # newline="": the text already ends its lines with os.linesep, as pandas' files do.
        (out_dir / name).write_text(text, encoding="utf-8", newline="")
        paths.append(out_dir / name)
    return paths


def write_timed_runs(path: Path, e2e_all: pd.Series, warmup: int, source: str) -> Path:
    """One row per timed run (warm-up ones first, flagged): its latency as the report took it
    (``source`` says which runs and which clock), beside the event timelines, which are the
    traced runs'."""
    runs = e2e_all.index.to_numpy()
    frame = pd.DataFrame({"run_index": np.arange(len(runs)), "e2e_ms": e2e_all.to_numpy(),
                          "warmup": np.arange(len(runs)) < warmup, "source": source})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(csv_text(frame), encoding="utf-8", newline="")
    return path


def base_type(name: str) -> str:
    """The kit's ``type``: the event name without surrounding quotes and without XNNPACK's
    per-delegate ``#n`` instance suffix (``Convolution (NHWC, F32) IGEMM #3`` -> ``Convolution
    (NHWC, F32) IGEMM``)."""
    name = name.strip().strip('"')
    head, sep, _ = name.rpartition(" #")
    return head if sep else name


def _text_column(values: pd.Series, fn) -> np.ndarray:
    """``fn`` of every cell of a text column (categorical or not), computed once per distinct
    value; missing cells give ""."""
    codes, uniques = pd.factorize(values, use_na_sentinel=True)
    table = np.array([fn(str(u)) for u in uniques] + [""], dtype=object)
    return table[np.where(codes < 0, len(uniques), codes)]


def _delegate_backend(delegated: np.ndarray, backend: pd.Series) -> np.ndarray:
    """The kit's ``delegate_backend``: the backend of a delegated event (``delegated`` when no
    .etrecord names it), ``portable`` for every other event, runtime containers included."""
    named = _text_column(backend, lambda b: DELEGATED if b in ("", UNKNOWN_DELEGATE) else b)
    return np.where(delegated, named, PORTABLE).astype(object)


def timeline_frames(analysis: Analysis, model_id: str
                    ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(all runs, run 0, warm-up) timeline frames: the kit's columns, then ours (``block_index,
    run, seq, instruction_id, delegate_debug_id, delegated, start, end, leaf, category, backend,
    [op_types, module_path,] warmup``)."""
    ev = analysis.events
    run = ev["run"].to_numpy().astype(np.int64)
    warm = (run >= 0) & (run < analysis.warmup)
    # Load/init events go with the first timed run, as the kit's Inspector rows put them.
    run_index = np.where(warm, run, np.maximum(run - analysis.warmup, 0))
    duration = ev["duration_ms"].to_numpy()
    # pct_total: the share of the summed event time of the run the row is in, in its file.
    group = np.where(warm, run_index, run_index + analysis.warmup)
    sums = np.bincount(group, weights=np.nan_to_num(duration), minlength=1)
    total = sums[group]
    with np.errstate(divide="ignore", invalid="ignore"):
        pct = np.where(total > 0, duration / total * 100.0, 0.0)
    # node_id: one id per event of the program, the same in every run (the kit numbers its
    # Inspector rows): the load/init blocks' events first, then the run's events in order.
    seq = ev["seq"].to_numpy().astype(np.int64)
    node_key = np.where(run < 0, ev["block"].to_numpy().astype(np.int64), -1)
    node_id, _ = pd.factorize(node_key * (int(seq.max(initial=0)) + 1) + seq)
    us_per_tick = 1000.0 / TICKS_PER_MS
    delegated = ev["delegated"].to_numpy()
    columns = {
        "model_id": np.full(len(ev), model_id, dtype=object),
        "name": ev["name"].array,
        "type": _text_column(ev["name"], base_type),
        "delegate_backend": _delegate_backend(delegated, ev["backend"]),
        "start_us": ev["start"].to_numpy().astype(np.float64) * us_per_tick,
        "end_us": ev["end"].to_numpy().astype(np.float64) * us_per_tick,
        "duration_ms": duration,
        "pct_total": pct,
        "node_id": node_id.astype(np.int64),
        "run_index": run_index,
        "block": ev["block_name"].array,
        "block_index": ev["block"].array,
    }
    ours = [c for c in ev.columns if c not in ("block", "block_name", "name", "duration_ms")]
    # Arrays, not Series: no index to align, column by column.
    frame = pd.DataFrame({**columns, **{c: ev[c].array for c in ours}, "warmup": warm})
    timed = frame[~warm].reset_index(drop=True)
    return (timed, timed[timed["run_index"].to_numpy() == 0].reset_index(drop=True),
            frame[warm].reset_index(drop=True))


def ops_stats_frame(analysis: Analysis, model_id: str) -> pd.DataFrame:
    """One row per operator: the kit's columns (``count`` its calls per timed run, ``total_ms``
    its mean time per timed run, ``avg_ms`` per call, ``pct_total`` its share of the file's
    summed ``total_ms``), then ours (:data:`~pytest_sme2.analysis.operators.OPERATOR_COLUMNS`
    but ``name``; ``op_types`` and ``module_paths`` joined with ``;``)."""
    ops = analysis.operators
    calls = ops["calls_per_run"].to_numpy(dtype=np.float64)
    total = ops["mean_ms_per_run"].to_numpy(dtype=np.float64)
    summed = float(np.nansum(total))
    with np.errstate(divide="ignore", invalid="ignore"):
        avg = np.where(calls > 0, total / calls, 0.0)
        pct = total / summed * 100.0 if summed > 0 else np.zeros(len(ops))
    columns = {
        "model_id": np.full(len(ops), model_id, dtype=object),
        "name": ops["name"].array,
        "type": _text_column(ops["name"], base_type),
        "delegate_backend": _delegate_backend(ops["delegated"].to_numpy(dtype=bool),
                                              ops["backend"]),
        "count": np.rint(calls).astype(np.int64),
        "total_ms": total,
        "avg_ms": avg,
        "pct_total": pct,
    }
    ours = {c: ([";".join(v) for v in ops[c]] if c in ("op_types", "module_paths")
                else ops[c].array) for c in ops.columns if c != "name"}
    return pd.DataFrame({**columns, **ours})


def _operators_served(analysis: Analysis, names: list[str]) -> list[int]:
    """Per executed kernel, the ETDump's operators (instances) of the datatype it serves
    (:func:`~pytest_sme2.analysis.kernels.operator_kernel_hints`); 0 for packing kernels."""
    hints = operator_kernel_hints(analysis.operators["name"], analysis.evidence.executed_kernels)
    served: dict[str, int] = {}
    for op in analysis.operators["name"]:
        for kernel in hints.get(op_name(op), ()):
            served[kernel] = served.get(kernel, 0) + 1
    return [served.get(name, 0) for name in names]


def kernels_table(analysis: Analysis, model_id: str) -> pd.DataFrame:
    """The kernels file: the kit's columns, then ours (``kind, isa, isa_family, sme2``; for
    executed kernels ``library, blocks, streaming_blocks`` too). ``category`` and ``count``
    come from the xnntrace log; for an executed kernel no log names (QEMU's kernel trace),
    ``category`` from its name and ``count`` the operators it serves."""
    ev = analysis.evidence
    # Executed kernels are the stronger evidence; a trace that named none still replaces the
    # xnntrace rows (an empty table with the executed columns says "traced, none named").
    executed = ev.streaming_sme_blocks is not None
    ours = executed_frame(ev.executed_kernels) if executed else kernels_frame(ev.kernels)
    counts = analysis.kernel_log_counts
    names = ours["name"].tolist()
    logged: dict[str, tuple[str, int]] = {}
    for (name, kind), n in counts.items():
        logged.setdefault(name, (kind, n))
    if executed:
        served = _operators_served(analysis, names)
        per_row = [logged.get(name, (kernel_category(name), n))
                   for name, n in zip(names, served)]
    else:
        per_row = [(kind, counts.get((name, kind))) for name, kind in zip(names, ours["kind"])]
    fields = [kernel_name_fields(name) for name in names]
    family = ours["isa_family"].tolist()
    kit = pd.DataFrame({
        "model_id": [model_id] * len(names),
        "kernel_name": names,
        "category": [log_category(kind) for kind, _ in per_row],
        "count": ["" if n is None else str(n) for _, n in per_row],
        **{col: [f[i] for f in fields] for i, col in
           enumerate(("dtype", "xnn_op", "variant", "ukernel_shape", "arch_chain"))},
        "has_sme": [int(f in ("SME", "SME2")) for f in family],
        "has_sme2": [int(f == "SME2") for f in family],
    }, columns=KIT_KERNEL_COLUMNS).astype({"has_sme": np.int64, "has_sme2": np.int64})
    return pd.concat([kit, ours.drop(columns="name")], axis=1)


def _kernels_text(analysis: Analysis, model_id: str) -> str:
    ev = analysis.evidence
    if ev.streaming_sme_blocks is None and not ev.kernels:
        # the usual case: the header alone, without building an empty frame (~1 ms)
        return _header(KIT_KERNEL_COLUMNS + [c for c in KERNEL_COLUMNS if c != "name"])
    return csv_text(kernels_table(analysis, model_id))


def csv_text(frame: pd.DataFrame) -> str:
    """``frame.to_csv(index=False)``, the same text, built column by column: each column is
    formatted once (the way pandas formats it) and rows are joined, instead of pandas passing
    every cell through the csv module. Frames with a column type not handled here, a label
    that is not a string, or a single column (the csv module quotes a lone empty field) are
    written by pandas."""
    labels = list(frame.columns)
    if len(labels) < 2 or any(type(label) is not str for label in labels):
        return frame.to_csv(index=False)
    columns = []
    for _, column in frame.items():
        fields = _fields(column.array)
        if fields is None:
            return frame.to_csv(index=False)
        columns.append(fields)
    if len(frame) == 0:
        return _header(labels)
    end = os.linesep
    return _header(labels) + end.join(map(",".join, zip(*columns))) + end


def _header(labels: list[str]) -> str:
    """The header line; with no rows, the whole file."""
    return ",".join(_quoted(labels)) + os.linesep


def _fields(values: pd.api.extensions.ExtensionArray) -> list[str] | None:
    """The column's cells as pandas writes them (missing values empty), or None if this
    column type is left to pandas."""
    dtype = values.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        # Only text categories (pandas 3 keeps them as strings, pandas 2 as objects): pandas
        # hands other category values to the csv module as objects, whose text (numpy scalars'
        # repr) is not worth restating here.
        categories = dtype.categories.array
        texts = _fields(categories) if isinstance(categories.dtype, pd.StringDtype) or \
            categories.dtype.kind == "O" else None
        if texts is None:
            return None
        # Code -1 (missing) picks the trailing "".
        return np.array([*texts, ""], dtype=object)[values.codes].tolist()
    if isinstance(dtype, pd.StringDtype):
        return _quoted(_blank_missing(values.tolist(), values.isna()))
    if not isinstance(values, pd.arrays.NumpyExtensionArray):
        return None   # nullable ints/bools, datetimes, intervals, sparse, ...
    array = values.to_numpy()
    kind = array.dtype.kind
    if kind == "b":
        return np.array(["False", "True"], dtype=object)[array.view(np.uint8)].tolist()
    if kind in "iu":
        return _integers(array)
    if kind == "f":
        # pandas writes floats with ndarray.astype(str): for float64 that is repr(float),
        # which is cheaper to call; other widths have their own shortest text.
        texts = list(map(repr, array.tolist())) if array.dtype == np.float64 \
            else array.astype(str).tolist()
        return _blank_missing(texts, np.isnan(array))
    if kind == "O":
        texts = _blank_missing(array.tolist(), pd.isna(array))
        # The csv module writes other objects with str() or repr(): leave those to pandas.
        return _quoted(texts) if set(map(type, texts)) <= {str} else None
    return None   # complex, bytes, ...


def _integers(array: np.ndarray) -> list[str]:
    if len(array) == 0:
        return []
    low, high = int(array.min()), int(array.max())
    if high - low < len(array):   # few distinct values (block, run, seq, ids): look them up
        table = np.array([str(v) for v in range(low, high + 1)], dtype=object)
        # Offsets in 64 bits: a narrow type could wrap (int8 -128..127 spans 255).
        return table[array.astype(np.uint64 if array.dtype.kind == "u" else np.int64) - low
                     ].tolist()
    return list(map(str, array.tolist()))


def _blank_missing(texts: list, missing: np.ndarray) -> list:
    """``texts`` with the missing cells empty (pandas' default ``na_rep``); changes ``texts``."""
    for i in np.flatnonzero(missing).tolist():
        texts[i] = ""
    return texts


def _quoted(texts: list[str]) -> list[str]:
    """``texts`` with every field that needs it quoted exactly as pandas' csv writer does."""
    distinct = set(texts)
    joined = "".join(distinct)
    if not any(c in joined for c in _SPECIAL):
        return texts
    special = {t: _csv_field(t) for t in distinct if any(c in t for c in _SPECIAL)}
    return [special.get(t, t) for t in texts]


def _csv_field(text: str) -> str:
    buffer = io.StringIO()
    # pandas' dialect (pandas.io.formats.csvs.CSVFormatter); a leading field keeps this one
    # from being a lone field, which the module would quote even when empty.
    csv.writer(buffer, lineterminator=os.linesep, delimiter=",", quotechar='"',
               quoting=csv.QUOTE_MINIMAL, doublequote=True, escapechar=None
               ).writerow(("x", text))
    return buffer.getvalue()[2:-len(os.linesep)]
