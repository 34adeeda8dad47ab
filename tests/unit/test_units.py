"""One formatter per unit: the texts every report, the command line and the gate's messages
print for a ms, a ratio, a share, a change."""

from __future__ import annotations

import pytest

from pytest_sme2 import units
from pytest_sme2.stats import Interval

IV = Interval(1.2149, 1.1451, 1.2749)


def test_a_ratio_with_its_interval_reads_alike_from_a_record_and_from_results_json():
    assert units.ratio_interval(IV) == "1.215x [1.145, 1.275]"
    assert units.ratio_interval(IV.to_dict(), units.COMPACT_RATIO_DIGITS) == \
        "1.21x [1.15, 1.27]"
    assert str(IV) == units.ratio_interval(IV)
    assert (units.ratio(IV.point), units.interval(IV)) == ("1.215x", "[1.145, 1.275]")
    assert units.ratio(0.99876, units.COUNT_RATIO_DIGITS) == "0.9988x"


def test_four_percentages_four_names():
    assert units.percent(12.345) == "12.3"           # a share or a CV, under a % heading
    assert units.share(12.345) == "12.3%"            # of E2E
    assert units.change(12.345) == "+12.3%"          # against a base
    assert units.change(-4.0) == "-4.0%"
    assert units.points(1.25) == "+1.2 pp"           # a share's change
    assert units.fraction(0.1234) == "12.3%"         # a relative number
    assert units.fraction(41800.0) == ">1000%"
    assert units.plus_minus(1.25) == "±1.2%"


@pytest.mark.parametrize("values, text", [([7.21, 7.24], "7.2%"), ([8.7, 7.2, 8.0], "7.2–8.7%")])
def test_a_range_of_shares(values, text):
    assert units.share_range(values) == text


@pytest.mark.parametrize("v, text", [(0.3621, "0.362"), (16.71, "16.7"), (1234.4, "1234"),
                                     (0.0004, "0.000"), (1.0, "1.00")])
def test_three_significant_digits_never_in_exponent_form(v, text):
    assert units.significant(v) == text


def test_ms_mb_counts_and_calls():
    assert units.ms(0.1114) == "0.111"
    assert (units.mb(7.06), units.mb(0.03521)) == ("7.1", "0.035")
    assert units.count(2570512.4) == "2,570,512"
    assert (units.calls(18.0), units.calls(0.5)) == ("18", "0.5")


def test_markdown_cells_write_a_dash_where_a_value_is_missing():
    from pytest_sme2.report.cells import (fmt_interval, fmt_ms, fmt_percent, fmt_points,
                                          fmt_ratio, fmt_ratio_interval)

    assert [f(None) for f in (fmt_interval, fmt_ms, fmt_percent, fmt_points, fmt_ratio,
                              fmt_ratio_interval)] == ["—"] * 6
    assert (fmt_ratio(IV), fmt_interval(IV), fmt_ratio_interval(IV)) == \
        ("1.215x", "[1.145, 1.275]", "1.215x [1.145, 1.275]")
    assert (fmt_percent(float("nan")), fmt_points(-2.04)) == ("—", "-2.0 pp")


def test_a_share_in_a_narrow_cell_has_no_decimals():
    assert (units.share(37.5, 0), units.share(62.49, 0), units.percent(7.25, 2)) == \
        ("38%", "62%", "7.25")


def test_byte_sizes_in_decimal_units():
    assert [units.byte_size(n) for n in (512, 48_000, 612_000_000, 3_140_000_000, 12_600_000_000)] \
        == ["512 B", "48 KB", "612 MB", "3.1 GB", "13 GB"]
