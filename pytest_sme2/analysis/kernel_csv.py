"""The two kernel CSVs a session writes beside an ETDump, read and written one way: the kernels
traced on an emulated CPU (:mod:`.kernel_trace`) and the kernels sampled on a device
(:mod:`.kernel_sample`). Each is the kernels' rows and one total row (``kind`` ``total``)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from pytest_sme2.errors import Sme2Error

TOTAL = "total"     # the ``kind`` of the one row that holds a CSV's totals


def write_kernel_csv(frame: pd.DataFrame, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(path, index=False)
    return path


def read_kernel_csv(path: str | Path, columns: list[str], what: str, option: str
                    ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The rows of a kernel ``what`` CSV (``kernel-trace``, ``kernel-sample``) and its total
    row; a file that is missing, unreadable or incomplete is one line naming it and the
    ``pytest-sme2 run`` option that writes it again."""
    try:
        frame = pd.read_csv(path, keep_default_na=False, dtype={"name": str, "library": str})
    except FileNotFoundError:
        raise Sme2Error(f"{path}: no such {what} CSV (written by `pytest-sme2 run "
                        f"{option} OUT.csv`)") from None
    except (OSError, ValueError) as e:
        raise Sme2Error(f"{path}: not a {what} CSV ({e})") from None
    missing = [c for c in columns if c not in frame.columns]
    total = frame[frame["kind"] == TOTAL] if not missing else None
    if missing or total is None or len(total) != 1:
        said = f"missing columns {', '.join(missing)}" if missing else "no total row"
        raise Sme2Error(f"{path}: not a complete {what} CSV ({said}); write it again with "
                        f"`pytest-sme2 run {option.split()[-1]}`")
    return frame, total
