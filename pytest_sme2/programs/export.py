"""Export a registered model to an ExecuTorch ``.pte`` (XNNPACK delegate) with its ``.etrecord``,
through a content-addressed cache.

Cache key = model source + builder arguments + dtype + export recipe (this file and
``recipes.py``: :data:`RECIPE_SOURCES`) + torch / executorch / torchao versions. A hit reads
one small JSON file and imports neither torch nor executorch. Concurrent pytest-xdist workers
take a per-key lock; the export is written into a temporary folder and renamed into place, so
nobody ever sees a half-written model.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
import sys
import time
from pathlib import Path
from typing import Callable

from pytest_sme2.errors import Sme2Error
from pytest_sme2.programs.export_watch import (ExportWatch, check_memory, parameter_count,
                                               peak_rss)
from pytest_sme2.programs.export_output import ExportOutput, caught_warnings, warning_lines
from pytest_sme2.programs.exported import (ETRECORD, INPUTS, META, PTD, PTE,  # noqa: F401
                                           ExportedModel, ExportError)
from pytest_sme2.readers.pte_data import program_digest
from pytest_sme2._util.buildcache import cache_root
from pytest_sme2._util.fsutil import file_sha256
from pytest_sme2._util.locking import file_lock
from pytest_sme2.programs.library import model_entry
from pytest_sme2.programs.spec import is_pte, split_weights
from pytest_sme2.programs.llm.schemes import LLM_SCHEMES, SCHEMES
from pytest_sme2._util.versions import package_version

# The dtypes of a model that is not an LLM (the matrix's dtype axis).
DTYPES = ("fp32", "fp16", "int8", "int8_dynamic")
MODEL_DTYPES = DTYPES
# What export_model takes: an LLM's dtypes are its quantization schemes (fp32, 8da4w, 8da4w-pc,
# 8da8w, :mod:`pytest_sme2.programs.llm.schemes`).
EXPORT_DTYPES = DTYPES + tuple(s for s in LLM_SCHEMES if s not in DTYPES)
# Largest accepted |exported - reference| relative to max |reference|. The reference is the
# eager model, and for int8 the quantized eager model: quantization error against the float
# model is recorded in the metadata, not judged (random weights quantize badly).
TOLERANCE = {"fp32": 1e-3, "fp16": 3e-2, "int8": 0.1, "int8_dynamic": 0.1,
             **{name: s.tolerance for name, s in SCHEMES.items() if name not in MODEL_DTYPES}}
# int8's second rule. |pte - quantized eager| compares two int8 implementations that round
# differently (XNNPACK requantizes in fixed point, the reference rounds float results at each
# quantize node): one-step flips at every layer add up with depth and with the network's gain,
# without either being wrong. mobilevit_small (static int8, 4 or 32 calibration batches, with or
# without re-estimated BatchNorm statistics) differs from its quantized eager model by 14-29% of
# max |output| while both are equally far from the float model (max |pte - float| 0.0204 vs
# max |quantized eager - float| 0.0206; evaluations/int8_accuracy.py). What a wrong
# lowering shows is a program further from the float model than quantization explains: it
# passes when max |pte - float| <= INT8_FLOAT_MARGIN x max |quantized eager - float|.
INT8_FLOAT_MARGIN = 1.25
# The header of what an export's third-party code warned (pytest_sme2.programs.export_output).
WARNINGS = "the export's third-party warnings"
# The export recipe is the source of these files (the cache logic here, the torch and executorch
# steps in recipes.py): editing any of them makes a new cache key.
RECIPE_SOURCES = (Path(__file__), Path(__file__).with_name("recipes.py"))
# An LLM's recipe also holds how its program is made (ExecuTorch's Llama, its KV cache, the
# constant methods) and its schemes: part of every LLM's key, of no other model's.
LLM_RECIPE_SOURCES = tuple(Path(importlib.util.find_spec(m).origin) for m in (
    "pytest_sme2.programs.llm.llama", "pytest_sme2.programs.llm.schemes"))


def default_cache_dir() -> Path:
    return cache_root() / "exports"


def _versions() -> dict[str, str]:
    return {pkg: package_version(pkg) for pkg in ("torch", "executorch", "torchao")}


def recipe_digest(llm: bool = False) -> str:
    """Hash of the recipe's source files (:data:`RECIPE_SOURCES`, and for an LLM
    :data:`LLM_RECIPE_SOURCES`), read without importing them: a cache hit must not import
    torch."""
    h = hashlib.sha256()
    for path in RECIPE_SOURCES + (LLM_RECIPE_SOURCES if llm else ()):
        try:
            data = path.read_bytes()
        except OSError:
            raise ExportError(f"the export recipe's source {path} is missing from this "
                              "installation of pytest-sme2 (reinstall it)") from None
        h.update(f"{path.name}:{len(data)}:".encode())
        h.update(data)
    return h.hexdigest()


def cache_key(model: str, dtype: str) -> str:
    entry = model_entry(model)
    h = hashlib.sha256()
    h.update(entry.source_digest().encode())
    h.update(dtype.encode())
    h.update(recipe_digest(llm=bool(getattr(entry, "llm", False))).encode())
    h.update(json.dumps(_versions(), sort_keys=True).encode())
    if split_weights(model)[1] != "pte":    # keys of programs with their weights inside unchanged
        h.update(f"weights={split_weights(model)[1]}".encode())
    return h.hexdigest()[:16]


# Hits verified in this process, by .pte path, size and mtime: a session looks each export up
# once per block, and hashing a 10 MB .pte every time costs more than the lookup.
_VERIFIED: dict[tuple[str, int, int], ExportedModel] = {}


def _load_hit(model: str, dtype: str, key: str, folder: Path) -> ExportedModel | None:
    try:
        meta = json.loads((folder / META).read_text())
    except (OSError, ValueError):
        return None
    if not all((folder / f).is_file() for f in (PTE, ETRECORD, INPUTS, INPUTS + ".json")):
        return None
    stat = (folder / PTE).stat()
    seen = (str(folder / PTE), stat.st_size, stat.st_mtime_ns)
    if seen in _VERIFIED and _VERIFIED[seen].meta == meta:
        return _VERIFIED[seen]
    # A damaged or replaced .pte (or .ptd) is a miss, not a hit: hashing ~10 MB costs ms.
    if meta.get("pte_sha256") != file_sha256(folder / PTE):
        return None
    if meta.get("ptd_sha256") and (not (folder / PTD).is_file()
                                   or meta["ptd_sha256"] != file_sha256(folder / PTD)):
        return None
    _VERIFIED[seen] = ExportedModel(model, dtype, key, folder, meta)
    return _VERIFIED[seen]


def cached_export(model: str, dtype: str, cache_dir: Path | None = None) -> ExportedModel | None:
    """The cached export of ``model`` in ``dtype`` if the cache has a sound one; never exports."""
    if is_pte(model):
        return None
    if dtype not in EXPORT_DTYPES:
        return None
    cache_dir = Path(cache_dir) if cache_dir else default_cache_dir()
    key = cache_key(model, dtype)
    return _load_hit(model, dtype, key, cache_dir / _folder(model) / f"{dtype}-{key}")


def is_llm_model(model: str) -> bool:
    """Whether a registered or library model is an LLM (its entry says so; nothing built)."""
    return bool(getattr(model_entry(model), "llm", False))


def dtype_problem(model: str, dtype: str) -> None:
    """One line when ``dtype`` is not one ``model`` exports in: an LLM takes the LLM schemes,
    any other model the model dtypes."""
    try:
        llm = is_llm_model(model)
    except Sme2Error:
        llm = False             # an unknown model: its own line comes when it is built
    if dtype not in EXPORT_DTYPES:
        choices = LLM_SCHEMES if llm else MODEL_DTYPES
        raise ExportError(f"unknown dtype {dtype!r}; choose one of {', '.join(choices)}")
    if llm and dtype not in LLM_SCHEMES:
        raise ExportError(f"model {model!r} is an LLM: its dtypes are the schemes "
                          f"{', '.join(LLM_SCHEMES)}, not {dtype!r}")
    if not llm and dtype not in MODEL_DTYPES:
        raise ExportError(f"{dtype!r} is an LLM scheme and model {model!r} is not an LLM; "
                          f"choose one of {', '.join(MODEL_DTYPES)}")


def accuracy_problem(dtype: str, info: dict) -> str | None:
    """Why the exported program's outputs are wrong, or None (and ``info["accuracy_rule"]``
    says which rule passed). fp32/fp16: within TOLERANCE of the eager model. int8: within
    TOLERANCE of the quantized eager model, or no further from the float model than the
    quantized eager model is (see INT8_FLOAT_MARGIN)."""
    err, scale, ref = info["max_abs_error"], info["max_abs_eager"], info["reference"]
    if err <= TOLERANCE[dtype] * max(scale, 1e-6):
        info["accuracy_rule"] = f"max |pte - {ref}| <= {TOLERANCE[dtype]:g} x max |{ref}|"
        return None
    problem = (f"max |pte - {ref}| = {err:.3g} exceeds {TOLERANCE[dtype]:g} x max |{ref}| "
               f"({scale:.3g})")
    quant = info.get("max_abs_quantization_error")
    if quant is None:
        return problem
    vs_float = info["max_abs_error_vs_float"]
    if vs_float <= INT8_FLOAT_MARGIN * quant:
        info["accuracy_rule"] = (f"max |pte - float eager| <= {INT8_FLOAT_MARGIN:g} x "
                                 f"max |{ref} - float eager|")
        return None
    return (f"{problem}, and max |pte - float eager| = {vs_float:.3g} exceeds "
            f"{INT8_FLOAT_MARGIN:g} x the quantization error max |{ref} - float eager| "
            f"({quant:.3g})")


def _folder(model: str) -> str:
    """The cache folder of a model: a library spec (``transformers:X?a=1``) made path-safe."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", model)


def export_model(model: str, dtype: str = "fp32", cache_dir: Path | None = None,
                 force: bool = False, progress: Callable[[str], None] | None = None
                 ) -> ExportedModel:
    """Return the cached export of ``model`` in ``dtype``, exporting it first if needed; a
    ``.pte`` file is taken as it is (its inputs made from its metadata, once per content)."""
    if is_pte(model):
        from pytest_sme2.programs.pte import import_pte  # flatbuffers: only a .pte needs it

        return import_pte(Path(model), cache_dir or default_cache_dir(), progress)
    dtype_problem(model, dtype)
    cache_dir = Path(cache_dir) if cache_dir else default_cache_dir()
    key = cache_key(model, dtype)
    folder = cache_dir / _folder(model) / f"{dtype}-{key}"
    if not force and (hit := _load_hit(model, dtype, key, folder)):
        return hit
    with file_lock(cache_dir / _folder(model) / f".{dtype}-{key}.lock"):
        # Another worker may have finished it while we waited for the lock.
        if not force and (hit := _load_hit(model, dtype, key, folder)):
            return hit
        if folder.exists() and not force and progress:
            progress(f"cache entry {folder} is incomplete or damaged; exporting again")
        # Under the key's lock, any other .tmp folder of this key is a killed exporter's.
        for stale in (cache_dir / _folder(model)).glob(f".tmp-{dtype}-{key}-*"):
            shutil.rmtree(stale, ignore_errors=True)
        tmp = cache_dir / _folder(model) / f".tmp-{dtype}-{key}-{os.getpid()}"
        tmp.mkdir(parents=True)
        try:
            meta = _export_into(tmp, model, dtype, key, progress)
            if folder.exists():
                shutil.rmtree(folder)
            os.rename(tmp, folder)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return ExportedModel(model, dtype, key, folder, meta)


def first_line(exc: BaseException) -> str:
    """An exception as one line (its first, at most 300 characters)."""
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]


def _export_into(folder: Path, model: str, dtype: str, key: str,
                 progress: Callable[[str], None] | None) -> dict:
    """Run the recipe with torch's and executorch's warnings caught (:mod:`.export_output`):
    a failure's error is followed by them, a success gives them to ``progress`` as one
    :class:`ExportOutput` after its last line (pytest shows it under -v)."""
    say = progress or (lambda msg: None)
    with caught_warnings() as caught:   # the third-party ones, once the block is left
        try:
            meta = _run_recipe(folder, model, dtype, key, say)
        except ExportError as e:
            failure: ExportError | None = e
        else:
            failure = None
    output = ExportOutput.of(model, dtype, WARNINGS, warning_lines(caught))
    if failure is not None:
        if output is None:
            raise failure
        raise ExportError(f"{failure}\n{output}") from failure.__cause__
    if output is not None:
        say(output)
    return meta


def _run_recipe(folder: Path, model: str, dtype: str, key: str,
                say: Callable[[str], None]) -> dict:
    """Run the recipe; every stage failure becomes one ExportError line naming the stage."""
    from pytest_sme2.programs import recipes  # torch, executorch: only an export needs them

    watch = ExportWatch(say, f"{model} {dtype}")
    t0, cpu0 = time.perf_counter(), time.process_time()
    with watch:     # a line per stage, and every 30 s of a stage still running
        meta = _recipe_into(folder, model, dtype, key, recipes, watch)
    meta["export_seconds"] = round(time.perf_counter() - t0, 3)
    # This process's CPU time: what the export costs on a machine shared with others.
    meta["export_cpu_seconds"] = round(time.process_time() - cpu0, 3)
    (folder / META).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    say(f"exported {model} {dtype} in {meta['export_seconds']:.1f} s "
        f"({meta['delegates']} delegate(s), {sum(meta['portable_ops'].values())} operator(s) "
        "left outside the delegate)")
    return meta


def _recipe_into(folder: Path, model: str, dtype: str, key: str, recipes,
                 watch: ExportWatch) -> dict:
    try:
        watch.say(f"exporting {model} {dtype} ...")
        definition = model_entry(model).build()
        parameters = parameter_count(definition.module)
        check_memory(f"{model} as {dtype}", parameters, dtype)
        program, info = recipes.export(definition, dtype, at_stage=watch.stage,
                                       weights=split_weights(model)[1])
    except Sme2Error:
        raise
    except Exception as e:  # noqa: BLE001 - turned into one clear line
        raise ExportError(f"export of model {model!r} as {dtype} failed at stage "
                          f"{watch.current!r}: {first_line(e)}") from e
    problem = accuracy_problem(dtype, info)
    if problem:
        raise ExportError(f"export of model {model!r} as {dtype} is wrong: {problem}")
    (folder / PTE).write_bytes(program.buffer)
    info["pte_sha256"] = hashlib.sha256(program.buffer).hexdigest()
    data = recipes.data_file_bytes(program)
    if data is not None:
        (folder / PTD).write_bytes(data)
        info["ptd_sha256"] = hashlib.sha256(data).hexdigest()
    info["program_sha256"] = program_digest(info["pte_sha256"], info.get("ptd_sha256"))
    watch.stage("write the .etrecord")
    program.get_etrecord().save(str(folder / ETRECORD))
    recipes.save_inputs(definition.example_inputs, dtype, folder / INPUTS)
    return {
        "model": model,
        "dtype": dtype,
        "key": key,
        "versions": _versions(),
        "python": sys.version.split()[0],
        "parameters": parameters,
        # This process's peak resident memory (the export's, in a process that only exports).
        "export_peak_rss_bytes": peak_rss(),
        **{k: v for k, v in info.items()},
    }
