"""Reading callgrind's output format (valgrind's manual, "Callgrind Format Specification").

One profile file holds the costs of one thread (``--separate-threads=yes``) for one dump
(``part``). ``ob=``/``fl=``/``fn=`` name the current object, file and function, in compressed
form (``fn=(12) name`` defines id 12, a later ``fn=(12)`` refers to it); a cost line is
``positions events...`` and is the current function's own (self) cost, except the line right
after ``calls=``, which is the inclusive cost of that call to ``cob=``/``cfn=`` (the callee's
object defaults to the caller's). Self costs add up to the file's ``summary:`` total, so sums
per function and per object never double count; call costs give inclusive costs and who called
what.

Imports neither torch nor executorch; reading a file needs no valgrind.
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from pytest_sme2.errors import Sme2Error

UNKNOWN = "???"

Function = tuple[str, str]          # (object path, function name)


class CallgrindFormatError(Sme2Error):
    pass


@dataclass
class Profile:
    """Costs of one event (``Ir``: instructions executed) in one callgrind profile file."""

    path: Path
    part: int = 0
    thread: int = 1
    event: str = "Ir"
    summary: int | None = None       # the file's ``summary:``/``totals:`` line
    trigger: str = ""                # "--dump-after=...", "Program termination", ...
    self_cost: dict[Function, int] = field(default_factory=dict)
    # caller -> callee -> inclusive cost of the calls from caller to callee
    calls: dict[Function, dict[Function, int]] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.self_cost.values())


_NAME = re.compile(r"^\((\d+)\)(?:\s+(.*))?$")
# Which name table a key's compressed names live in: objects, files, functions.
_TABLE = {"ob": "ob", "cob": "ob", "fl": "fl", "fi": "fl", "fe": "fl", "cfi": "fl", "cfl": "fl",
          "fn": "fn", "cfn": "fn"}


def _name(key: str, value: str, tables: dict[str, dict[str, str]], where: str) -> str:
    m = _NAME.match(value.strip())
    if not m:                                  # an uncompressed name
        return value.strip() or UNKNOWN
    ident, name = m.group(1), m.group(2)
    names = tables[_TABLE[key]]
    if name is not None:
        names[ident] = name.strip()
    elif ident not in names:
        raise CallgrindFormatError(f"{where}: {key}=({ident}) is used before it is named")
    return names[ident]


def read_profile(path: Path, event: str = "Ir") -> Profile:
    """Self and call costs of ``event`` per (object, function) in one callgrind output file."""
    path = Path(path)
    try:
        text = path.read_text(errors="replace")
    except OSError as e:
        raise CallgrindFormatError(f"{path}: cannot read the callgrind profile "
                                   f"({e.strerror})") from None
    prof = Profile(path, event=event)
    tables: dict[str, dict[str, str]] = {"ob": {}, "fl": {}, "fn": {}}
    self_cost: dict[Function, int] = defaultdict(int)
    calls: dict[Function, dict[Function, int]] = defaultdict(lambda: defaultdict(int))
    npos, column = 1, None
    obj = fn = UNKNOWN
    callee_obj: str | None = None
    callee_fn: str | None = None
    in_call = False                        # the next cost line is a call's inclusive cost
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        where = f"{path}:{lineno}"
        if line[0].isdigit() or line[0] in "+-*":
            if column is None:
                raise CallgrindFormatError(f"{where}: a cost line before the 'events:' line; "
                                           "not a callgrind profile")
            values = line.split()[npos:]
            try:
                cost = int(values[column]) if column < len(values) else 0
            except ValueError:
                raise CallgrindFormatError(f"{where}: cost {values[column]!r} is not an "
                                           "integer") from None
            if in_call:
                if callee_fn is None:
                    raise CallgrindFormatError(f"{where}: a call without cfn=")
                calls[(obj, fn)][(callee_obj or obj, callee_fn)] += cost
                in_call, callee_obj, callee_fn = False, None, None
            else:
                self_cost[(obj, fn)] += cost
            continue
        key, sep, value = line.partition("=")
        if sep and key in _TABLE:
            name = _name(key, value, tables, where)
            if key == "ob":
                obj, callee_obj = name, None
            elif key == "fn":
                fn, callee_obj, callee_fn = name, None, None
            elif key == "cob":
                callee_obj = name
            elif key == "cfn":
                callee_fn = name
            continue
        if sep and key == "calls":
            in_call = True
            continue
        if sep and key in ("jump", "jcnd"):
            continue
        key, sep, value = line.partition(":")
        if not sep:
            raise CallgrindFormatError(f"{where}: unexpected line {line[:60]!r}; not a "
                                       "callgrind profile")
        value = value.strip()
        if key == "events":
            names = value.split()
            if event not in names:
                raise CallgrindFormatError(f"{path}: records the events {value!r}, not "
                                           f"{event!r}")
            column = names.index(event)
        elif key == "positions":
            npos = len(value.split()) or 1
        elif key == "part":
            prof.part = int(value)
        elif key == "thread":
            prof.thread = int(value)
        elif key in ("summary", "totals") and column is not None:
            fields = value.split()
            prof.summary = int(fields[column]) if column < len(fields) else 0
        elif key == "desc" and value.startswith("Trigger:"):
            prof.trigger = value.partition(":")[2].strip()
    if column is None:
        raise CallgrindFormatError(f"{path}: no 'events:' line; not a callgrind profile")
    prof.self_cost = dict(self_cost)
    prof.calls = {caller: dict(callees) for caller, callees in calls.items()}
    if prof.summary is not None and prof.summary != prof.total:
        raise CallgrindFormatError(f"{path}: self costs add up to {prof.total} {event}, the "
                                   f"file's summary says {prof.summary}; truncated or corrupt")
    return prof


def read_profiles(paths: Iterable[Path], event: str = "Ir") -> list[Profile]:
    """Every non-empty profile among ``paths`` (callgrind leaves empty files for threads and
    dumps with nothing to say)."""
    return [read_profile(p, event) for p in sorted(Path(p) for p in paths)
            if os.path.getsize(p) > 0]


@dataclass
class Costs:
    """Costs summed over profiles (threads and dumps of one process)."""

    self_cost: dict[Function, int] = field(default_factory=dict)
    calls: dict[Function, dict[Function, int]] = field(default_factory=dict)
    threads: int = 0

    @classmethod
    def of(cls, profiles: Iterable[Profile]) -> Costs:
        profiles = list(profiles)
        return cls._summed(profiles, len({p.thread for p in profiles}))

    @classmethod
    def _summed(cls, parts: Iterable[Profile | Costs], threads: int) -> Costs:
        self_cost: dict[Function, int] = defaultdict(int)
        calls: dict[Function, dict[Function, int]] = defaultdict(lambda: defaultdict(int))
        for part in parts:
            for k, v in part.self_cost.items():
                self_cost[k] += v
            for caller, callees in part.calls.items():
                for callee, v in callees.items():
                    calls[caller][callee] += v
        return cls(dict(self_cost), {k: dict(v) for k, v in calls.items()}, threads)

    def __add__(self, other: Costs) -> Costs:
        """Both processes' costs, summed function by function (the slope of a difference of
        two slopes is a slope of sums: :func:`pytest_sme2.instructions.count.count_generation`)."""
        return Costs._summed((self, other), max(self.threads, other.threads))

    @property
    def total(self) -> int:
        return sum(self.self_cost.values())

    def inclusive(self, function: Function) -> int:
        """Own cost plus the inclusive cost of every call it makes (exact for functions that
        are not recursive)."""
        return self.self_cost.get(function, 0) + sum(self.calls.get(function, {}).values())
