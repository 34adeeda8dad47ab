"""Arm64 Linux hardware capabilities that decide whether XNNPACK picks SME/SME2 kernels, and the
masks that turn them off for one runner process.

XNNPACK (through cpuinfo) reads ``getauxval(AT_HWCAP2)``; a preloaded library
(``pytest_sme2/device_programs/preload.c``) clears the bits named by ``HWCAP2_CLEAR_ENV`` in
what that call returns, so one binary runs with SME2 on or off and nothing else changes. The bit
numbers are the Linux uapi's (arch/arm64/include/uapi/asm/hwcap.h).
"""

from __future__ import annotations

import re

from pytest_sme2.errors import Sme2Error

AT_HWCAP, AT_HWCAP2 = 16, 26

HWCAP2_SME = 1 << 23
HWCAP2_SME2 = 1 << 37
# SME and its sub-features (I16I64, F64F64, I8I32, F16F32, B16F32, F32F32, FA64): bits 23-30.
SME_FAMILY = sum(1 << b for b in range(23, 31))
# SME2 and what builds on it: SME2P1, SME_I16I32, SME_BI32I32, SME_B16B16, SME_F16F16 (37-42),
# SME_LUTV2 and the SME FP8 extensions (57-62).
SME2_FAMILY = sum(1 << b for b in (*range(37, 43), *range(57, 63)))

# Environment the preload library (device_programs/preload.c) reads in the runner process.
HWCAP2_CLEAR_ENV = "PYTEST_SME2_HWCAP2_CLEAR"   # hex bits to clear from AT_HWCAP2
MAPS_OUT_ENV = "PYTEST_SME2_MAPS_OUT"           # copy /proc/self/maps here at exit
SAMPLE_OUT_ENV = "PYTEST_SME2_SAMPLE_OUT"       # sample the program counter, write here at exit
SAMPLE_HZ_ENV = "PYTEST_SME2_SAMPLE_HZ"         # samples per CPU second (the kernel's tick caps it)

# mask name -> (AT_HWCAP2 bits cleared, what the process then looks like)
MASKS: dict[str, tuple[int, str]] = {
    "sme": (SME_FAMILY | SME2_FAMILY, "no SME, no SME2"),
    "sme2": (SME2_FAMILY, "SME without SME2"),
}


def mask_bits(name: str) -> int:
    """The AT_HWCAP2 bits a mask name clears; Sme2Error naming the known masks otherwise."""
    try:
        return MASKS[name][0]
    except KeyError:
        raise Sme2Error(f"unknown hwcap mask {name!r}; known: "
                        f"{', '.join(f'{k} ({v[1]})' for k, v in MASKS.items())}") from None


def describe_mask(name: str | None) -> str:
    """How a runner process sees the CPU: 'hwcaps as the device has them' or the mask."""
    if not name:
        return "hwcaps as the device reports them"
    bits = mask_bits(name)          # an unknown name: the one-line Sme2Error, not a KeyError
    return f"hwcaps masked to {MASKS[name][1]} (AT_HWCAP2 & ~{bits:#x})"


def sme_flags(hwcap2: int | None) -> tuple[bool | None, bool | None]:
    """(SME, SME2) from an AT_HWCAP2 value; (None, None) when unknown."""
    if hwcap2 is None:
        return None, None
    return bool(hwcap2 & HWCAP2_SME), bool(hwcap2 & HWCAP2_SME2)


# The preload library's exit line in a masked process (preload.c).
_APPLIED = re.compile(r"pytest-sme2 preload: AT_HWCAP2 (0x[0-9a-f]+|0) -> (0x[0-9a-f]+|0) "
                      r"\((\d+) getauxval calls\)")


def mask_problem(stderr: str, clear: int) -> str | None:
    """Why the mask did not apply, or None when the preload library reports, in the runner's
    stderr, that the process asked for its hwcaps and got them with ``clear``'s bits hidden. A
    runner that reads its CPU features another way (a static binary, /proc/cpuinfo) would run
    with SME2 on, labelled off."""
    m = _APPLIED.search(stderr)
    if m is None:
        return ("the SME/SME2 mask was not applied (the preload library did not report from "
                "the runner's process: it was not loaded, or the process did not exit "
                "normally); its results would be labelled SME2 off without being so")
    given, calls = int(m.group(2), 16), int(m.group(3))
    if calls == 0 or given & clear:
        return (f"the SME/SME2 mask was not applied (the process made {calls} getauxval calls "
                f"and saw AT_HWCAP2 {given:#x}): it reads its CPU features another way, so "
                "SME2 cannot be hidden from it here")
    return None
