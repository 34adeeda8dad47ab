"""Debian's apt, for every provisioning step: whether this host is Debian and root, running
apt-get non-interactively, and what the package lists offer. The steps themselves (what to
install, how to say it) are in ``qemu`` and ``history``."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

APT_ENV = {"DEBIAN_FRONTEND": "noninteractive"}
APT_TIMEOUT_S = 1800.0
DEBIAN_VERSION = Path("/etc/debian_version")


def is_root() -> bool:
    return os.geteuid() == 0


def is_debian() -> bool:
    return DEBIAN_VERSION.is_file()


def os_release() -> dict[str, str]:
    try:
        text = Path("/etc/os-release").read_text()
    except OSError:
        return {}
    pairs = (ln.split("=", 1) for ln in text.splitlines() if "=" in ln)
    return {k.strip(): v.strip().strip('"') for k, v in pairs}


def not_debian_reason(suite: str) -> str | None:
    """Why apt cannot be used here to add Debian's ``suite``, or None on Debian with apt."""
    if not is_debian():
        return f"this is not Debian (no {DEBIAN_VERSION})"
    release = os_release()
    if release.get("ID", "debian") != "debian":
        return (f"this is {release.get('PRETTY_NAME', release['ID'])}, not Debian (setup adds "
                f"Debian's {suite} only on Debian)")
    if not shutil.which("apt-get"):
        return "apt-get is not on PATH"
    return None


def install_argv(packages: list[str]) -> list[str]:
    return ["apt-get", "install", "-y", *packages]


def run_apt(argv: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``argv`` (an apt-get command) run without questions, output captured. A package
    download may take long: the timeout is half an hour. OSError and TimeoutExpired pass
    through; each step words its own failure."""
    return subprocess.run(argv, capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, **APT_ENV}, timeout=APT_TIMEOUT_S)


def apt_knows(package: str, suite: str | None = None) -> bool:
    """Whether the package lists offer ``package`` (from ``suite``, when given)."""
    try:
        out = subprocess.run(["apt-cache", "madison", package], capture_output=True, text=True,
                             timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False
    rows = [ln for ln in out.splitlines() if ln.strip().startswith(f"{package} |")]
    return any(f" {suite}/" in ln for ln in rows) if suite else bool(rows)
