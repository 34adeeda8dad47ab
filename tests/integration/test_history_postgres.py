"""The history store on a real PostgreSQL server, started here on a free local port
(`pytest-sme2 setup history` installs Debian's postgresql): many writers at once lose nothing,
and the same session twice is one."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.needs import missing

pytest.importorskip("sqlalchemy")
pytest.importorskip("psycopg")

HOW = "pytest-sme2 setup history (Debian package postgresql)"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def postgres_url():
    from pytest_sme2.history.setup import postgres_bin

    bin_dir = postgres_bin()
    if bin_dir is None:
        missing("PostgreSQL (initdb, pg_ctl)", HOW)
    # Not under pytest's tmp folder (0700 as root): the postgres user must reach it.
    top = tempfile.mkdtemp(prefix="sme2-pg-")
    os.chmod(top, 0o755)
    data = Path(top) / "data"
    port = _free_port()
    # initdb refuses root: as root the server runs as the postgres user the package made.
    as_user = []
    if os.geteuid() == 0:
        user = pwd.getpwnam("postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
        os.makedirs(data)
        os.chown(data, user.pw_uid, user.pw_gid)
    subprocess.run([*as_user, str(bin_dir / "initdb"), "-D", str(data), "-U", "sme2",
                    "--auth=trust", "-E", "UTF8"], check=True, capture_output=True)
    subprocess.run([*as_user, str(bin_dir / "pg_ctl"), "-D", str(data), "-w", "-l",
                    str(data / "log"), "-o", f"-p {port} -k {data} -c listen_addresses=127.0.0.1",
                    "start"], check=True, capture_output=True)
    try:
        yield f"postgresql://sme2@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([*as_user, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast",
                        "stop"], capture_output=True)
        shutil.rmtree(top, ignore_errors=True)


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
