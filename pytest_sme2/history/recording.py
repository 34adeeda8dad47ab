"""A pytest session's end: its results.json (already written, with report.md) into the history
store named by ``--sme2-history``. A store that cannot be used costs one line, never the
session's files or its outcome."""

from __future__ import annotations

from pathlib import Path

from pytest_sme2.errors import Sme2Error
from pytest_sme2.history.importer import record_doc
from pytest_sme2.history.store import open_store
from pytest_sme2.results import load_results


def record_session(url: str, results_path: Path) -> tuple[str, bool]:
    """One line for the terminal and whether the session was recorded."""
    try:

        store = open_store(url)
        try:
            lines = record_doc(store, load_results(results_path), str(results_path))
        finally:
            store.close()
    except Sme2Error as e:
        return (f"sme2: history not recorded ({e}); {results_path} and report.md are written: "
                f"`pytest-sme2 history import {results_path}` adds it later", False)
    return "sme2: " + "; ".join(lines), True
