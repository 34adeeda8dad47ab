"""Small C helpers built for the target (emulated Arm64 Linux, or Android with an NDK) and run
there beside the runner:

* ``hwcap_mask.c`` -> ``libpytest_sme2_hwcap_mask.so``: preloaded into a runner process, it
  clears AT_HWCAP2 bits (pytest_sme2.hwcaps) so one binary runs with SME2 on or off;
* ``sme2_probe.c`` -> ``sme2_probe``: prints what a process on the target sees (``key value``
  lines: machine, kernel, hwcap, hwcap2, cpus, pagesize), read with ``parse_probe``.

``build.build_target_helpers`` compiles both, cached.
"""

from __future__ import annotations

from pathlib import Path

SOURCE_DIR = Path(__file__).parent
_INTEGERS = {"hwcap", "hwcap2", "cpus", "pagesize"}


def parse_probe(text: str) -> dict[str, str | int]:
    """The probe's ``key value`` lines; hwcap/hwcap2 (hex) and cpus/pagesize become ints.
    Unknown keys are kept as text; malformed lines are skipped."""
    facts: dict[str, str | int] = {}
    for line in text.splitlines():
        key, _, value = line.strip().partition(" ")
        if not key or not value:
            continue
        if key in _INTEGERS:
            try:
                facts[key] = int(value, 0)
            except ValueError:
                continue
        else:
            facts[key] = value.strip()
    return facts
