"""Child process of the python runner: size the thread pool, load with ETDump on, run warm-up +
timed executions, write the ETDump (and the last outputs). Errors: one line on stderr, status 1."""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from pytest_sme2.tensorfile import SCALAR_TYPES, read_tensors, write_tensors


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

    import torch
    from executorch.extension.pybindings.portable_lib import (
        _load_for_executorch, _threadpool_get_thread_count, _unsafe_reset_threadpool)

    _unsafe_reset_threadpool(a.threads)  # before the load, never after
    try:
        module = _load_for_executorch(a.pte, enable_etdump=True, debug_buffer_size=0)
    except Exception as e:  # noqa: BLE001 - the runtime's refusal, reported in one line
        print(f"{a.pte}: the ExecuTorch runtime refused the program "
              f"({str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__})",
              file=sys.stderr)
        return 1
    arrays = read_tensors(a.inputs) if a.inputs else _inputs_from_meta(module.method_meta("forward"))
    inputs = tuple(torch.from_numpy(np.array(x)) for x in arrays)
    outputs = None
    for _ in range(a.warmup + a.runs):
        outputs = module.forward(inputs)
    module.write_etdump_result_to_file(a.etdump)
    if a.outputs and outputs is not None:
        write_tensors(a.outputs, [o.detach().numpy() for o in outputs if torch.is_tensor(o)])
    print(json.dumps({"threads": int(_threadpool_get_thread_count()),
                      "executions": a.warmup + a.runs}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
