"""Arm64 Linux hardware capabilities that decide whether XNNPACK picks SME/SME2 kernels, and the
masks that turn them off for one runner process.

XNNPACK (through cpuinfo) reads ``getauxval(AT_HWCAP2)``; a preloaded library
(``pytest_sme2/target/hwcap_mask.c``) clears the bits named by ``HWCAP2_CLEAR_ENV`` in what that
call returns, so one binary runs with SME2 on or off and nothing else changes. The bit numbers
are the Linux uapi's (arch/arm64/include/uapi/asm/hwcap.h).
"""

from __future__ import annotations

from pytest_sme2.errors import Sme2Error

AT_HWCAP, AT_HWCAP2 = 16, 26

HWCAP2_SME = 1 << 23
HWCAP2_SME2 = 1 << 37
# SME and its sub-features (I16I64, F64F64, I8I32, F16F32, B16F32, F32F32, FA64): bits 23-30.
SME_FAMILY = sum(1 << b for b in range(23, 31))
# SME2 and what builds on it: SME2P1, SME_I16I32, SME_BI32I32, SME_B16B16, SME_F16F16 (37-42),
# SME_LUTV2 and the SME FP8 extensions (57-62).
SME2_FAMILY = sum(1 << b for b in (*range(37, 43), *range(57, 63)))

# Environment the mask library reads in the runner process.
HWCAP2_CLEAR_ENV = "PYTEST_SME2_HWCAP2_CLEAR"   # hex bits to clear from AT_HWCAP2
MAPS_OUT_ENV = "PYTEST_SME2_MAPS_OUT"           # copy /proc/self/maps here at exit

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
