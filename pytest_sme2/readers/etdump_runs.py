"""What an ETDump we wrote holds, written beside it (``X.etdump.runs.json``): how many of its
runs are warm-up, how many are measured and which option sets that count, and, for an LLM, the
generation loop that made them (the runner's generation summary, as its summary line prints
it). The ETDump itself cannot say: its Execute blocks are all alike. ``pytest-sme2 analyze``
and ``compare`` read it, so that a session's ETDump is analysed as the session analysed it
(its traced warm-up runs dropped, an LLM's executes split into prefill and decode).

No pandas, no torch: a small JSON file.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pytest_sme2.errors import Sme2Error

SCHEMA = "pytest-sme2/etdump-runs/1"
SUFFIX = ".runs.json"


@dataclass(frozen=True)
class EtdumpRuns:
    """``warmup`` leading runs (generations, for an LLM) are warm-up, ``runs`` follow;
    ``runs_option`` is what sets ``runs`` where the ETDump was written (a session's
    ``--sme2-trace-runs``, ``pytest-sme2 run --runs``); ``generation``: the runner's
    generation summary of these runs (its JSON keys), None for a forward pass."""

    warmup: int
    runs: int
    runs_option: str
    written_by: str = ""
    generation: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA, **asdict(self)}

    def said(self, path: Path) -> str:
        """How a command says where its warm-up count came from."""
        what = "generations" if self.generation is not None else "runs"
        return (f"{self.warmup} warm-up {what} dropped and {self.runs} measured, as recorded "
                f"beside it ({path.name}: written by {self.written_by or 'pytest-sme2'}; "
                f"{self.runs_option} sets the measured ones)")


def runs_path(etdump: str | Path) -> Path:
    etdump = Path(etdump)
    return etdump.with_name(etdump.name + SUFFIX)


def write_etdump_runs(etdump: str | Path, record: EtdumpRuns) -> Path:
    path = runs_path(etdump)
    path.write_text(json.dumps(record.to_json(), indent=1) + "\n")
    return path


def read_etdump_runs(etdump: str | Path) -> EtdumpRuns | None:
    """The record beside ``etdump``; None where there is none (an ETDump another tool wrote,
    or one copied without it). A record that is not ours is one line naming it."""
    path = runs_path(etdump)
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise Sme2Error(f"{path}: not a readable record of the ETDump's runs ({e}); delete "
                        "it or pass --warmup") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise Sme2Error(f"{path}: not a pytest-sme2 record of the ETDump's runs (schema "
                        f"{doc.get('schema') if isinstance(doc, dict) else None!r}, expected "
                        f"{SCHEMA!r}); delete it or pass --warmup")
    generation = doc.get("generation")
    return EtdumpRuns(warmup=int(doc.get("warmup") or 0), runs=int(doc.get("runs") or 0),
                      runs_option=str(doc.get("runs_option") or ""),
                      written_by=str(doc.get("written_by") or ""),
                      generation=generation if isinstance(generation, dict) else None)
