"""Small C programs built for a device's target (Arm64 Linux under QEMU or on a phone through the
bundled glibc loader, Android with an NDK, or the host) and run there beside the runner:

* ``preload.c`` -> ``libpytest_sme2_preload.so``: preloaded into a runner process, it clears
  AT_HWCAP2 bits (pytest_sme2.device_programs.hwcaps) so one binary runs with SME2 on or off,
  copies the
  process's address map at exit, and samples its program counter on a CPU-time timer (which
  code ran, :mod:`pytest_sme2.analysis.kernel_sample`);
* ``sme2_probe.c`` -> ``sme2_probe``: prints what a process on the target sees (``key value``
  lines: machine, kernel, hwcap, hwcap2, cpus, pagesize), read with ``parse_probe``.

* ``copy_bandwidth.c`` -> ``copy_bandwidth``: the device's memory copy bandwidth (``copy_gbps``,
  read + written per second, STREAM Copy's convention), what decode's achieved GB/s is set
  against (:mod:`pytest_sme2.devices.bandwidth`).

* ``execute_clock.c`` -> ``libpytest_sme2_execute_clock.so``: preloaded into a process that
  runs a runner we cannot change (the wheel's TextLLMRunner), it times each
  ``Method::execute`` with the clock our native runner uses (:mod:`pytest_sme2.runners.
  text_llm_runner`).

``build.build_target_helpers`` compiles them, cached.
"""

from __future__ import annotations

from pathlib import Path

SOURCE_DIR = Path(__file__).parent
_INTEGERS = {"hwcap", "hwcap2", "cpus", "pagesize", "buffer_mb", "threads", "repeats", "check"}
_FLOATS = {"copy_gbps", "read_gbps"}


def parse_probe(text: str) -> dict[str, str | int | float]:
    """The probe's ``key value`` lines; hwcap/hwcap2 (hex) and cpus/pagesize become ints.
    Unknown keys are kept as text; malformed lines are skipped."""
    facts: dict[str, str | int | float] = {}
    for line in text.splitlines():
        key, _, value = line.strip().partition(" ")
        if not key or not value:
            continue
        if key in _FLOATS:
            try:
                facts[key] = float(value)
            except ValueError:
                continue
        elif key in _INTEGERS:
            try:
                facts[key] = int(value, 0)
            except ValueError:
                continue
        else:
            facts[key] = value.strip()
    return facts
