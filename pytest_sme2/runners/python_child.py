"""Child process of the python runner: size the thread pool, load with ETDump on, run warm-up +
timed executions, write the ETDump. Errors go to stderr as one line, exit status 1."""

from __future__ import annotations

import argparse
import json
import sys


def _inputs_from_meta(module) -> tuple:
    """Seeded random inputs shaped from the program's own metadata (no inputs file given)."""
    import torch

    meta = module.method_meta("forward")
    gen = torch.Generator().manual_seed(0)
    out = []
    for i in range(meta.num_inputs()):
        info = meta.input_tensor_meta(i)
        dtype = _TORCH_DTYPES.get(int(info.dtype()), None)
        if dtype is None:
            raise SystemExit(f"input {i} has scalar type {info.dtype()}; pass --inputs")
        t = torch.randn(tuple(info.sizes()), generator=gen)
        out.append(t.to(dtype) if dtype.is_floating_point else (t * 10).to(dtype))
    return tuple(out)


_TORCH_DTYPES: dict = {}


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

    _TORCH_DTYPES.update({6: torch.float32, 5: torch.float16, 15: torch.bfloat16, 4: torch.int64,
                          3: torch.int32, 1: torch.int8, 0: torch.uint8, 11: torch.bool})
    _unsafe_reset_threadpool(a.threads)  # before the load, never after
    try:
        module = _load_for_executorch(a.pte, enable_etdump=True, debug_buffer_size=0)
    except Exception as e:  # noqa: BLE001
        print(f"{a.pte}: the ExecuTorch runtime refused the program ({str(e).strip()})",
              file=sys.stderr)
        return 1
    inputs = tuple(torch.load(a.inputs, weights_only=True)) if a.inputs else _inputs_from_meta(module)
    outputs = None
    for _ in range(a.warmup + a.runs):
        outputs = module.forward(inputs)
    module.write_etdump_result_to_file(a.etdump)
    if a.outputs and outputs is not None:
        torch.save(tuple(outputs), a.outputs)
    print(json.dumps({"threads": int(_threadpool_get_thread_count()),
                      "executions": a.warmup + a.runs}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
