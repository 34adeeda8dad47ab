"""``pytest-sme2 fake-phone``: an emulated arm64 phone registered with adb."""

from __future__ import annotations

import argparse

from pytest_sme2.errors import Sme2Error


def _fake_phone(args: argparse.Namespace) -> int:
    from pytest_sme2.fakephone.serve import main as serve_main  # fakephone: 15 ms of --help

    if 5555 <= args.port <= 5585:
        raise Sme2Error(f"--port {args.port}: adb scans 5555-5585 for emulators; pick another")
    return serve_main(args)


def add_parser(sub) -> None:
    fp = sub.add_parser("fake-phone", help="register an emulated arm64 phone (QEMU, SME2) with "
                                           "the local adb server; prints its serial first, "
                                           "serves until Ctrl-C; docs/android.md")
    which = fp.add_mutually_exclusive_group()
    which.add_argument("--no-sme2", action="store_true",
                       help="an Arm64 CPU without SME or SME2 (QEMU -cpu max,sme=off)")
    which.add_argument("--sme1", action="store_true",
                       help="an Arm64 CPU with SME but no SME2, as the Snapdragon 8 Elite Gen 5 "
                            "(QEMU -cpu max with SME2 hidden from every program the phone runs)")
    fp.add_argument("--cpu", help="another QEMU CPU model (default max)")
    fp.add_argument("--port", type=int, default=0,
                    help="TCP port on 127.0.0.1 to serve on (default: a free one; never "
                         "5555-5585, which adb scans for emulators)")
    fp.set_defaults(func=_fake_phone)
