"""A ``.pte`` someone else exported, as a model: its inputs made from the program's own
``forward`` metadata (seeded, deterministic), its ``.etrecord`` used when one lies beside it,
its content hash as the cache key and the "what is under test" program hash.

The file is never copied: the cache folder (``<cache>/pte/<sha16>``) holds only the inputs and
``meta.json``; a changed file is a new key. A user's own inputs: ``<stem>.inputs.bin`` with its
``.json`` sidecar beside the .pte (the runners' tensor file, :mod:`pytest_sme2.tensorfile`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable

import numpy as np

from pytest_sme2.errors import Sme2Error
from pytest_sme2.fsutil import file_sha256
from pytest_sme2.exported import INPUTS, META, ExportedModel, ExportError
from pytest_sme2.model_spec import AS_EXPORTED
from pytest_sme2.pte_program import MethodInput, PteProgramError, forward_signature
from pytest_sme2.tensorfile import read_tensors, write_tensors

INPUT_SEED = 0
ETRECORD_MISSING = ("no .etrecord beside the .pte: operators are shown by their runtime names "
                    "only (no edge operator types or module paths, no portable-op origins)")

def content_hash(pte: Path) -> str:
    """The program's identity: its file's sha256."""
    return file_sha256(pte)


def user_inputs_file(pte: Path) -> Path:
    """Where a user's own inputs for ``pte`` go: ``m.inputs.bin`` (+ ``m.inputs.bin.json``)."""
    return pte.with_name(pte.stem + ".inputs.bin")


def etrecord_beside(pte: Path) -> Path | None:
    candidate = pte.with_suffix(".etrecord")
    return candidate if candidate.is_file() else None


def _cannot_make(pte: Path, item: MethodInput, why: str) -> ExportError:
    if item.kind != "Tensor":   # no inputs file can hold it either
        return ExportError(f"{pte}: cannot make forward's {item.describe()}: {why}; export "
                           "forward with tensor inputs only (make this argument a constant "
                           "of the exported program)")
    return ExportError(f"{pte}: cannot make forward's {item.describe()}: {why}; pass your "
                       f"inputs as {user_inputs_file(pte).name} (+ .json sidecar) beside it "
                       "(pytest_sme2.tensorfile.write_tensors)")


def make_input(pte: Path, item: MethodInput, rng: np.random.Generator) -> np.ndarray:
    """A seeded tensor of the input's dtype and shape: floats from N(0, 1), integers in
    [0, 4) (valid indices for most embeddings and gathers), booleans False."""
    if item.kind != "Tensor":
        raise _cannot_make(pte, item, "our runners pass tensors only")
    if item.dtype is None:
        raise _cannot_make(pte, item, "its dtype has no tensor-file form")
    shape = tuple(item.shape)
    if any(d < 0 for d in shape):
        raise _cannot_make(pte, item, "its shape is not known")
    dtype = np.dtype(item.dtype)
    if dtype.kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    if dtype.kind in "iu":
        return rng.integers(0, 4, size=shape).astype(dtype)
    return np.zeros(shape, dtype=dtype)


def _write_inputs(pte: Path, folder: Path) -> str:
    """The inputs file for ``pte`` in ``folder``; returns where they came from."""
    own = user_inputs_file(pte)
    if own.is_file():
        arrays = read_tensors(own)   # one line when its sidecar is missing or wrong
        source = str(own)
    else:
        rng = np.random.default_rng(INPUT_SEED)
        arrays = [make_input(pte, item, rng) for item in forward_signature(pte).inputs]
        source = f"forward's metadata, seed {INPUT_SEED}"
    write_tensors(folder / INPUTS, arrays)
    return source


def import_pte(pte: Path, cache_dir: Path,
               progress: Callable[[str], None] | None = None) -> ExportedModel:
    """``pte`` as an :class:`ExportedModel`; every problem is one :class:`ExportError` line."""
    if not pte.is_file():
        raise ExportError(f"{pte}: no such .pte file" + (
            f" (from {Path.cwd()})" if not pte.is_absolute() else ""))
    try:
        signature = forward_signature(pte)   # also: is it a program, has it forward
    except PteProgramError as e:
        raise ExportError(str(e)) from None
    digest = content_hash(pte)
    key = digest[:16]
    folder = Path(cache_dir) / "pte" / key
    etrecord = etrecord_beside(pte)
    meta_path = folder / META
    try:
        meta = json.loads(meta_path.read_text())
        if not _inputs_current(meta, meta_path, pte):
            raise ValueError("inputs to make again")
    except (OSError, ValueError):
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".tmp-{os.getpid()}"
        tmp.mkdir(exist_ok=True)
        try:
            source = _write_inputs(pte, tmp)
        except Sme2Error as e:
            raise ExportError(str(e)) from None
        finally:
            for f in (INPUTS, INPUTS + ".json"):
                if (tmp / f).exists():
                    os.replace(tmp / f, folder / f)
            tmp.rmdir()
        meta = {"model": str(pte), "dtype": AS_EXPORTED, "key": key, "pte_sha256": digest,
                "source": "pte file", "inputs_from": source,
                "inputs": [{"kind": i.kind, "dtype": i.dtype, "shape": list(i.shape)}
                           for i in signature.inputs]}
        meta_path.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
        if progress:
            progress(f"{pte.name}: taken as exported (sha256 {key}), inputs from {source}")
    meta = {**meta, "etrecord": str(etrecord) if etrecord else None,
            "etrecord_missing": None if etrecord else ETRECORD_MISSING}
    return ExportedModel(str(pte), AS_EXPORTED, key, folder, meta, program_file=pte,
                         etrecord_file=etrecord or pte.with_suffix(".etrecord"))


def _inputs_current(meta: dict, meta_path: Path, pte: Path) -> bool:
    """The cached inputs still are what this run would make: a user's inputs file that
    appeared, changed or went away since makes them again."""
    own = user_inputs_file(pte)
    if not (meta_path.parent / INPUTS).is_file():
        return False
    if own.is_file():
        return meta.get("inputs_from") == str(own) and \
            own.stat().st_mtime_ns <= meta_path.stat().st_mtime_ns
    return meta.get("inputs_from") != str(own)
