"""The XNNPACK export recipes (heavy imports: only :mod:`pytest_sme2.programs.export` loads this,
and only on a cache miss). fp16 is ``.half()`` before export; static int8 is PT2E with per-channel
symmetric config and calibration; dynamic int8 needs the dynamically quantized partitioner in
front of the plain one."""

from __future__ import annotations

import logging
import operator
from pathlib import Path
from typing import Callable

# Importing torchao logs "Failed to load ..._C_mxfp8 / _C_cutlass_90a" (CUDA extras a CPU build
# lacks) and makes torch's pytree warn about an Enum it registers: harmless, and noise in every
# export's output. Only errors from them get through.
for _name in ("torchao", "torch.utils._pytree"):
    logging.getLogger(_name).setLevel(logging.ERROR)

import torch  # after the loggers are set

from pytest_sme2.programs.registry import ModelDef

_NOT_OPERATORS = {"executorch_call_delegate", "getitem"}


def _cast(inputs: tuple, dtype: str) -> tuple:
    if dtype != "fp16":
        return tuple(inputs)
    return tuple(t.half() if torch.is_tensor(t) and t.is_floating_point() else t for t in inputs)


def save_inputs(inputs: tuple, dtype: str, path: Path) -> None:
    from pytest_sme2.readers.tensorfile import write_tensors

    write_tensors(path, [t.detach().contiguous().numpy() for t in _cast(inputs, dtype)])


def _quantize(module, example: tuple, calibration: list[tuple] | None, dynamic: bool):
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer, get_symmetric_quantization_config)
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    quantizer = XNNPACKQuantizer().set_global(
        get_symmetric_quantization_config(is_per_channel=True, is_dynamic=dynamic))
    captured = torch.export.export(module, example).module()
    prepared = prepare_pt2e(captured, quantizer)
    for batch in (calibration or [example]):
        prepared(*batch)
    return convert_pt2e(prepared)


def _partitioners(dtype: str) -> list:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import (
        XnnpackDynamicallyQuantizedPartitioner, XnnpackPartitioner)

    if dtype == "int8_dynamic":
        return [XnnpackDynamicallyQuantizedPartitioner(), XnnpackPartitioner()]
    return [XnnpackPartitioner()]


def _outside_delegate(edge_program) -> dict[str, int]:
    """Operators left to the portable runtime and how many of each (what a report surfaces)."""
    counts: dict[str, int] = {}
    for node in edge_program.graph_module.graph.nodes:
        if node.op != "call_function" or node.target is operator.getitem:
            continue
        name = getattr(node.target, "__name__", str(node.target))
        if name not in _NOT_OPERATORS:
            counts[name] = counts.get(name, 0) + 1
    return dict(sorted(counts.items()))


def _max_abs(outputs, reference) -> tuple[float, float]:
    ref = reference if isinstance(reference, (tuple, list)) else (reference,)
    if len(outputs) != len(ref):
        raise RuntimeError(f"the .pte returned {len(outputs)} outputs, eager {len(ref)}")
    err = max(float((o.float() - r.float()).abs().max()) for o, r in zip(outputs, ref))
    return err, max(float(r.float().abs().max()) for r in ref)


def _run_pte(buffer: bytes, inputs: tuple) -> list:
    from executorch.extension.pybindings.portable_lib import _load_for_executorch_from_buffer

    return _load_for_executorch_from_buffer(buffer).forward(inputs)


def export(definition: ModelDef, dtype: str, at_stage: Callable[[str], None]):
    """Lower ``definition`` for XNNPACK in ``dtype``; return (ExecutorchProgramManager, info)."""
    from executorch.exir import to_edge_transform_and_lower

    module = definition.module.eval()
    example = tuple(definition.example_inputs)
    with torch.no_grad():
        reference = module(*example)
    if dtype == "fp16":
        module = module.half()
    inputs = _cast(example, dtype)
    if dtype in ("int8", "int8_dynamic"):
        at_stage("quantize")
        module = _quantize(module, example, definition.calibration_inputs,
                           dynamic=dtype == "int8_dynamic")
        # The lowered program must match the quantized model; its distance from the float
        # model is quantization error, recorded but not a failure.
        with torch.no_grad():
            quantized_reference = module(*example)
    at_stage("torch.export")
    exported = torch.export.export(module, inputs)
    at_stage("lower to XNNPACK")
    partitioners = _partitioners(dtype)
    edge = to_edge_transform_and_lower(exported, partitioner=partitioners, generate_etrecord=True)
    graph = edge.exported_program().graph_module.graph
    delegates = sum(1 for n in graph.nodes if n.op == "get_attr"
                    and str(n.target).startswith("lowered_module"))
    portable = _outside_delegate(edge.exported_program())
    at_stage("to_executorch")
    program = edge.to_executorch()
    at_stage("verify against eager")
    outputs = _run_pte(program.buffer, inputs)
    float_err, scale = _max_abs(outputs, reference)
    err, ref_scale = (float_err, scale) if dtype not in ("int8", "int8_dynamic") else \
        _max_abs(outputs, quantized_reference)
    # How far PyTorch's own simulation of the quantized model is from the float model: the
    # quantization error a correct lowering reproduces (export.accuracy_problem).
    quant_err = _max_abs(quantized_reference if isinstance(quantized_reference, (tuple, list))
                         else (quantized_reference,), reference)[0] \
        if dtype in ("int8", "int8_dynamic") else None
    info = {
        "partitioners": [type(p).__name__ for p in partitioners],
        "delegates": delegates,
        "portable_ops": portable,
        "reference": "quantized eager" if dtype.startswith("int8") else "eager",
        "max_abs_error": err,
        "max_abs_eager": ref_scale,
        "max_abs_error_vs_float": float_err,
        "max_abs_quantization_error": quant_err,
        "input_shapes": [list(t.shape) for t in inputs if torch.is_tensor(t)],
    }
    return program, info
