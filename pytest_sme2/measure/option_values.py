"""One option's text to its value: the parsers the option table names
(:data:`pytest_sme2.measure.options.OPTIONS`), each taking the option as it was given
(:class:`Given`: its text, the flag its error names, where a relative path starts) and raising
an Sme2Error that names the option. ``pytest-sme2 gate`` calls the gate's with its own flags.
Pure, and free of numpy, pandas and torch, as the configuration is."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable, NamedTuple

from pytest_sme2.analysis.categories import OTHER, named_categories
from pytest_sme2.devices.thermal import CooldownPolicy
from pytest_sme2.errors import Sme2Error
from pytest_sme2.gate.policy import DEFAULT_ON_UNRESOLVED, GATE_MODES, ON_UNRESOLVED
from pytest_sme2.measure.matrix import parse_depths, parse_threads
from pytest_sme2.programs.export import DTYPES
from pytest_sme2.programs.llm.schemes import parse_schemes
from pytest_sme2.programs.llm.tokenizer import check_tokenizer_path
from pytest_sme2._util.text import split_list

MEASURES = ("time", "instructions")   # --sme2-measure: time only, or instructions counted too
SAMPLING = ("auto", "on", "off")      # --sme2-sample
PROBING = ("auto", "on", "off")       # --sme2-probe
COOLDOWN_RANGE_C = (0.0, 150.0)       # a temperature outside it is a typo, not a target
# --sme2-llama-bench's formats, named by the file's extension (pytest_sme2.report.llama_bench).
LLAMA_BENCH_FORMATS = (".json", ".jsonl", ".csv", ".sqlite")


class Given(NamedTuple):
    """An option as the user gave it, for its parser."""

    text: str
    flag: str = ""                    # how an error names it: "--sme2-blocks"
    base: Path = Path(".")            # where a relative path starts (the command line's: the
    #                                   invocation folder; an ini file's: the rootdir)
    rules: tuple[Any, ...] | None = None   # the operator category table (plugins add some)


Parser = Callable[[Given], Any]


def _number(text: str) -> float:
    """``text`` as a float; NaN where it is none (every check below then refuses it)."""
    try:
        return float(text)
    except ValueError:
        return math.nan


def text_or_none(given: Given) -> str | None:
    return given.text.strip() or None


def listed(given: Given) -> tuple[str, ...]:
    return tuple(split_list(given.text))


def path(given: Given) -> Path | None:
    """An absolute path (None when empty), a relative one from where it was given."""
    return (given.base / given.text).resolve() if given.text else None


def tokenizer(given: Given) -> Path | None:
    """A tokenizer file (None when empty: the one generated for the program)."""
    found = path(given)
    return check_tokenizer_path(found, given.flag) if found is not None else None


def report_dir(given: Given) -> Path:
    return path(given) or Path("sme2-report")


def whole(least: int, what: str) -> Parser:
    """A whole number of at least ``least`` (``what`` says so in the error)."""
    def parse(given: Given) -> int:
        try:
            number = int(given.text)
        except ValueError:
            raise Sme2Error(f"{given.flag} must be a whole number, got {given.text!r}") from None
        if number < least:
            raise Sme2Error(f"{given.flag} must be {what}, got {number}")
        return number
    return parse


def seconds(least: int, what: str) -> Parser:
    """:func:`whole`, as a float of seconds."""
    return lambda given: float(whole(least, what)(given))


def choice(choices: tuple[str, ...], what: str = "value") -> Parser:
    """One of ``choices`` (any case, surrounding spaces ignored); ``what`` names one in the
    error (``unknown measure 'x'``)."""
    def parse(given: Given) -> str:
        value = given.text.strip().lower()
        if value not in choices:
            raise Sme2Error(f"{given.flag}: unknown {what} {given.text!r}; choose from "
                            f"{', '.join(choices)}")
        return value
    return parse


def taskset(given: Given) -> str | None:
    """``--sme2-taskset``: auto, a hex mask, or none (None: no pinning)."""
    return None if given.text == "none" else given.text


def dtypes(given: Given) -> tuple[str, ...]:
    names = listed(given)
    for d in names:
        if d not in DTYPES:
            raise Sme2Error(f"{given.flag}: unknown dtype {d!r}; choose from {', '.join(DTYPES)}")
    return names


def threads(given: Given) -> tuple[int, ...]:
    return parse_threads(given.text)


def depths(given: Given) -> tuple[int, ...]:
    return parse_depths(given.text)


def llm_schemes(given: Given) -> tuple[str, ...]:
    try:
        return parse_schemes(given.text)
    except Sme2Error as e:
        raise Sme2Error(f"{given.flag}: {e}") from None


def temperature(given: Given) -> float | None:
    """``--sme2-cooldown``: degrees C, or "" (off)."""
    if not given.text.strip():
        return None
    low, high = COOLDOWN_RANGE_C
    target_c = _number(given.text)
    if not low < target_c < high:
        raise Sme2Error(f"{given.flag} must be a temperature in degrees C between {low:g} and "
                        f"{high:g} (e.g. 37), got {given.text!r}")
    return target_c


def positive_seconds(given: Given) -> float:
    value = _number(given.text)
    if not 0 < value < math.inf:
        raise Sme2Error(f"{given.flag} must be a positive number of seconds, got "
                        f"{given.text!r}")
    return value


def cooldown(target: Given, timeout: Given) -> CooldownPolicy | None:
    """``--sme2-cooldown`` and its ``--sme2-cooldown-timeout``: the timeout is read only
    when there is a target."""
    target_c = temperature(target)
    return None if target_c is None else CooldownPolicy(target_c, positive_seconds(timeout))


def progress(given: Given) -> float | str | None:
    """``--sme2-progress``: auto, off, or seconds between progress lines (0: every case)."""
    value = given.text.strip().lower()
    if value in ("auto", "off"):
        return None if value == "off" else "auto"
    interval = _number(value)
    if not 0 <= interval < math.inf:
        raise Sme2Error(f"{given.flag} must be auto, off or a number of seconds (0 or more), "
                        f"got {given.text!r}")
    return interval


def export_jobs(given: Given) -> int | None:
    """``--sme2-export-jobs``: auto (None: the CPUs, as memory allows) or a number of
    processes (1: each test exports its own, one after another)."""
    value = given.text.strip().lower()
    if value == "auto":
        return None
    if not value.isdigit() or int(value) < 1:
        raise Sme2Error(f"{given.flag} must be auto or a number of processes (1 or more; 1: no "
                        f"exporting ahead), got {given.text!r}")
    return int(value)


def min_speedup(given: Given) -> dict[str, float]:
    """``--sme2-min-speedup``: ``DTYPE=NUMBER,...``."""
    out = {}
    for item in split_list(given.text):
        dtype, sep, value = item.partition("=")
        try:
            if not sep or dtype.strip() not in DTYPES:
                raise ValueError
            out[dtype.strip()] = float(value)
        except ValueError:
            raise Sme2Error(f"{given.flag}: {item!r} is not DTYPE=NUMBER with DTYPE one of "
                            f"{', '.join(DTYPES)}") from None
    return out


def history(given: Given) -> str | None:
    """``--sme2-history``: a URL as given; a bare SQLite path relative to where it was given
    (as other paths)."""
    return given.text if "://" in given.text else str(path(given)) if given.text else None


def file_path(given: Given) -> Path | None:
    """A file to write (None when empty): a folder is refused."""
    out = path(given)
    if out is not None and out.is_dir():
        raise Sme2Error(f"{given.flag}: {out} is a folder; give a file path")
    return out


def llama_bench(given: Given) -> Path | None:
    """``--sme2-llama-bench``: a file whose extension names llama-bench's format."""
    out = path(given)
    if out is not None and (out.is_dir() or out.suffix.lower() not in LLAMA_BENCH_FORMATS):
        raise Sme2Error(f"{given.flag}: {out}: give a file ending in "
                        f"{', '.join(LLAMA_BENCH_FORMATS)} (the extension names the format)")
    return out


# -- the gate's (pytest-sme2 gate calls them with its own flags) --------------------------------

def max_pairs(given: Given) -> int:
    """``--sme2-max-pairs``: a whole number of pairs, 2 or more."""
    try:
        n = int(str(given.text).strip())
    except ValueError:
        n = 0
    if n < 2:
        raise Sme2Error(f"{given.flag}: expected a whole number of pairs, 2 or more, got "
                        f"{given.text!r}")
    return n


def on_unresolved(given: Given) -> str:
    """``--sme2-on-unresolved``: fail, warn or pass."""
    word = given.text.strip().lower() or DEFAULT_ON_UNRESOLVED
    if word not in ON_UNRESOLVED:
        raise Sme2Error(f"{given.flag}: expected one of {', '.join(ON_UNRESOLVED)}, got "
                        f"{given.text!r}")
    return word


def gate_mode(given: Given) -> str:
    mode = given.text.strip().lower() or "stored"
    if mode not in GATE_MODES:
        raise Sme2Error(f"{given.flag}: expected one of {', '.join(GATE_MODES)}, got "
                        f"{given.text!r}")
    return mode


def precision(given: Given) -> float | None:
    """``2`` or ``2%`` -> 2.0; empty -> None (the fixed design)."""
    raw = given.text.strip().removesuffix("%").strip()
    if not raw:
        return None
    try:
        pct = float(raw)
    except ValueError:
        raise Sme2Error(f"{given.flag}: expected a percentage such as 2 or 2%, got "
                        f"{given.text!r}") from None
    if not 0 < pct < 100:
        raise Sme2Error(f"{given.flag}: must lie above 0 and below 100 percent, got {pct:g}")
    return pct


def budget(given: Given) -> float:
    """``--sme2-precision-budget``: seconds of measuring one benchmark may add, above 0."""
    value = _number(given.text)
    if not value > 0 or math.isinf(value):
        raise Sme2Error(f"{given.flag}: expected seconds above 0, got {given.text!r}")
    return value


def _percentage(given: Given, also: str = "") -> float:
    pct = _number(given.text)
    if not pct >= 0 or math.isinf(pct):
        raise Sme2Error(f"{given.flag} must be a percentage of 0 or more{also}, got "
                        f"{given.text!r}")
    return pct


def threshold(given: Given) -> float | None:
    """``--fail-on-regression``: a percentage of 0 or more, or "" (off)."""
    return _percentage(given) if given.text else None


def threshold_or_off(given: Given) -> float | None:
    """``--sme2-load-threshold`` / ``--sme2-memory-threshold``: a percentage, or "off"."""
    return None if given.text.strip().lower() == "off" else _percentage(given, " or 'off'")


def gate_categories(given: Given) -> tuple[str, ...]:
    """``--sme2-gate-categories``: category names (any case) or ``all``, of the category table
    in use (``given.rules``: plugins may add categories)."""
    known = {c.lower(): c for c in (*named_categories(given.rules), OTHER)}
    out = []
    for name in split_list(given.text):
        if name.lower() == "all":
            return ("all",)
        if name.lower() not in known:
            raise Sme2Error(f"{given.flag}: unknown category {name!r}; known: "
                            f"{', '.join(known.values())}, or all")
        out.append(known[name.lower()])
    return tuple(out)
