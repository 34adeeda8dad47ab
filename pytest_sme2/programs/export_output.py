"""What torch, torchao and executorch warn and print while a model exports (deprecations they
have not fixed, the runtime's native cpuinfo log), kept out of the user's way: a fresh
``pytest benchmarks`` printed a hundred such lines among its own, and a user's test was charged
with them in pytest's warnings summary.

An export records its warnings (:func:`caught_warnings`); an export process also captures its
native stderr (:func:`captured_stderr`). They are shown with the export's error when it fails,
and otherwise only on request: a successful export gives them to its progress callback as one
:class:`ExportOutput` message, which pytest's live lines show under ``-v`` only."""

from __future__ import annotations

import os
import sys
import sysconfig
import tempfile
import warnings
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

import pytest_sme2

# Code whose warnings are not a user's: the standard library, installed packages (torch,
# executorch, ...) and this project (the plugin and its model zoo, installed or editable).
_NOT_USER_CODE = tuple(dict.fromkeys(
    str(Path(p).resolve()) + os.sep for p in (
        *(sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")),
        Path(pytest_sme2.__file__).parent,
        Path(pytest_sme2.__file__).parents[1] / "models")))


class ExportOutput(str):
    """A progress message holding what an export's third-party code warned or printed (its
    first line says which export): a progress callback that knows the type shows it only when
    asked for detail (pytest ``-v``); one that does not shows it as any other line."""

    @classmethod
    def of(cls, model: str, dtype: str, what: str, lines: list[str]) -> ExportOutput | None:
        """``lines`` under a header naming the export and ``what`` they are; None: no lines."""
        if not lines:
            return None
        return cls("\n".join([f"{model} {dtype}: {what}:",
                              *(f"  {line}" for line in lines)]))


def lines_only(say: Callable[[str], None]) -> Callable[[str], None]:
    """``say`` without the :class:`ExportOutput` messages: for a caller with no -v (the
    command line); a failed export's error carries them anyway."""
    return lambda message: None if isinstance(message, ExportOutput) else say(message)


def is_user_code(filename: str) -> bool:
    """Whether a warning from ``filename`` is the user's own (their model's source), not from
    the standard library, an installed package or this project."""
    if not filename or filename.startswith("<"):        # <frozen ...>, <string>
        return False
    return not str(Path(filename).resolve()).startswith(_NOT_USER_CODE)


@contextmanager
def caught_warnings() -> Iterator[list[warnings.WarningMessage]]:
    """Record the warnings raised meanwhile instead of showing them, under the filters in force
    (an ``error`` filter still raises, an ``ignore`` still drops): the list holds the
    third-party ones at the end. A user's own warnings are issued again on the way out, so
    their test is charged with those and only those."""
    with warnings.catch_warnings(record=True) as caught:
        yield caught
    own = [w for w in caught if is_user_code(w.filename)]
    caught[:] = [w for w in caught if not is_user_code(w.filename)]
    for w in own:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)


def warning_lines(caught: list[warnings.WarningMessage]) -> list[str]:
    """One line per distinct warning, as Python prints its first line, with a count."""
    counts = Counter(f"{w.filename}:{w.lineno}: {w.category.__name__}: {w.message}"
                     for w in caught)
    return [line if n == 1 else f"{line} (x{n})" for line, n in counts.items()]


@contextmanager
def captured_stderr() -> Iterator[list[str]]:
    """This process's file descriptor 2 into a temporary file meanwhile (native libraries write
    there directly: the runtime's ``[cpuinfo_utils.cpp:71] Reading file ...``); the list holds
    its lines at the end. For an export process, whose own lines go back by other means."""
    sys.stderr.flush()
    saved = os.dup(2)
    lines: list[str] = []
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield lines
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            lines += tmp.read().decode(errors="replace").splitlines()
