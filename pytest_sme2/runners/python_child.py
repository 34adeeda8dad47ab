"""Child process of the python runner: size the thread pool, load with ETDump on, run warm-up +
timed executions, write the ETDump (and the last outputs). Errors: one line on stderr, status 1.
Success ends with the same JSON summary line as the native runner (pytest_sme2.runners.base)."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from types import ModuleType

import numpy as np

from pytest_sme2.readers.tensorfile import SCALAR_TYPES, read_tensors, write_tensors


def _inputs_from_meta(meta) -> list[np.ndarray]:
    """Seeded inputs shaped from the program's own metadata, when no inputs file is given."""
    rng = np.random.default_rng(0)
    out = []
    for i in range(meta.num_inputs()):
        info = meta.input_tensor_meta(i)
        dtype = SCALAR_TYPES.get(int(info.dtype()))
        if dtype is None:
            raise SystemExit(f"input {i} has ExecuTorch scalar type {int(info.dtype())}; "
                             "pass an inputs file")
        out.append(rng.standard_normal(tuple(info.sizes())).astype(dtype))
    return out


def program_problem(path: str) -> str | None:
    """Why ``path`` cannot be an ExecuTorch program, judged from its header before the (slow)
    runtime import; None if it may be one. The runtime itself logs a foreign header's bytes,
    which aborts the Python runtime when they are not UTF-8."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(8)
    except FileNotFoundError:
        return f"{path}: no such .pte file"
    except OSError as e:
        return f"{path}: cannot read the .pte file ({e.strerror})"
    if not head:
        return f"{path}: empty .pte file, not an ExecuTorch program (export it again)"
    if len(head) < 8 or head[4:6] != b"ET" or not head[6:8].isdigit():
        return (f"{path}: not an ExecuTorch program (no 'ETnn' identifier in its header; "
                "export it again)")
    return None


def import_runtime() -> ModuleType:
    """The ExecuTorch runtime extension, imported directly: the package's ``portable_lib``
    wrapper imports ``executorch.exir`` (and through it torchao) only to issue an "experimental
    API" warning, which costs seconds more per process (~1.3 s -> ~4-9 s here) and prints
    torchao's "Failed to load ..._C_mxfp8" lines. torch comes first: it loads libtorch, whose
    symbols the extension needs. Importing creates no runtime state (no pool, no program)."""
    # Import-time warnings (missing CUDA extras, deprecations) would fill the stderr tail a
    # failure is reported with, if the fallback below imports torchao.
    for name in ("torchao", "torch.utils._pytree"):
        logging.getLogger(name).setLevel(logging.ERROR)
    import torch  # noqa: F401 - before the extension, see above

    try:
        from executorch.extension.pybindings import _C as runtime
    except ImportError:  # a layout without the bare extension: the public wrapper
        from executorch.extension.pybindings import portable_lib as runtime
    return runtime


def status_kb(field: str) -> int | None:
    """A ``VmRSS:`` / ``VmHWM:`` value of /proc/self/status in kB; None where there is none."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field):
                    return int(line[len(field):].split()[0])
    except (OSError, ValueError, IndexError):
        pass
    return None


def _first_line(e: BaseException) -> str:
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="pytest_sme2.runners.python_child")
    p.add_argument("--pte", required=True)
    p.add_argument("--etdump", required=True)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--runs", type=int, default=30)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--inputs")
    p.add_argument("--outputs")
    a = p.parse_args(argv)
    problem = program_problem(a.pte)
    if problem:
        print(problem, file=sys.stderr)
        return 1

    import time

    import torch

    runtime = import_runtime()
    runtime._unsafe_reset_threadpool(a.threads)  # before the load, never after
    rss_before_load = status_kb("VmRSS:")
    try:
        t0 = time.perf_counter()
        module = runtime._load_for_executorch(a.pte, enable_etdump=True, debug_buffer_size=0)
        # The load is lazy: a program the runtime refuses fails here, not above.
        meta = module.method_meta("forward")
        program_load_ms = (time.perf_counter() - t0) * 1e3
    except Exception as e:  # noqa: BLE001 - the runtime's refusal, reported in one line
        print(f"{a.pte}: the ExecuTorch runtime refused the program ({_first_line(e)})",
              file=sys.stderr)
        return 1
    arrays = read_tensors(a.inputs) if a.inputs else _inputs_from_meta(meta)
    inputs = tuple(torch.from_numpy(np.array(x)) for x in arrays)
    outputs = None
    total = a.warmup + a.runs
    rss_after_load = None
    for i in range(total):
        try:
            outputs = module.forward(inputs)
        except Exception as e:  # noqa: BLE001 - reported in one line
            print(f"{a.pte}: execution {i + 1} of {total} failed ({_first_line(e)})",
                  file=sys.stderr)
            return 1
        if i == 0:  # this runtime loads the method in the first forward(): no earlier point
            rss_after_load = status_kb("VmRSS:")
    module.write_etdump_result_to_file(a.etdump)
    if a.outputs and outputs is not None:
        write_tensors(a.outputs, [o.detach().numpy() for o in outputs if torch.is_tensor(o)])
    # The method load is timed by the runtime itself (Program::load_method in the ETDump):
    # there is no separate method_load_ms here, and rss_after_load_kb includes the first run.
    print(json.dumps({"threads": int(runtime._threadpool_get_thread_count()),
                      "executions": a.warmup + a.runs, "program_load_ms": program_load_ms,
                      "rss_before_load_kb": rss_before_load,
                      "rss_after_load_kb": rss_after_load, "rss_after_load_includes": "first run",
                      "peak_includes": "the Python interpreter, torch and the runtime extension",
                      "peak_rss_kb": status_kb("VmHWM:")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
