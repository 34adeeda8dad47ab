"""``pytest-sme2 setup history``: what the history's tests need from the machine, PostgreSQL
(a real server they start on a free port) and Chromium (the page in a headless browser). As
``setup qemu`` does: check first; install with apt-get as root on Debian; else print what to
install and stop."""

from __future__ import annotations

import glob
import shutil
from pathlib import Path
from typing import Callable

from pytest_sme2.provision import apt

PACKAGES = {"postgresql": "PostgreSQL server (initdb, pg_ctl)", "chromium": "headless Chromium"}


def postgres_bin() -> Path | None:
    """The folder holding initdb and pg_ctl (Debian keeps them per version), newest first."""
    for folder in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if Path(folder, "initdb").exists() and Path(folder, "pg_ctl").exists():
            return Path(folder)
    found = shutil.which("initdb")
    return Path(found).parent if found else None


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def missing_packages() -> list[str]:
    return [p for p, have in (("postgresql", postgres_bin()), ("chromium", chromium()))
            if have is None]


def run_setup(dry_run: bool, out: Callable[[str], None] = print) -> int:
    missing = missing_packages()
    if not missing:
        out(f"history: already there (PostgreSQL in {postgres_bin()}, Chromium {chromium()})")
        return 0
    install = apt.install_argv(missing)
    command = " ".join(install)
    if dry_run:
        out(f"history: would run: apt-get update && {command}")
        return 0
    if not apt.is_debian() or not apt.is_root():
        out(f"history: missing {', '.join(PACKAGES[p] for p in missing)}; run as root: "
            f"apt-get update && {command} (elsewhere: install {' and '.join(missing)}), then "
            f"`pytest-sme2 setup history` again")
        return 2
    for argv in (["apt-get", "update"], install):
        proc = apt.run_apt(argv)
        if proc.returncode:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["?"]
            out(f"history: `{' '.join(argv)}` failed (rc {proc.returncode}): {tail[0]}")
            return 2
    still = missing_packages()
    out(f"history: installed {', '.join(missing)}" if not still else
        f"history: still missing after apt-get: {', '.join(still)}")
    return 2 if still else 0
