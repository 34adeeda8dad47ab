"""Three devices, one session: wall time serial vs ``-n 3``. (Not a test: prints figures.)

    python evaluations/multi_device_timing.py [--repeats 2] [--runs 30]
        [--threads 1,2] [--models toy_cnn] [--dtypes fp32] [--phone-busy-s 0]

Starts two private adb servers and three fake phones (tests/fakes: two on the first server,
one on the second, reached as a remote ``android:*@127.0.0.1:PORT``), then times
``pytest benchmarks/test_latency.py`` over all three, without and with ``-n 3``, alternating
(serial, -n 3, serial, ...) after one untimed warm-up session that fills the export cache and
builds the native runner. It also checks, from the phones' own command log, that no phone ran
two benchmarks at once in any session.

Read the figures for what they are: the fake phones run their benchmarks on THIS machine's
cores, so three "devices" here compete for the same CPUs and the parallel gain is bounded by
them (and -n 3 pays for three more pytest processes). On real phones each device's runs use
its own CPU. ``--phone-busy-s S`` makes every benchmark run wait S seconds on the phone before
it starts — phone-side time that costs this machine nothing, as a real phone's does — to show
the schedule when the per-device work dominates.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path


from _common import ROOT

from tests.fakes.adb_device import FakeAndroidConfig
from tests.fakes.android import AdbServer, connect_phone, release_phone

RUN = r"\btimeout -k "


def session(args: argparse.Namespace, env: dict[str, str], second_port: int, report: Path,
            workers: int) -> tuple[float, int]:
    cmd = [sys.executable, "-m", "pytest", str(ROOT / "benchmarks" / "test_latency.py"), "-q",
           "-p", "no:cacheprovider", "--device", "android:*", "--device",
           f"android:*@127.0.0.1:{second_port}", f"--sme2-models={args.models}",
           f"--sme2-dtypes={args.dtypes}", f"--sme2-threads={args.threads}",
           f"--runs={args.runs}", "--warmup=3", f"--report-dir={report}"]
    if workers:
        cmd += ["-n", str(workers)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"session failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr}")
    passed = re.search(r"(\d+) passed", proc.stdout)
    return wall, int(passed.group(1)) if passed else 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--models", default="toy_cnn")
    ap.add_argument("--dtypes", default="fp32")
    ap.add_argument("--phone-busy-s", type=float, default=0.0)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="multi-device-") as tmp:
        base = Path(tmp)
        first = AdbServer(base / "adb1").start()
        second = AdbServer(base / "adb2").start()
        phones = []
        try:
            busy = {"busy_on": RUN, "busy_s": args.phone_busy_s}
            phones = [connect_phone(first, base / "a", FakeAndroidConfig(serial_no="A1",
                                                                         **busy)),
                      connect_phone(first, base / "b", FakeAndroidConfig(sme2=False,
                                                                         serial_no="B2",
                                                                         **busy)),
                      connect_phone(second, base / "c", FakeAndroidConfig(serial_no="C3",
                                                                          **busy))]
            env = {**os.environ, **{k: v for k, v in first.env.items()
                                    if k.startswith(("ANDROID_", "ADBUTILS_", "ADB_"))}}
            session(args, env, second.port, base / "warm", 0)     # exports, runner build
            times: dict[int, list[float]] = {0: [], 3: []}
            for i in range(args.repeats):
                for workers in (0, 3):
                    wall, passed = session(args, env, second.port, base / f"r{i}-{workers}",
                                           workers)
                    times[workers].append(wall)
                    print(f"{'serial' if not workers else '-n 3':>6}: {wall:6.1f} s "
                          f"({passed} benchmarks)", flush=True)
            overlaps = sum(len(p.device.overlapping(RUN)) for p in phones)
            runs = [sum(1 for s in p.device.spans if re.search(RUN, s.cmd)) for p in phones]
        finally:
            for phone in phones:
                release_phone(phone)
            first.stop()
            second.stop()
    serial, parallel = min(times[0]), min(times[3])
    print(f"\nbest of {args.repeats}: serial {serial:.1f} s, -n 3 {parallel:.1f} s, "
          f"ratio {serial / parallel:.2f}x on {os.cpu_count()} host CPUs, phone-side wait "
          f"{args.phone_busy_s:g} s per benchmark run")
    print(f"benchmark runs per phone (all sessions): {runs}; runs that overlapped on one "
          f"phone: {overlaps}")


if __name__ == "__main__":
    main()
