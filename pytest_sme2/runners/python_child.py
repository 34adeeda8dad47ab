"""Child process of the python runner: size the thread pool, load with ETDump on, run warm-up +
timed executions, write the ETDump (and the last outputs). Errors: one line on stderr, status 1.
Success ends with the same JSON summary line as the native runner (pytest_sme2.runners.base).

With ``--trace-runs T`` the timed runs carry no tracer (the native runner's
``--trace_executions``): the program loads untraced (``_load_program``, its method loaded and
timed apart), each run sets its inputs, then ``ExecuTorchMethod.execute()`` alone is timed by
``time.perf_counter_ns`` — Method::execute and one call into the bindings, none of forward()'s
conversion of inputs and outputs: as close to Method::execute as these bindings allow. The
program is then released and, when T > 0, loaded again with the ETDump tracer for
``--trace-warmup`` + T traced runs, the ETDump's only runs."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from types import ModuleType

import numpy as np

from pytest_sme2.errors import Sme2Error
from pytest_sme2.programs.kernel_libraries import import_for_python, program_libraries
from pytest_sme2.readers.pte_program import PteProgramError
from pytest_sme2.runners.python_generation import generate
from pytest_sme2.runners.python_process import (MachineProbe, Refused, Steps, TimedMethod,
                                                first_line, load_untraced, nonfinite_elements,
                                                status_kb, refusal, untraced_keys,
                                                watched_stderr)
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
    import torch  # torch: before the extension, see above  # noqa: F401

    try:
        from executorch.extension.pybindings import (  # executorch: after torch, on purpose
            _C as runtime)
    except ImportError:  # a layout without the bare extension: the public wrapper
        from executorch.extension.pybindings import (  # executorch: after torch, on purpose
            portable_lib as runtime)
    return runtime


def load_operator_libraries(pte: str) -> str | None:
    """Load the executorch wheel's libraries that register the operators ``pte`` calls outside
    the runtime (``llama::custom_sdpa``: ExecuTorch's LLM custom ops), before the program
    loads; the one line when one cannot be, else None."""
    libraries = ()
    try:
        libraries = program_libraries(Path(pte))
        import_for_python(libraries)
    except PteProgramError:     # a damaged program: its load says what is wrong, as native's
        return None
    except Sme2Error as e:
        return str(e) if str(e).startswith(pte) else f"{pte}: {e}"
    except (ImportError, OSError) as e:
        names = ", ".join(lib.path for lib in libraries)
        return (f"{pte}: its operators come from the executorch wheel's {names}, which does "
                f"not load here ({first_line(e)}): reinstall executorch")
    return None


def limit_torch_threads(torch, threads: int) -> None:
    """The wheel's custom-ops library links libtorch; in a Python process its GEMMs run
    libtorch's BLAS on torch's OpenMP pool, which takes every core unless told (measured: a
    0.6B-class prefill took 12.7 s at "1 thread" beside 2.6 s with the pool at 1). ExecuTorch's
    own pool is sized apart (``_unsafe_reset_threadpool``)."""
    torch.set_num_threads(threads)


def _forwards(forward, inputs, total: int, pte: str):
    """``total`` calls of ``forward``; the last outputs and the RSS after the first (this
    runtime loads a module's method in its first forward(): no earlier point), or the line
    that says why one failed."""
    outputs, rss_after_first = None, None
    for i in range(total):
        try:
            outputs = forward(inputs)
        except Exception as e:  # noqa: BLE001 - reported in one line
            raise Refused(f"{pte}: execution {i + 1} of {total} failed "
                          f"({first_line(e)})") from None
        if i == 0:
            rss_after_first = status_kb("VmRSS:")
    return outputs, rss_after_first


def _traced_pass(a, runtime, torch, inputs, total: int) -> dict:
    """The module with the ETDump tracer: ``total`` forward() calls (on ``inputs``, or on inputs
    from its metadata), the ETDump written; its load is lazy, so a refusal may show at the
    first call. Returns the pass's summary keys and its last outputs."""
    try:
        t0 = time.perf_counter()
        module = runtime._load_for_executorch(a.pte, data_path=a.data, enable_etdump=True,
                                              debug_buffer_size=0)
        meta = module.method_meta("forward")
        program_load_ms = (time.perf_counter() - t0) * 1e3
    except Exception as e:  # noqa: BLE001 - the runtime's refusal, reported in one line
        raise refusal(a.pte, [], f"{a.pte}: the ExecuTorch runtime refused the program "
                                 f"({first_line(e)})", a.data) from None
    inputs = inputs if inputs is not None else _inputs(a, meta, torch)
    seen: list[str] = []    # its load is lazy: a refusal for its .ptd shows in the first call
    try:
        with watched_stderr(seen):
            outputs, rss_after_load = _forwards(module.forward, inputs, total, a.pte)
    except Refused as e:
        raise refusal(a.pte, seen, str(e), a.data) from None
    module.write_etdump_result_to_file(a.etdump)
    return {"outputs": outputs, "program_load_ms": program_load_ms,
            "rss_after_load_kb": rss_after_load, "rss_after_load_includes": "first run"}


def _inputs(a, meta, torch) -> tuple:
    arrays = read_tensors(a.inputs) if a.inputs else _inputs_from_meta(meta)
    return tuple(torch.from_numpy(np.array(x)) for x in arrays)


def _forward_pass(a, runtime, torch, rss_before_load, probe: MachineProbe) -> int:
    """W + N runs on fixed inputs: traced forward() calls, or (--trace-runs) untraced
    ExecuTorchMethod.execute() calls timed by this process's clock, then the traced ones; the
    machine-state probe timed before and after them."""
    try:
        if a.trace_runs < 0:
            probe.before()
            got = _traced_pass(a, runtime, torch, None, a.warmup + a.runs)
            probe.after()
            outputs, extra, peak = got.pop("outputs"), got, status_kb("VmHWM:")
        else:
            seen: list[str] = []
            try:
                program, method, program_ms, method_ms = load_untraced(runtime, a.pte, seen,
                                                                       a.data)
            except Exception as e:  # noqa: BLE001 - the runtime's refusal, in one line
                raise refusal(a.pte, seen, f"{a.pte}: the ExecuTorch runtime refused the "
                                           f"program ({first_line(e)})", a.data) from None
            rss_after_load = status_kb("VmRSS:")
            inputs = _inputs(a, method.method_meta(), torch)
            timed = Steps([])
            probe.before()
            outputs, _ = _forwards(TimedMethod(method, timed).forward, inputs,
                                   a.warmup + a.runs, a.pte)
            probe.after()
            outputs = list(outputs)     # before the method goes
            peak = status_kb("VmHWM:")  # before the traced pass adds its own
            del method, program
            traced = a.trace_warmup + a.trace_runs
            if a.trace_runs > 0:
                _traced_pass(a, runtime, torch, inputs, traced)
            extra = {"program_load_ms": program_ms, "method_load_ms": method_ms,
                     "rss_after_load_kb": rss_after_load,
                     **untraced_keys(a, timed, traced if a.trace_runs > 0 else 0)}
    except Refused as e:
        print(str(e), file=sys.stderr)
        return 1
    arrays_out = [o.detach().numpy() for o in outputs if torch.is_tensor(o)] \
        if outputs is not None else []
    if a.outputs and outputs is not None:
        write_tensors(a.outputs, arrays_out)
    # Traced: the method load is timed by the runtime itself (Program::load_method in the
    # ETDump), there is no method_load_ms here, and rss_after_load_kb includes the first run.
    summary = {"threads": int(runtime._threadpool_get_thread_count()),
               "torch_threads": torch.get_num_threads(),     # the custom ops' BLAS pool
               "executions": a.warmup + a.runs, "rss_before_load_kb": rss_before_load,
               "peak_includes": "the Python interpreter, torch and the runtime extension",
               "peak_rss_kb": peak, "nonfinite_outputs": nonfinite_elements(arrays_out),
               **extra, **probe.keys()}
    print(json.dumps(summary))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="pytest_sme2.runners.python_child")
    p.add_argument("--pte", required=True)
    p.add_argument("--etdump", required=True)
    p.add_argument("--data", help="the program's .ptd data file (its weights)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--runs", type=int, default=30)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--inputs")
    p.add_argument("--outputs")
    p.add_argument("--generate", help="PROMPT_TOKENS,NEW_TOKENS: an LLM generation per run")
    p.add_argument("--trace-runs", type=int, default=-1,
                   help="time the runs untraced, then this many traced ones (-1: trace them)")
    p.add_argument("--trace-warmup", type=int, default=0)
    p.add_argument("--probe", help="the machine-state probe's program, timed around the runs")
    p.add_argument("--probe-runs", type=int, default=24)
    a = p.parse_args(argv)
    problem = program_problem(a.pte)
    if problem:
        print(problem, file=sys.stderr)
        return 1

    import torch  # torch: the child's alone, before the runtime

    runtime = import_runtime()
    problem = load_operator_libraries(a.pte)
    if problem:
        print(problem, file=sys.stderr)
        return 1
    limit_torch_threads(torch, a.threads)
    runtime._unsafe_reset_threadpool(a.threads)  # before the load, never after
    rss_before_load = status_kb("VmRSS:")
    try:
        probe = MachineProbe(runtime, torch, a.probe, a.probe_runs)
    except Refused as e:
        print(str(e), file=sys.stderr)
        return 1
    if a.generate:
        return generate(a, runtime, torch, rss_before_load, probe)
    return _forward_pass(a, runtime, torch, rss_before_load, probe)


if __name__ == "__main__":
    sys.exit(main())
