import pandas as pd
import pytest

from pytest_sme2.analysis.latency import (NoRunsError, e2e_per_run, latency_stats,
                                          timed_runs)
from pytest_sme2.readers.etdump import parse_etdump
from tests.fakes.etdumps import Ev, execute_run, make_etdump


def test_e2e_is_method_execute_not_a_sum_of_nested_events():
    runs = [execute_run(0, [("Conv #1", 3000), ("Add #1", 1000)]),
            execute_run(100_000, [("Conv #1", 5000), ("Add #1", 1000)])]
    per_run = e2e_per_run(parse_etdump(make_etdump(runs)))
    # Method::execute spans the ops plus 200 ns of framework time; the nested DELEGATE_CALL
    # and ops are not added on top.
    assert per_run.tolist() == pytest.approx([0.0042, 0.0062])
    assert per_run.index.tolist() == [0, 1]


def test_run_missing_its_execute_event_is_left_out_not_guessed():
    runs = [execute_run(0, [("Conv #1", 3000)]), [Ev(None, 0, 10, 0, debug="Conv #1")],
            execute_run(10_000, [("Conv #1", 3000)])]
    per_run = e2e_per_run(parse_etdump(make_etdump(runs)))
    assert per_run.index.tolist() == [0, 2]


def test_no_method_execute_at_all_is_an_error():
    data = make_etdump([[Ev(None, 0, 10, 0, debug="Conv #1")]])
    with pytest.raises(NoRunsError, match="f.etdump: no Method::execute events in 1 runs"):
        e2e_per_run(parse_etdump(data), source="f.etdump")


def test_zero_runs_is_an_error():
    with pytest.raises(NoRunsError, match="holds no Execute runs"):
        e2e_per_run(parse_etdump(make_etdump([])))


def test_warmup_drops_leading_runs():
    s = pd.Series([9.0, 1.0, 2.0], index=[0, 1, 2])
    assert timed_runs(s, 1).tolist() == [1.0, 2.0]
    assert timed_runs(s, 0).tolist() == [9.0, 1.0, 2.0]


def test_statistics_exact_values():
    st = latency_stats([1.0, 2.0, 3.0, 4.0, 100.0])
    assert st.n == 5
    assert st.median_ms == 3.0
    assert st.mean_ms == 22.0
    assert st.min_ms == 1.0 and st.max_ms == 100.0
    assert st.p10_ms == pytest.approx(1.4)
    assert st.p90_ms == pytest.approx(61.6)
    assert st.std_ms == pytest.approx(43.6176, rel=1e-4)
    assert st.cv_pct == pytest.approx(100 * 43.6176 / 22.0, rel=1e-4)
    assert st.mad_ms == 1.0
    assert st.outliers == 1  # 100 ms is reported, not dropped
    assert st.max_ms == 100.0


def test_single_run_has_zero_spread():
    st = latency_stats([2.5])
    assert (st.n, st.median_ms, st.std_ms, st.cv_pct, st.outliers) == (1, 2.5, 0.0, 0.0, 0)


def test_no_samples_is_an_error():
    with pytest.raises(NoRunsError):
        latency_stats([])
