"""Operators a program calls outside its delegates that the runtime alone does not register,
and the executorch wheel's libraries that register them (:data:`KERNEL_LIBRARIES`, one table).

ExecuTorch's LLM exports (``export_llama --use_sdpa_with_kv_cache``, ``export_llm
model.use_sdpa_with_kv_cache=true``) call ``llama::custom_sdpa.out`` and
``llama::update_cache.out``; the wheel registers them from
``executorch/extension/llm/custom_ops/libcustom_ops_aot_lib.so`` into the kernel registry of
its shared ``libexecutorch.so``, the one every runner here links. How each runner gets them:

- the Python runtime imports the library's Python module before ``_load_for_executorch``
  (:func:`import_for_python`);
- our native runner on this host loads the library with ``--kernel_lib`` (:func:`host_load_order`).
  The library is a PyTorch extension: it links libtorch and the executorch pybindings, whose
  ``libtorch_python`` needs CPython's symbols, so CPython's shared ``libpython`` is loaded
  first (about 0.3 s and 100 MB of mappings, measured on the host);
- a target (``--device qemu``, a phone) would need the same closure built for it: the aarch64
  torch wheel on PyPI is a CUDA build (``libtorch_cuda`` 430 MB, ``libcudart``, ``libcudnn``,
  ``libnccl``...) and there is no aarch64 CPython to load, so no runner bundle carries it:
  :func:`target_problem` is the one line that says so.

Reading which operators a program calls is the flatbuffer's own operator table
(:mod:`pytest_sme2.readers.pte_program`): milliseconds, no runtime.
"""

from __future__ import annotations

import ctypes
import functools
import importlib
import importlib.util
import os
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from pytest_sme2.errors import Sme2Error
from pytest_sme2.readers.pte_program import read_signatures


class KernelLibraryError(Sme2Error):
    pass


@dataclass(frozen=True)
class KernelLibrary:
    """One library of the executorch wheel that registers operators when it is loaded."""

    name: str
    namespaces: tuple[str, ...]     # the operator namespaces it registers ("llama", ...)
    module: str                     # the Python module whose import loads it
    path: str                       # the library, relative to the executorch package
    what: str                       # a few words for reports and errors
    # Whether our native runner links the runtime library of these operators already
    # (libexecutorch_kernels_quantized.so): then only the Python runtime loads this one.
    native_links_it: bool = False


KERNEL_LIBRARIES: tuple[KernelLibrary, ...] = (
    KernelLibrary("custom_ops", ("llama", "preprocess"),
                  "executorch.extension.llm.custom_ops.custom_ops",
                  "extension/llm/custom_ops/libcustom_ops_aot_lib.so",
                  "ExecuTorch's LLM custom operators (custom SDPA, KV-cache update, ...)"),
    KernelLibrary("quantized_ops", ("quantized_decomposed",), "executorch.kernels.quantized",
                  "kernels/quantized/libquantized_ops_aot_lib.so",
                  "ExecuTorch's quantized operators (quantized embeddings, mixed linear)",
                  native_links_it=True),
)


def namespace(operator: str) -> str:
    """``llama::custom_sdpa.out`` -> ``llama``."""
    return operator.split("::", 1)[0] if "::" in operator else ""


def libraries_for(operators: Iterable[str]) -> tuple[KernelLibrary, ...]:
    """The libraries that register ``operators`` (in the table's order, each once)."""
    spaces = {namespace(op) for op in operators}
    return tuple(lib for lib in KERNEL_LIBRARIES if spaces & set(lib.namespaces))


@functools.lru_cache(maxsize=128)
def _program_operators(pte: str, size: int, mtime_ns: int) -> tuple[str, ...]:
    methods = read_signatures(Path(pte))
    return tuple(dict.fromkeys(op for m in methods.values() for op in m.operators))


def program_operators(pte: Path) -> tuple[str, ...]:
    """Every operator the program's methods call outside their delegates, each once."""
    st = Path(pte).stat()
    return _program_operators(str(pte), st.st_size, st.st_mtime_ns)


def program_libraries(pte: Path) -> tuple[KernelLibrary, ...]:
    """The wheel's libraries ``pte`` needs loaded before it can load."""
    return libraries_for(program_operators(pte))


# ExecuTorch's own BLAS (``sgemm_``...), what its kernels and the custom ops call where they
# are linked as llama_main links them, and what our native runner binds them to.
EXECUTORCH_BLAS = "lib/libexecutorch_kernels_optimized.so"


def import_for_python(libraries: Iterable[KernelLibrary]) -> None:
    """Load ``libraries`` into this Python process (before the program is loaded).

    The custom-ops library calls ``sgemm_``; loaded by Python it would bind to libtorch_cpu's
    (MKL, on torch's OpenMP pool: other numerics than our native runner's, and threads beyond
    the request's; a 0.6B-class program's logits moved by 2% of the largest, which flips a
    near-tie of its greedy tokens). Making
    ExecuTorch's own BLAS library global first (it is loaded already, with the pybindings)
    binds them as in our native runner."""
    libraries = list(libraries)
    if any(not lib.native_links_it for lib in libraries):
        ctypes.CDLL(str(executorch_dir() / EXECUTORCH_BLAS), mode=os.RTLD_GLOBAL | os.RTLD_NOW)
    for lib in libraries:
        importlib.import_module(lib.module)


def executorch_dir() -> Path:
    spec = importlib.util.find_spec("executorch")
    if spec is None or not spec.submodule_search_locations:
        raise KernelLibraryError("executorch is not installed: install pytest-sme2's "
                                 "dependencies")
    return Path(list(spec.submodule_search_locations)[0])


def shared_libpython() -> Path:
    """This Python's shared ``libpython`` (what the wheel's operator libraries need in a
    process that is not Python)."""
    libdir, soname = sysconfig.get_config_var("LIBDIR"), sysconfig.get_config_var("INSTSONAME")
    path = Path(libdir or "") / (soname or "")
    if not sysconfig.get_config_var("Py_ENABLE_SHARED") or not path.is_file():
        raise KernelLibraryError(
            "this Python has no shared libpython (built without --enable-shared), which the "
            "executorch wheel's operator libraries need outside Python: run the program with "
            "the python runner (--runner python), or use a Python built with --enable-shared")
    return path


def host_load_order(libraries: Iterable[KernelLibrary]) -> tuple[Path, ...]:
    """What our native runner on this host loads, in order (``--kernel_lib``), for
    ``libraries``: libpython first, then each library the runner does not link already.
    Empty when there is none."""
    wanted = [lib for lib in libraries if not lib.native_links_it]
    if not wanted:
        return ()
    root = executorch_dir()
    paths = []
    for lib in wanted:
        path = root / lib.path
        if not path.is_file():
            raise KernelLibraryError(f"{path} is missing from the executorch package, and it "
                                     f"registers {lib.what}: reinstall executorch")
        paths.append(path)
    return (shared_libpython(), *paths)


def target_problem(pte: Path, where: str) -> str | None:
    """The one line for a program whose custom operators our runner cannot load on a target
    (``where``: "device qemu", "device SERIAL"); None when it calls none."""
    wanted = [lib for lib in program_libraries(pte) if not lib.native_links_it]
    if not wanted:
        return None
    spaces = {s for lib in wanted for s in lib.namespaces}
    ops = ", ".join(op for op in program_operators(pte) if namespace(op) in spaces)
    names = " and ".join(Path(lib.path).name for lib in wanted)
    return (f"{pte}: calls {ops}, which the executorch wheel registers from {names}; our "
            f"runner cannot load that on {where}: it is a PyTorch extension needing libtorch "
            "and CPython's libpython for the target (the aarch64 torch wheel is a CUDA build) "
            "and no runner bundle carries them. Export with plain attention to run it there "
            "(tiny_llama_plain, executorch:llama?attention=plain, export_llama -kv without "
            "--use_sdpa_with_kv_cache), or pass a runner built with ExecuTorch's custom ops "
            "(llama_main with EXECUTORCH_BUILD_KERNELS_LLM=ON) as --runner NAME=PATH")
