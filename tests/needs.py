"""What a test needs from the machine: where it is missing, the test skips on a developer's
machine and FAILS in CI (env ``CI`` set), which provisions everything (``.ci/run``: `pytest-sme2
setup qemu` for the emulator and cross compiler; valgrind and binutils from the base image or
apt). A skip in CI would hide a provisioning gap."""

from __future__ import annotations

import os
import shutil
from typing import TYPE_CHECKING, NoReturn

import pytest

if TYPE_CHECKING:
    from pytest_sme2.devices.qemu import QemuDevice


def missing(what: str, how: str) -> NoReturn:
    """Skip (locally) or fail (in CI) because ``what`` is missing; ``how`` gets it."""
    if os.environ.get("CI"):
        pytest.fail(f"{what} is missing in CI: {how}", pytrace=False)
    pytest.skip(f"{what} is missing here: {how}", allow_module_level=True)


def tool(name: str, how: str) -> str:
    """The path of the program ``name``, or skip/fail as :func:`missing` says."""
    path = shutil.which(name)
    if path is None:
        missing(name, how)
    return path


def emulated_sme2() -> QemuDevice:
    """QEMU's SME2 CPU as `pytest-sme2 setup qemu` left it, or skip/fail as :func:`missing`
    says: asked for its facts first, so a test finds out here, not from its first run."""
    from pytest_sme2.devices.qemu import QemuDevice  # devices.qemu: the emulating tests' alone
    from pytest_sme2.errors import Sme2Error

    device = QemuDevice("qemu")
    try:
        device.facts()
    except Sme2Error as e:
        missing("the emulated SME2 device", f"run `pytest-sme2 setup qemu` ({e})")
    return device
