"""What an export leaves, as the benchmark loop sees it: the folder's file names and the
:class:`ExportedModel` record, for our own exports (:mod:`.export`) and a user's ``.pte``
(:mod:`.pte_model`) alike."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from pytest_sme2.errors import Sme2Error

PTE, ETRECORD, INPUTS, META = "model.pte", "model.etrecord", "inputs.bin", "meta.json"
PTD = "model.ptd"   # an export's weights, with ?weights=ptd (programs.spec.WEIGHTS)


class ExportError(Sme2Error):
    pass


def recorded_parameters(pte: str | Path) -> int | None:
    """The parameter count our export recorded (``meta.json`` beside the ``.pte`` it wrote);
    None for a program we did not export (a user's ``.pte`` does not say) or when unreadable."""
    try:
        meta = json.loads((Path(pte).parent / META).read_text())
    except (OSError, ValueError):
        return None
    n = meta.get("parameters") if isinstance(meta, dict) else None
    return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else None



@dataclass(frozen=True)
class ExportedModel:
    model: str
    dtype: str
    key: str
    folder: Path
    meta: dict
    # A user's .pte (pytest_sme2.programs.pte) stays where it is: only its inputs and metadata
    # live in the cache folder. None: our own export, whose files are all in the folder.
    program_file: Path | None = None
    etrecord_file: Path | None = None
    # A user's .pte: the .ptd found beside it (pytest_sme2.readers.pte_data), if any.
    data_file: Path | None = None

    @property
    def pte(self) -> Path:
        return self.program_file or self.folder / PTE

    @property
    def ptd(self) -> Path | None:
        """The program's weights file, loaded and pushed with it; None: they are in the .pte."""
        if self.program_file is not None:
            return self.data_file
        return self.folder / PTD if self.meta.get("ptd_sha256") else None

    @property
    def etrecord(self) -> Path:
        return self.etrecord_file or self.folder / ETRECORD

    @property
    def has_etrecord(self) -> bool:
        return self.etrecord.is_file()

    @property
    def inputs(self) -> Path:
        return self.folder / INPUTS
