"""A program's weights in a ``.ptd`` file beside its ``.pte`` (ExecuTorch's program-data
separation): which file that is, whether it is one, and the one line for each way the pair can
be wrong. No torch, no executorch import: this is read before any process starts, and by the
Python runner's child to word the runtime's refusals.

Beside ``m.pte`` the data file is ``m.ptd``, else ``model.ptd`` (the name ExecuTorch's
``write_tensor_data_to_file`` gives the default tag, and one file may serve several programs).
A ``.ptd`` is a FlatTensor file: ``FT01`` at bytes 4..8, as ``ET12`` is for a program.

The runtime says what went wrong only in its log: ``external_data_map is null`` (a program
that needs a data file was loaded without one), ``Failed to get metadata for key K`` or
``Failed to get constant data for key K`` (the data file lacks what the program names: the
wrong ``.ptd``), ``Failed to parse FlatTensor header`` (not a data file). The native runner
words them the same way (``runner.cpp``, ``data_failure``).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

PTD_SUFFIX = ".ptd"
SHARED_NAME = "model.ptd"
IDENTIFIER = b"FT01"

NO_DATA_MAP = "external_data_map is null"
KEY_MISSING = re.compile(r"Failed to get (?:metadata|constant data) for key (\S+)")
NOT_FLAT_TENSOR = "Failed to parse FlatTensor header"


class DataFileError(ValueError):
    """A ``.ptd`` that is no data file (its one line is the message)."""


def program_digest(pte_sha256: str, ptd_sha256: str | None) -> str:
    """What is under test, as one hash: the .pte's, or the .pte's and its .ptd's together."""
    if ptd_sha256 is None:
        return pte_sha256
    return hashlib.sha256(f"{pte_sha256}\0{ptd_sha256}".encode()).hexdigest()


def data_file_beside(pte: Path) -> Path | None:
    """``m.ptd`` beside ``m.pte``, else ``model.ptd`` beside it, else None."""
    for candidate in (pte.with_suffix(PTD_SUFFIX), pte.with_name(SHARED_NAME)):
        if candidate.is_file():
            return candidate
    return None


def check_data_file(ptd: Path, pte: Path) -> None:
    """:class:`DataFileError` when ``ptd`` is not an ExecuTorch data file."""
    try:
        with open(ptd, "rb") as fh:
            head = fh.read(8)
    except OSError as e:
        raise DataFileError(f"{ptd}: cannot read the data file of {pte.name} "
                            f"({e.strerror})") from None
    if head[4:8] != IDENTIFIER:
        raise DataFileError(f"{ptd}: not an ExecuTorch data file (no 'FT01' identifier in its "
                            f"header); put the .ptd exported with {pte.name} beside it")


def missing_line(pte: str) -> str:
    """A program that needs a data file, loaded without one."""
    names = dict.fromkeys((Path(pte).stem + PTD_SUFFIX, SHARED_NAME))
    return (f"{pte}: its weights live in a separate .ptd data file and none was found; put "
            f"the .ptd exported with it beside it as {' or '.join(names)}")


def wrong_line(pte: str, ptd: str, key: str) -> str:
    """A data file that lacks what the program names."""
    name = Path(pte).name
    return (f"{ptd} is not the data file of {name}: it lacks the weight '{key}' the program "
            f"needs; put the .ptd exported with {name} beside it")


def data_problem(pte: str, ptd: str | None, log: str) -> str | None:
    """The one line for a load the runtime refused for its data file, read from the runtime's
    ``log``; None when the refusal was about something else."""
    if NO_DATA_MAP in log:
        return missing_line(pte)
    if ptd is None:
        return None
    key = KEY_MISSING.search(log)
    if key:
        return wrong_line(pte, ptd, key.group(1))
    if NOT_FLAT_TENSOR in log:
        return (f"{ptd}: not an ExecuTorch data file (the runtime cannot read its header); "
                f"put the .ptd exported with {Path(pte).name} beside it")
    return None
