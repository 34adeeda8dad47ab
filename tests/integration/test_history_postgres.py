"""The history store on a real PostgreSQL server, started here on a free local port
(`pytest-sme2 setup history` installs Debian's postgresql): many writers at once lose nothing,
and the same session twice is one."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.needs import missing

for _package in ("sqlalchemy", "psycopg"):
    try:
        __import__(_package)
    except ImportError:     # the [test] extra brings it; CI installs it, so there this fails
        missing(f"the Python package {_package!r}", "pip install -e '.[test]'")


HOW = "pytest-sme2 setup history (Debian package postgresql)"


@pytest.fixture(scope="module")
def postgres_url():
    from pytest_sme2.provision.history import postgres_bin
    from tests.pg_server import postgres_server

    bin_dir = postgres_bin()
    if bin_dir is None:
        missing("PostgreSQL (initdb, pg_ctl)", HOW)
    with postgres_server(bin_dir) as url:
        yield url


def test_parallel_writers_lose_nothing_and_repeats_add_once(postgres_url, tmp_path):
    from pytest_sme2.history.importer import import_files
    from pytest_sme2.history.store import open_store
    from tests.fakes.history_docs import write_series

    paths = write_series(tmp_path / "r", 12, lambda model, i: 1.0)

    def writer(chunk):
        store = open_store(postgres_url)     # each writer its own engine, as CI jobs would
        try:
            return import_files(store, chunk)
        finally:
            store.close()

    # 4 writers at once, each importing 6 of the 12 sessions: every session twice.
    chunks = [paths[0:6], paths[6:12], paths[3:9], paths[0:3] + paths[9:12]]
    with ThreadPoolExecutor(4) as pool:
        lines = [line for out in pool.map(writer, chunks) for line in out]
    assert sum("recorded" in line for line in lines) == 12
    assert sum("already in" in line for line in lines) == 12
    store = open_store(postgres_url)
    frame = store.frame()
    store.close()
    assert frame["uid"].nunique() == 12 and len(frame) == 36
