"""The gate's verdict in the history (schema 2): kept per point, shown on hover, a "cannot
tell" drawn hollow; a store of schema 1 is migrated in place."""

from __future__ import annotations

from tests.needs import missing

try:
    import sqlalchemy  # noqa: F401
except ImportError:     # the [test] extra brings it; CI installs it, so there this fails
    missing("the Python package 'sqlalchemy'", "pip install -e '.[test]'")

from pytest_sme2.gate.ab import Pairs, judge_ab  # noqa: E402
from pytest_sme2.history import page, report  # noqa: E402
from pytest_sme2.history.importer import record_doc  # noqa: E402
from pytest_sme2.history.store import open_store  # noqa: E402
from pytest_sme2.results import load_results  # noqa: E402
from tests.fakes.history_docs import session_doc  # noqa: E402

WIDE = judge_ab(Pairs((1.0, 1.0, 1.0), (0.97, 1.12, 1.06)))


def _judged_doc(i: int) -> dict:
    doc = session_doc(i)
    for b in doc["benchmarks"]:
        b["baseline"] = WIDE.to_dict()
    return doc


def test_each_point_keeps_the_gates_verdict_and_the_page_shows_it(tmp_path):
    store = open_store(str(tmp_path / "h.sqlite"))
    for i in range(3):
        record_doc(store, load_results(_judged_doc(i)))
    frame = store.frame()
    gate = frame["gate"].iloc[0]
    assert gate["status"] == "cannot_tell" and gate["pairs"] == 3
    assert gate["low"] < gate["ratio"] < gate["high"]
    html = page.render(report.build(frame))
    assert "gate: cannot tell 1.05x [" in html and "(3 pairs)" in html
    assert 'class="cannot-tell"' in html


def test_a_store_of_schema_1_is_migrated_in_place(tmp_path):
    from sqlalchemy import text, update

    from pytest_sme2.history import schema

    url = str(tmp_path / "h.sqlite")
    store = open_store(url)
    record_doc(store, load_results(session_doc(0)))
    with store.engine.begin() as conn:         # as a store written by schema 1 was
        conn.execute(text("ALTER TABLE sme2_points DROP COLUMN gate"))
        conn.execute(text("ALTER TABLE sme2_points DROP COLUMN probe_us"))
        conn.execute(update(schema.meta).values(value="1"))
    store.close()
    again = open_store(url)
    record_doc(again, load_results(_judged_doc(1)))
    frame = again.frame()
    assert len(frame) == 6
    assert frame["gate"].isna().sum() == 3          # the old points: not recorded then
    assert frame["gate"].dropna().iloc[0]["status"] == "cannot_tell"
    assert frame["probe_us"].isna().sum() >= 3        # schema 3's column, added in place too
