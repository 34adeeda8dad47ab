"""History over commits: every session recorded in one store (SQLite by default, PostgreSQL
for a team), each benchmark key a series in commit order, change points found in it, and a
self-contained page and JSON/markdown report (docs/history.md).

The analysis (``series``, ``changepoints``, ``report``) is pure functions over pandas
DataFrames; the database (``store``, ``schema``) and the page (``page``) are the edges.
SQLAlchemy, psycopg and ruptures come with the ``history`` extra: without them a command
says, in one line, ``pip install 'pytest-sme2[history]'``.
"""

import importlib.util
from pytest_sme2.errors import Sme2Error

EXTRA_HINT = "pip install 'pytest-sme2[history]'"
# The least change (percent) called a regression or an improvement unless --min-change says
# otherwise; a series' noise floor raises it (the larger wins). Issue 32 named it "the gate's
# default threshold, 5%"; the gate's default (gate.policy.DEFAULT_THRESHOLD_PCT) is 10%, which
# would put a real +10% step on the edge. A step that held over 3+ commits is better evidence
# than one gated session, so the history keeps its own, smaller value.
MIN_CHANGE_PCT = 5.0


class HistoryError(Sme2Error):
    """A history store that cannot be used (unreachable, corrupt, newer schema): one line."""


def require(module: str) -> None:
    """Raise one line naming the extra when ``module`` (an optional dependency) is missing."""

    if importlib.util.find_spec(module) is None:
        raise HistoryError(f"the history needs {module}, which is not installed: {EXTRA_HINT}")
