"""A ``.pte`` someone else exported, as a model: its inputs made from the program's own
``forward`` metadata (seeded, deterministic), its ``.etrecord`` used when one lies beside it,
its content hash as the cache key and the "what is under test" program hash.

The file is never copied: the cache folder (``<cache>/pte/<sha16>``) holds only the inputs and
``meta.json``; a changed file is a new key. A user's own inputs, beside the .pte (one of the two):

- ``<stem>.inputs.bin`` with its ``.json`` sidecar (the runners' tensor file,
  :mod:`pytest_sme2.readers.tensorfile`);
- ``<stem>.inputs.py``, a small Python hook: ``make_inputs(signature)`` gets forward's
  :class:`~pytest_sme2.readers.pte_program.MethodSignature` (``signature.inputs[i].dtype``,
  ``.shape``)
  and returns one numpy array or torch tensor per input. It runs once per content of the .pte
  and of the hook file (the result is cached like the generated inputs), in the process that
  first needs the model — under xdist possibly in two workers at once: make it deterministic.

Both are checked against forward's metadata (count, dtype, shape) with one line naming the file,
the input and what forward expects.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np

from pytest_sme2.errors import Sme2Error
from pytest_sme2._util.fsutil import file_sha256
from pytest_sme2.programs.exported import INPUTS, META, ExportedModel, ExportError
from pytest_sme2.programs.spec import AS_EXPORTED
from pytest_sme2.readers.pte_program import (MethodInput, MethodSignature, PteProgramError,
                                     forward_signature)
from pytest_sme2.readers.pte_data import (DataFileError, check_data_file, data_file_beside,
                                          program_digest)
from pytest_sme2.readers.tensorfile import read_tensors, write_tensors

INPUT_SEED = 0
HOOK_FUNCTION = "make_inputs"
ETRECORD_MISSING = ("no .etrecord beside the .pte: operators are shown by their runtime names "
                    "only (no edge operator types or module paths, no portable-op origins)")

def content_hash(pte: Path) -> str:
    """The program's identity: its file's sha256, with its .ptd's when one lies beside it
    (:func:`~pytest_sme2.readers.pte_data.data_file_beside`)."""
    data = data_file_beside(pte)
    return program_digest(file_sha256(pte), file_sha256(data) if data else None)


def user_inputs_file(pte: Path) -> Path:
    """Where a user's own inputs for ``pte`` go: ``m.inputs.bin`` (+ ``m.inputs.bin.json``)."""
    return pte.with_name(pte.stem + ".inputs.bin")


def user_inputs_hook(pte: Path) -> Path:
    """Where a user's inputs hook for ``pte`` goes: ``m.inputs.py``, defining
    ``make_inputs(signature)``."""
    return pte.with_name(pte.stem + ".inputs.py")


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
                       "(pytest_sme2.readers.tensorfile.write_tensors), or a "
                       f"{HOOK_FUNCTION}(signature) function in {user_inputs_hook(pte).name}")


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


def _own_inputs(pte: Path) -> Path | None:
    """The user's inputs file or hook beside ``pte``, None for neither; both is one line."""
    own, hook = user_inputs_file(pte), user_inputs_hook(pte)
    if own.is_file() and hook.is_file():
        raise ExportError(f"{pte}: both {own.name} and {hook.name} lie beside it; keep one "
                          "(the inputs file or the inputs hook)")
    return own if own.is_file() else hook if hook.is_file() else None


def _source_name(own: Path | None) -> str:
    """What ``meta.json`` says the inputs came from (also what makes cached inputs current)."""
    if own is None:
        return f"forward's metadata, seed {INPUT_SEED}"
    own = own.resolve()      # one name whether the .pte was named relative or absolute
    return f"{own}:{HOOK_FUNCTION}" if own.suffix == ".py" else str(own)


def check_inputs(arrays: list[np.ndarray], signature: MethodSignature, source: str) -> None:
    """``arrays`` fit forward's inputs: as many, each of the input's dtype and shape (a
    dynamic input: the same rank, no size above its bound). One line naming ``source``, the
    input and what forward expects."""
    expected = signature.inputs
    if len(arrays) != len(expected):
        listed = "; ".join(i.describe() for i in expected) or "none"
        raise ExportError(f"{source}: gives {len(arrays)} input(s), forward takes "
                          f"{len(expected)}: {listed}")
    for item, a in zip(expected, arrays):
        if item.kind != "Tensor":
            raise ExportError(f"{source}: forward's {item.describe()} is not a tensor; our "
                              "runners pass tensors only (make it a constant of the program)")
        shape, bound = tuple(a.shape), tuple(item.shape)
        fits = shape == bound if not item.dynamic else (
            len(shape) == len(bound) and all(0 <= s <= b for s, b in zip(shape, bound)))
        # A dtype numpy lacks (item.dtype None): the user's bytes, the runtime judges them.
        if (item.dtype is not None and a.dtype.name != item.dtype) or not fits:
            rule = " (dynamic: sizes up to these)" if item.dynamic else ""
            raise ExportError(f"{source}: input {item.index} is {a.dtype.name} {list(shape)}; "
                              f"forward expects {item.dtype or f'ScalarType {item.scalar_type}'}"
                              f" {list(bound)}{rule}")


def _as_array(value: Any, index: int, source: str) -> np.ndarray:
    if hasattr(value, "detach"):                      # a torch tensor, without importing torch
        try:
            return value.detach().cpu().contiguous().numpy()
        except (TypeError, RuntimeError) as e:        # e.g. bfloat16: numpy has no such dtype
            raise ExportError(f"{source}: input {index} cannot be a tensor file: {e}") from None
    if isinstance(value, np.ndarray):
        return value
    raise ExportError(f"{source}: input {index} is a {type(value).__name__}; return numpy "
                      "arrays or torch tensors, one per forward input")


def run_inputs_hook(hook: Path, signature: MethodSignature) -> list[np.ndarray]:
    """Import ``hook`` (its folder on ``sys.path`` meanwhile, for its sibling modules) and
    call its ``make_inputs(signature)``; every failure is one line naming the file."""
    source = f"{hook}:{HOOK_FUNCTION}"
    spec = importlib.util.spec_from_file_location(
        f"_pytest_sme2_inputs_hook_{abs(hash(str(hook)))}", hook)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(hook.parent))
    try:
        spec.loader.exec_module(module)
        fn = getattr(module, HOOK_FUNCTION, None)
        if not callable(fn):
            raise ExportError(f"{hook}: defines no {HOOK_FUNCTION}(signature) function")
        result = fn(signature)
    except Sme2Error:
        raise
    except Exception as e:  # noqa: BLE001 - the user's code: one line, then the others go on
        first = (str(e).strip().splitlines() or [""])[0][:200]
        raise ExportError(f"{source} failed: {type(e).__name__}: {first}") from None
    finally:
        sys.path.remove(str(hook.parent))
    items = list(result) if isinstance(result, (list, tuple)) else [result]
    return [_as_array(v, i, source) for i, v in enumerate(items)]


def _write_inputs(pte: Path, folder: Path, signature: MethodSignature) -> str:
    """The inputs file for ``pte`` in ``folder``; returns where they came from."""
    own = _own_inputs(pte)
    source = _source_name(own)
    if own is None:
        rng = np.random.default_rng(INPUT_SEED)
        arrays = [make_input(pte, item, rng) for item in signature.inputs]
    else:
        arrays = run_inputs_hook(own, signature) if own.suffix == ".py" else \
            read_tensors(own)   # one line when its sidecar is missing or wrong
        check_inputs(arrays, signature, source)
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
    data = data_file_beside(pte)
    if data is not None:
        try:
            check_data_file(data, pte)
        except DataFileError as e:
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
            source = _write_inputs(pte, tmp, signature)
        except Sme2Error as e:
            raise ExportError(str(e)) from None
        finally:
            for f in (INPUTS, INPUTS + ".json"):
                if (tmp / f).exists():
                    os.replace(tmp / f, folder / f)
            tmp.rmdir()
        meta = {"model": str(pte), "dtype": AS_EXPORTED, "key": key,
                "pte_sha256": file_sha256(pte), "program_sha256": digest,
                "ptd_sha256": file_sha256(data) if data else None,
                "source": "pte file", "inputs_from": source,
                "inputs_source_sha256": _own_sha256(pte),
                "inputs": [{"kind": i.kind, "dtype": i.dtype, "shape": list(i.shape)}
                           for i in signature.inputs]}
        meta_path.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
        if progress:
            weights = f", weights in {data.name}" if data else ""
            progress(f"{pte.name}: taken as exported (sha256 {key}{weights}), inputs from "
                     f"{source}")
    meta = {**meta, "etrecord": str(etrecord) if etrecord else None,
            "etrecord_missing": None if etrecord else ETRECORD_MISSING}
    return ExportedModel(str(pte), AS_EXPORTED, key, folder, meta, program_file=pte,
                         etrecord_file=etrecord or pte.with_suffix(".etrecord"), data_file=data)


def _own_sha256(pte: Path) -> str | None:
    own = _own_inputs(pte)
    return file_sha256(own) if own else None


def _inputs_current(meta: dict, meta_path: Path, pte: Path) -> bool:
    """The cached inputs still are what this run would make: a user's inputs file or hook
    that appeared, changed or went away since makes them again."""
    if not (meta_path.parent / INPUTS).is_file():
        return False
    return meta.get("inputs_from") == _source_name(_own_inputs(pte)) and \
        meta.get("inputs_source_sha256") == _own_sha256(pte)
