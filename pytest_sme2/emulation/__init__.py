"""What an emulated Arm64 SME2 target needs on this host: QEMU user mode (>= 11, for SME2), the
aarch64 cross toolchain and its glibc sysroot (``tools``), the aarch64 ExecuTorch wheel of the
installed version (``wheel``), and the one command that provisions them all (``provision``,
``pytest-sme2 setup qemu``). docs/emulated-sme2.md says what goes where and why.
"""

from __future__ import annotations

from pytest_sme2.errors import Sme2Error

SETUP_COMMAND = "pytest-sme2 setup qemu"
SETUP_HINT = f"run `{SETUP_COMMAND}`"


class EmulationError(Sme2Error):
    """A missing or unsuitable piece of the emulated target; the message names the piece and
    the setup command."""
