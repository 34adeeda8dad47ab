"""What this machine needs before the tests and the emulated device can run, installed or
printed: ``apt`` (Debian's package manager, the one place apt-get is run), ``qemu`` (``pytest-sme2
setup qemu``: QEMU, the aarch64 cross compiler and wheel, our runner and helpers for the target)
and ``history`` (``pytest-sme2 setup history``: PostgreSQL and Chromium). Only ``cli/`` calls it.
"""
