"""Seed-compatible CSV files, for tools and spreadsheets built around the original kit.

``<stem>_all_runs_timeline.csv``  every profiling event: ``block, block_name, run, seq, name,
    instruction_id, delegate_debug_id, delegated, start, end, duration_ms, leaf, category,
    backend, [op_types, module_path,] warmup`` (``run`` -1 = load/init block; ``warmup`` True for
    discarded runs; op_types and module_path, from the .etrecord when given, for portable
    kernels and whole DELEGATE_CALLs).
``<stem>_ops_stats.csv``  one row per operator (name + instruction): ``name, op, instruction_id,
    category, delegated, backend, calls_per_run, mean_ms_per_run, pct_e2e, bottleneck,
    should_delegate, op_types, module_paths`` (means over timed runs).
``kernels.csv``  ``name, kind, isa, isa_family, sme2`` from an xnntrace log (empty without one);
    with a kernel trace, the kernels that *executed* instead, with ``library, blocks,
    streaming_blocks`` added and ``kind`` giving their origin (kleidiai, xnnpack, other).

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
from pytest_sme2.analysis.kernels import KERNEL_COLUMNS, kernels_frame
from pytest_sme2.analysis.summary import Analysis

# Characters that can make the csv module quote a field under pandas' dialect (QUOTE_MINIMAL,
# "," and '"', os.linesep); "\0" because the module may refuse it. A field holding one is
# written by the csv module itself, so the quoting rule is never restated here.
_SPECIAL = (",", '"', "\r", "\n", "\0")


def write_csvs(analysis: Analysis, out_dir: Path, stem: str) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    # assign, not copy + setitem: with copy-on-write the new frames share the analysis' columns.
    run = analysis.events["run"].to_numpy()
    timeline = analysis.events.assign(warmup=(run >= 0) & (run < analysis.warmup))
    ops = analysis.operators.assign(**{col: [";".join(v) for v in analysis.operators[col]]
                                       for col in ("op_types", "module_paths")})
    ev = analysis.evidence
    # Executed kernels are the stronger evidence; a trace that named none still replaces the
    # xnntrace rows (an empty table with the executed columns says "traced, none named").
    if ev.streaming_sme_blocks is not None:
        kernels = csv_text(executed_frame(ev.executed_kernels))
    elif ev.kernels:
        kernels = csv_text(kernels_frame(ev.kernels))
    else:   # the usual case: the header alone, without building an empty frame (~1 ms)
        kernels = _header(KERNEL_COLUMNS)
    paths = [out_dir / f"{stem}_all_runs_timeline.csv", out_dir / f"{stem}_ops_stats.csv",
             out_dir / "kernels.csv"]
    for path, text in zip(paths, (csv_text(timeline), csv_text(ops), kernels)):
        # newline="": the text already ends its lines with os.linesep, as pandas' files do.
        path.write_text(text, encoding="utf-8", newline="")
    return paths


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
