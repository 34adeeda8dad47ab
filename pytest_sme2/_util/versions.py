"""Installed package versions, recorded with exports, runners, devices and sessions."""

from __future__ import annotations

import platform
from functools import cache
from importlib.metadata import PackageNotFoundError, version

TRACKED = ("pytest-sme2", "executorch", "torch", "torchao")


@cache   # a metadata lookup costs about a millisecond; a session asks hundreds of times
def package_version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "missing"


def versions(names: tuple[str, ...] = TRACKED) -> dict[str, str]:
    return {"python": platform.python_version(), **{n: package_version(n) for n in names}}
