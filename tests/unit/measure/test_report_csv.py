"""The seed-compatible CSVs are byte for byte what pandas' ``to_csv`` writes: ``csv_text`` builds
the text itself for the column types our frames hold and leaves every other frame to pandas."""

from __future__ import annotations

import csv
import io
import os
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_sme2.analysis.summary import Analysis, analyze
from pytest_sme2.readers.etdump import parse_etdump
from pytest_sme2.measure.artifacts import csv as report_csv
from pytest_sme2.measure.artifacts.csv import (csv_text, kernels_table, ops_stats_frame,
                                               timeline_frames, write_csvs)
from pytest_sme2.results import LoggedKernel, TracedKernel
from tests.fakes.etdumps import make_etdump, program_run

NASTY = ["", " ", "plain", "a,b", 'say "hi"', '"', ",", "line\nbreak", "cr\rhere", "crlf\r\n",
         "tab\tin", " lead", "trail ", "ünï\u00e7ødé", "emoji \U0001f600", "\u2028sep", "x\x0by",
         ";", "nan", "None", "True", "1e-05", "'single'", "\\back"]


def pandas_files(analysis: Analysis, stem: str = "native") -> list[bytes]:
    """The files ``write_csvs`` writes, in its order, as pandas ``to_csv`` writes its frames."""
    timed, run0, warm = timeline_frames(analysis, stem)
    out = []
    for frame in (timed, ops_stats_frame(analysis, stem), kernels_table(analysis, stem), run0,
                  warm):
        buffer = io.BytesIO()
        frame.to_csv(buffer, index=False)
        out.append(buffer.getvalue())
    return out


def spy_to_csv(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts ``DataFrame.to_csv`` calls: says whether ``csv_text`` fell back to pandas."""
    calls: list[int] = []
    real = pd.DataFrame.to_csv

    def spy(self, *args, **kwargs):
        calls.append(1)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(pd.DataFrame, "to_csv", spy)
    return calls


@pytest.fixture
def to_csv_calls(monkeypatch) -> list[int]:
    return spy_to_csv(monkeypatch)


def built_as_pandas_builds_it(frame: pd.DataFrame, to_csv_calls: list[int]) -> None:
    """``csv_text`` built the text itself (no ``to_csv``), and pandas would write the same."""
    before = len(to_csv_calls)
    text = csv_text(frame)
    assert len(to_csv_calls) == before, frame.dtypes
    assert text == frame.to_csv(index=False)


def crafted_analysis() -> Analysis:
    """A real analysis of a crafted ETDump (delegated and portable operators, 2 warm-up runs),
    with ETRecord op types and module paths holding commas and quotes."""
    from pytest_sme2.readers.etrecord import ETRecordInfo, InstructionInfo

    calls = [("delegate", 0, [("Convolution (NHWC, F32) IGEMM #1", 1234),
                              ("Fully Connected (NC, F32) GEMM #1", 777)]),
             ("portable", 1, [("_adaptive_avg_pool2d", 321)]),
             ("delegate", 2, [("Add (ND) #1", 55)])]
    runs = [program_run(r * 10_000_000, calls, framework_ns=100 + r) for r in range(6)]
    rec = ETRecordInfo({0: InstructionInfo("XnnpackBackend", ("aten.convolution.default",
                                                              "aten.linear.default"),
                                           ('features.0,"conv"', "classifier")),
                        1: InstructionInfo(None, ("aten._adaptive_avg_pool2d.default",),
                                           ("pool\nlayer",))})
    return analyze(parse_etdump(make_etdump(runs)), warmup=2, etrecord=rec)


def test_write_csvs_writes_the_bytes_pandas_wrote_for_a_real_analysis(tmp_path, to_csv_calls):
    analysis = crafted_analysis()
    assert analysis.events["module_path"].str.contains('"').any()   # quoting is exercised
    paths = write_csvs(analysis, tmp_path, "native")
    assert [p.name for p in paths] == ["native_all_runs_timeline.csv", "native_ops_stats.csv",
                                       "kernels.csv", "native_run0_timeline.csv",
                                       "native_warmup_timeline.csv"]
    assert not to_csv_calls   # the frames of an analysis never need the fallback
    assert [p.read_bytes() for p in paths] == pandas_files(analysis)


@pytest.mark.parametrize("evidence", [
    {"kernels": [LoggedKernel("xnn_f32_gemm_minmax_ukernel_4x8__neon", "gemm", "neon", False),
                 LoggedKernel('odd,"name"', "igemm", "sme2", True)]},
    {"executed_kernels": [TracedKernel("kai_matmul_clamp_f32_sme2", "SME2", "kleidiai",
                                       "libkai", 12, 7)], "streaming_sme_blocks": 7},
    # traced, none named: the executed columns
    {"executed_kernels": [], "streaming_sme_blocks": 0},
], ids=["xnntrace", "executed", "traced-none"])
def test_kernels_csv_matches_pandas_for_every_kind_of_evidence(tmp_path, evidence):
    analysis = crafted_analysis()
    analysis = replace(analysis, evidence=replace(analysis.evidence, **evidence))
    paths = write_csvs(analysis, tmp_path, "s")
    assert paths[2].read_bytes() == pandas_files(analysis, "s")[2]


# -- synthetic frames: every column type handled here, nasty values -------------------------

text = st.one_of(st.sampled_from(NASTY), st.text(max_size=12))
maybe_text = st.one_of(text, st.none())


def text_categories(values: list) -> pd.Categorical:
    present = sorted({v for v in values if v is not None})
    return pd.Categorical(values, categories=pd.Index(present, dtype="str"))


# kind -> (one cell, the column from a list of cells)
KINDS = {
    "int8": (st.integers(-128, 127), lambda v: np.array(v, np.int8)),
    "int32": (st.integers(-2**31, 2**31 - 1), lambda v: np.array(v, np.int32)),
    "int64": (st.integers(-2**63, 2**63 - 1), lambda v: np.array(v, np.int64)),
    "uint64": (st.integers(0, 2**64 - 1), lambda v: np.array(v, np.uint64)),
    "few ints": (st.integers(-2, 2), lambda v: np.array(v, np.int32)),   # the lookup table
    "bool": (st.booleans(), lambda v: np.array(v, bool)),
    "float64": (st.floats(), lambda v: np.array(v, np.float64)),
    "float32": (st.floats(width=32), lambda v: np.array(v, np.float32)),
    "str": (maybe_text, lambda v: pd.array(v, dtype="str")),
    "string": (maybe_text, lambda v: pd.array(v, dtype="string")),
    "object str": (st.one_of(maybe_text, st.just(float("nan"))),
                   lambda v: np.array(v, dtype=object)),
    "category": (maybe_text, text_categories),
}


@st.composite
def frames(draw) -> pd.DataFrame:
    kinds = draw(st.lists(st.sampled_from(sorted(KINDS)), min_size=2, max_size=6))
    n = draw(st.integers(0, 12))
    columns = []
    for kind in kinds:
        cell, column = KINDS[kind]
        columns.append(column(draw(st.lists(cell, min_size=n, max_size=n))))
    frame = pd.DataFrame(dict(enumerate(columns)))
    # Any text, repeated or not: duplicate labels are written as they are.
    frame.columns = draw(st.lists(text, min_size=len(kinds), max_size=len(kinds)))
    return frame


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frames())
def test_any_frame_of_handled_columns_is_written_as_pandas_writes_it(frame):
    with pytest.MonkeyPatch.context() as mp:
        built_as_pandas_builds_it(frame, spy_to_csv(mp))


def test_edge_values_of_every_handled_type(to_csv_calls):
    floats = [1e-05, 0.0001, 9.999999999999999e-05, 1e16, 9999999999999998.0,
              1.0000000000000002e16, 123456789012345680.0, -0.0, 0.0, -1.5, 14.178581,
              0.1 + 0.2, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, np.inf,
              -np.inf, np.nan, 1 / 3, -1e-7, 100.0, 1e22]
    n = len(floats)
    with np.errstate(over="ignore"):   # the largest overflow to inf: values worth writing too
        singles, halves = np.array(floats, np.float32), np.array(floats, np.float16)
    ints = np.resize(np.array([0, -1, 2**63 - 1, -2**63, 7], np.int64), n)
    frame = pd.DataFrame({
        "float64": np.array(floats),
        "float32": singles,
        "float16": halves,
        "int64": ints,
        "int8 wide": np.resize(np.array([-128, 127, 0], np.int8), n),
        "uint64": np.resize(np.array([0, 2**64 - 1, 5], np.uint64), n),
        "uint8": np.resize(np.array([0, 255], np.uint8), n),
        "bool": np.resize([True, False, False], n),
        "str": pd.array(np.resize(NASTY, n).tolist()[:-1] + [None], dtype="str"),
        "object": np.array(np.resize(NASTY, n).tolist()[:-2] + [None, np.nan], dtype=object),
        "category": pd.Categorical(np.resize(NASTY, n).tolist()[:-1] + [None]),
        'label, "quoted"\n': np.arange(n),
    })
    built_as_pandas_builds_it(frame, to_csv_calls)
    built_as_pandas_builds_it(frame.iloc[:0], to_csv_calls)   # header only
    # Ranges narrower than the column go through the lookup table: offsets must not wrap.
    wide = pd.DataFrame({"int8": np.resize(np.arange(-100, 101, dtype=np.int8), 600),
                         "int16": np.resize(np.arange(-20000, 20001, 100, dtype=np.int16), 600),
                         "uint8": np.resize(np.arange(256, dtype=np.uint8), 600),
                         "uint64": np.resize(np.array([2**64 - 1, 2**64 - 2], np.uint64), 600),
                         "int64": np.resize(np.array([-2**63, -2**63 + 1], np.int64), 600)})
    built_as_pandas_builds_it(wide, to_csv_calls)


def test_the_csv_module_quotes_only_fields_holding_the_characters_we_watch():
    """The premise of the fast path: under pandas' dialect the csv module of this Python
    quotes a field (among others) only when it holds one of ``_SPECIAL``."""
    chars = [chr(c) for c in range(0x3000)] + ["\u2028", "\u2029", "\ufeff", "\U0001f600"]
    for c in chars:
        for field in (c, f"a{c}b", f" {c} "):
            written = report_csv._csv_field(field)
            if not any(s in field for s in report_csv._SPECIAL):
                assert written == field, repr(field)
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator=os.linesep).writerow(["", ""])
    assert buffer.getvalue() == "," + os.linesep   # empty fields beside others: unquoted


# -- the fallback: frames this module does not format itself ------------------------------

@pytest.mark.parametrize("frame", [
    pd.DataFrame({"when": pd.to_datetime(["2024-01-02", None]), "n": [1, 2]}),
    pd.DataFrame({"span": pd.to_timedelta([1, 2], unit="s"), "n": [1, 2]}),
    pd.DataFrame({"nullable": pd.array([1, None], dtype="Int64"), "n": [1, 2]}),
    pd.DataFrame({"maybe": pd.array([True, None], dtype="boolean"), "n": [1, 2]}),
    pd.DataFrame({"numbers": pd.Categorical([1.5, 2.0, None]), "n": [1, 2, 3]}),
    pd.DataFrame({"mixed": np.array(["a,b", 1, 2.5, True, None], dtype=object),
                  "n": range(5)}),
    pd.DataFrame({"bytes": np.array([b"a,b", "b"], dtype=object), "n": [1, 2]}),
    pd.DataFrame({"complex": [1 + 2j, 3j], "n": [1, 2]}),
    pd.DataFrame({"alone": ["", "x", ""]}),   # a lone empty field is quoted
    pd.DataFrame({1: [1.5, 2.5], "n": [1, 2]}),   # a label that is not text
    pd.DataFrame([[1, 2]], columns=pd.MultiIndex.from_tuples([("a", "b"), ("a", "c")])),
], ids=["datetime", "timedelta", "Int64", "boolean", "float-category", "mixed-object",
        "bytes", "complex", "one-column", "int-label", "multiindex"])
def test_frames_with_other_columns_go_to_pandas_and_still_match(frame, to_csv_calls):
    text = csv_text(frame)
    assert to_csv_calls == [1]
    assert text == frame.to_csv(index=False)
