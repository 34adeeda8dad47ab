"""--sme2-cooldown in the terminal and report.md: a block that started hot is flagged, a device
the hold cannot watch is named once, a hold that worked is one line."""

from __future__ import annotations

from pytest_sme2.report.markdown.render import render_markdown
from pytest_sme2.report.terminal import cooldown_lines, summary_table
from pytest_sme2.results import load_results
from pytest_sme2.results.records import CooldownRecord
from pytest_sme2.report.view import SessionView
from tests.fakes.results_docs import sme2_doc

HOT = CooldownRecord(37.0, 60.0, hot=True, waited_s=60.0, polls=31, first_zone="cpu-1-0",
                     first_c=46.0, start_zone="cpu-1-0", start_c=44.5,
                     throttling=["thermal status 1 (light)"])
COOL = CooldownRecord(37.0, 60.0, waited_s=12.0, polls=7, first_zone="cpu-1-0", first_c=41.0,
                      start_zone="cpu-1-0", start_c=36.0)
NOT_APPLIED = CooldownRecord(37.0, 60.0, applied=False,
                             reason="device host has no thermal sensors to read")


def _doc(*records):
    """The SME2 comparison document with ``records`` on its blocks in turn (None: none)."""
    doc = sme2_doc(blocks=2)
    for b, rec in zip(doc["benchmarks"], records):
        if rec is not None:
            b["cooldown"] = rec.to_dict()
    return load_results(doc)


def test_a_hot_block_gets_a_live_line_and_the_table_a_footer():
    doc = _doc(COOL, HOT, COOL, COOL)
    cool, hot = doc.benchmarks[0], doc.benchmarks[1]
    assert cooldown_lines(cool) == []
    assert cooldown_lines(hot) == [
        "sme2: test_sme2[sme2_off#1] block 1 (sme2_off) STARTED HOT after waiting 60 s: "
        "cpu-1-0 44.5 °C (above 37 °C; thermal status 1 (light)); measured, kept and flagged"]
    lines = summary_table(SessionView.of(doc.benchmarks, doc.comparisons))
    assert lines[-1] == ("started hot: 1 of 4 blocks were above 37 °C or throttling when the "
                         "60 s cooldown ran out (kept; flagged in results.json and report.md)")
    lines = summary_table(SessionView.of(_doc(COOL).benchmarks))
    assert not any("started hot" in line for line in lines)


def test_a_device_without_sensors_is_named_once():
    doc = _doc(NOT_APPLIED, NOT_APPLIED)
    first, second = doc.benchmarks[:2]
    assert cooldown_lines(first) == ["sme2: --sme2-cooldown 37 °C cannot be applied: device "
                                     "host has no thermal sensors to read; blocks start "
                                     "without waiting"]
    assert cooldown_lines(second, told=True) == []
    assert cooldown_lines(doc.benchmarks[2]) == []        # no hold asked: nothing to say


def test_report_md_flags_hot_blocks_in_one_note():
    text = render_markdown(_doc(COOL, HOT, COOL, COOL))
    (note,) = [line for line in text.splitlines() if "Started hot" in line]
    assert note == ("> **Started hot:** 1 of 4 blocks were still hot or throttling when "
                    "`--sme2-cooldown 37` (timeout 60 s) ran out — measured and kept, but they "
                    "may be slower: test_sme2[sme2_off#1] block 1 sme2_off: cpu-1-0 44.5 °C "
                    "(above 37 °C; thermal status 1 (light)).")


def test_report_md_says_the_hold_held_or_why_it_could_not():
    held = render_markdown(_doc(COOL, COOL, COOL, COOL))
    assert ("> Thermal hold `--sme2-cooldown 37` (timeout 60 s): every block started at or "
            "below 37 °C with no throttling (longest wait 12 s).") in held
    skipped = render_markdown(_doc(NOT_APPLIED, NOT_APPLIED, NOT_APPLIED, NOT_APPLIED))
    assert ("> `--sme2-cooldown 37` (timeout 60 s) was not applied: device host has no "
            "thermal sensors to read.") in skipped
    assert "cooldown" not in render_markdown(_doc())


def test_a_session_of_hot_blocks_names_five_in_the_note():
    doc = sme2_doc(blocks=4)
    for b in doc["benchmarks"]:
        b["cooldown"] = HOT.to_dict()
    (note,) = [line for line in render_markdown(load_results(doc)).splitlines()
               if "Started hot" in line]
    assert note.count("44.5 °C") == 5
    assert note.endswith("; and 3 more (results.json: `cooldown.hot`).")
