"""One option's text to its value, for :func:`pytest_sme2.measure.config.config_from_options`:
the parsers of the options whose values are more than a number or a path, each raising an
Sme2Error that names its option. Pure, and free of numpy, pandas and torch, as config is."""

from __future__ import annotations

import math

from pytest_sme2.errors import Sme2Error
from pytest_sme2.programs.export import DTYPES
from pytest_sme2._util.text import split_list
from pytest_sme2.devices.thermal import CooldownPolicy

MEASURES = ("time", "instructions")   # --sme2-measure: time only, or instructions counted too
SAMPLING = ("auto", "on", "off")      # --sme2-sample
PROBING = ("auto", "on", "off")       # --sme2-probe
COOLDOWN_RANGE_C = (0.0, 150.0)       # a temperature outside it is a typo, not a target


def parse_choice(option: str, text: str, choices: tuple[str, ...]) -> str:
    """One of ``choices`` (any case, surrounding spaces ignored), or one line naming
    ``option``."""
    value = text.strip().lower()
    if value not in choices:
        raise Sme2Error(f"{option}: unknown value {text!r}; choose from {', '.join(choices)}")
    return value


def parse_sampling(text: str) -> str:
    """``--sme2-sample``: auto, on or off."""
    return parse_choice("--sme2-sample", text, SAMPLING)


def parse_probing(text: str) -> str:
    """``--sme2-probe``: auto, on or off."""
    return parse_choice("--sme2-probe", text, PROBING)


def parse_measure(text: str) -> str:
    """``--sme2-measure``: time or instructions (any case, surrounding spaces ignored)."""
    measure = text.strip().lower()
    if measure not in MEASURES:
        raise Sme2Error(f"--sme2-measure: unknown measure {text!r}; choose from "
                        f"{', '.join(MEASURES)}")
    return measure


def parse_cooldown(target: str, timeout: str) -> CooldownPolicy | None:
    """``--sme2-cooldown`` (degrees C, or "": off) and ``--sme2-cooldown-timeout`` (seconds)."""
    if not target.strip():
        return None
    low, high = COOLDOWN_RANGE_C
    try:
        target_c = float(target)
    except ValueError:
        target_c = math.nan
    if not low < target_c < high:
        raise Sme2Error(f"--sme2-cooldown must be a temperature in degrees C between {low:g} "
                        f"and {high:g} (e.g. 37), got {target!r}")
    try:
        seconds = float(timeout)
    except ValueError:
        seconds = math.nan
    if not 0 < seconds < math.inf:
        raise Sme2Error(f"--sme2-cooldown-timeout must be a positive number of seconds, got "
                        f"{timeout!r}")
    return CooldownPolicy(target_c, seconds)


def parse_progress(text: str) -> float | str | None:
    """``--sme2-progress``: auto, off, or seconds between progress lines (0: every case)."""
    value = text.strip().lower()
    if value in ("auto", "off"):
        return None if value == "off" else "auto"
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not 0 <= seconds < math.inf:
        raise Sme2Error(f"--sme2-progress must be auto, off or a number of seconds (0 or "
                        f"more), got {text!r}")
    return seconds


def parse_export_jobs(text: str) -> int | None:
    """``--sme2-export-jobs``: auto (None: the CPUs, as memory allows) or a number of
    processes (1: each test exports its own, one after another)."""
    value = text.strip().lower()
    if value == "auto":
        return None
    if not value.isdigit() or int(value) < 1:
        raise Sme2Error(f"--sme2-export-jobs must be auto or a number of processes (1 or more; "
                        f"1: no exporting ahead), got {text!r}")
    return int(value)


def parse_min_speedup(text: str) -> dict[str, float]:
    """``--sme2-min-speedup``: ``DTYPE=NUMBER,...``."""
    out = {}
    for item in split_list(text):
        dtype, sep, value = item.partition("=")
        try:
            if not sep or dtype.strip() not in DTYPES:
                raise ValueError
            out[dtype.strip()] = float(value)
        except ValueError:
            raise Sme2Error(f"--sme2-min-speedup: {item!r} is not DTYPE=NUMBER with DTYPE one "
                            f"of {', '.join(DTYPES)}") from None
    return out
