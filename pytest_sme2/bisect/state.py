"""The bisect's state file: what each commit exported, what each comparison found and each
side a probe put a commit on, so that ``--resume`` continues after Ctrl-C or a lost device
without exporting or measuring again. One JSON file per range, under ``.git/sme2-bisect/``
(the user's working tree is never written), beside the store of programs it names.

Written atomically after every export and every comparison; removed when a bisect ends with a
verdict."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from pytest_sme2._util.fsutil import atomic_write_text
from pytest_sme2.errors import Sme2Error
from pytest_sme2.bisect.measures import Compared
from pytest_sme2.bisect.programs import Exported

STATE_SCHEMA = "pytest-sme2-bisect/1"


def state_dir(git_dir: Path, good: str, bad: str) -> Path:
    """The folder of range ``good..bad`` (full shas): ``.git/sme2-bisect/<good12>..<bad12>``."""
    return git_dir / "sme2-bisect" / f"{good[:12]}..{bad[:12]}"


@dataclass
class State:
    """What a bisect of one range has learnt (see the module docstring). ``args``: the
    selection it was started with — a resume with other arguments starts afresh."""

    folder: Path
    args: list[str] = field(default_factory=list)
    exported: dict[str, Exported] = field(default_factory=dict)     # commit sha -> programs
    compared: dict[str, Compared] = field(default_factory=dict)     # pairs.key -> outcome

    @property
    def path(self) -> Path:
        return self.folder / "state.json"

    @property
    def store(self) -> Path:
        return self.folder / "programs"

    def save(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        doc = {"schema": STATE_SCHEMA, "args": self.args,
               "exported": {k: v.to_json() for k, v in self.exported.items()},
               "compared": {k: v.to_json() for k, v in self.compared.items()}}
        atomic_write_text(self.path, json.dumps(doc, indent=1) + "\n")

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
        parent = self.folder.parent
        if parent.is_dir() and not any(parent.iterdir()):
            parent.rmdir()


def load(folder: Path, args: list[str]) -> State:
    """The state kept in ``folder`` for the same arguments, else a fresh one."""
    state = State(folder, list(args))
    if not state.path.is_file():
        return state
    try:
        doc = json.loads(state.path.read_text())
        if doc.get("schema") != STATE_SCHEMA:
            raise ValueError(f"schema {doc.get('schema')!r}")
        if doc.get("args") != list(args):
            return state
        state.exported = {k: Exported.from_json(v) for k, v in doc["exported"].items()}
        state.compared = {k: Compared.from_json(v) for k, v in doc["compared"].items()}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise Sme2Error(f"{state.path}: not a bisect state this version reads ({e}); "
                        "remove it or run without --resume") from None
    return state
