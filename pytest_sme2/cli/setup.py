"""``pytest-sme2 setup qemu|history``: provision this host (``provision/``), or with
``--dry-run`` print what would be done."""

from __future__ import annotations

import argparse

from pytest_sme2.provision import history


def _print(line: str) -> None:
    print(line, flush=True)           # each step's line as it ends: a step may take minutes


def _setup(args: argparse.Namespace) -> int:
    if args.what == "history":
        return history.run_setup(args.dry_run, out=_print)
    # The runner builds (through runners/): only `setup qemu` needs them.
    from pytest_sme2.provision import qemu  # provision.qemu: 16 ms of --help

    return qemu.run_setup(args.dry_run, out=_print)


def add_parser(sub) -> None:
    st = sub.add_parser("setup", help="provision an emulated Arm64 SME2 target (QEMU, cross "
                                      "compiler, aarch64 wheel); docs/emulated-sme2.md")
    st.add_argument("what", choices=("qemu", "history"),
                    help="qemu: the emulated device; history: PostgreSQL and Chromium for the "
                         "history's tests")
    st.add_argument("--dry-run", action="store_true", help="print what would be done, do nothing")
    st.set_defaults(func=_setup)
