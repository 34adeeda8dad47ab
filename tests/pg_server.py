"""A real PostgreSQL server on a free local port in a temporary folder, for the history's tests
and evaluations/history_evaluation.py (`pytest-sme2 setup history` installs the server)."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def postgres_server(bin_dir: Path) -> Iterator[str]:
    """Yields the URL of a fresh server (user sme2, trust auth, 127.0.0.1 only)."""
    # Not under pytest's tmp folder (0700 as root): the postgres user must reach it.
    top = tempfile.mkdtemp(prefix="sme2-pg-")
    os.chmod(top, 0o755)
    data = Path(top) / "data"
    port = free_port()
    as_user = []
    if os.geteuid() == 0:   # initdb refuses root: run as the user the Debian package made
        user = pwd.getpwnam("postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
        os.makedirs(data)
        os.chown(data, user.pw_uid, user.pw_gid)
    try:
        subprocess.run([*as_user, str(bin_dir / "initdb"), "-D", str(data), "-U", "sme2",
                        "--auth=trust", "-E", "UTF8"], check=True, capture_output=True)
        subprocess.run([*as_user, str(bin_dir / "pg_ctl"), "-D", str(data), "-w", "-l",
                        str(data / "log"), "-o",
                        f"-p {port} -k {data} -c listen_addresses=127.0.0.1", "start"],
                       check=True, capture_output=True)
        yield f"postgresql://sme2@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([*as_user, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast",
                        "stop"], capture_output=True)
        shutil.rmtree(top, ignore_errors=True)
