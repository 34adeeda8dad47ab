"""The XNNPACK export recipes (heavy imports: only :mod:`pytest_sme2.programs.export` loads this,
and only on a cache miss). fp16 is ``.half()`` before export; static int8 is PT2E with per-channel
symmetric config and calibration; dynamic int8 needs the dynamically quantized partitioner in
front of the plain one.

An LLM (``ModelDef.llm``) has its own recipe, :func:`export_llm`: the schemes of
:mod:`pytest_sme2.programs.llm.schemes` applied with torchao as ExecuTorch's ``export_llama``
does, a dynamic sequence length, the constant methods, and a verification that runs a prefill
then a decode step in one loaded program."""

from __future__ import annotations

import logging
import operator
import warnings
from pathlib import Path
from typing import Any, Callable, NamedTuple

# Importing torchao logs "Failed to load ..._C_mxfp8 / _C_cutlass_90a" (CUDA extras a CPU build
# lacks) and makes torch's pytree warn about an Enum it registers: harmless, and noise in every
# export's output. Only errors from them get through.
for _name in ("torchao", "torch.utils._pytree"):
    logging.getLogger(_name).setLevel(logging.ERROR)

import torch  # after the loggers are set

from pytest_sme2.programs.llm.llama import reset_kv_cache
from pytest_sme2.programs.llm.schemes import PT2E, TORCHAO, Scheme, parse_scheme
from pytest_sme2.programs.registry import ModelDef
from pytest_sme2.readers.tensorfile import write_tensors

_NOT_OPERATORS = {"executorch_call_delegate", "getitem"}


def _cast(inputs: tuple, dtype: str) -> tuple:
    if dtype != "fp16":
        return tuple(inputs)
    return tuple(t.half() if torch.is_tensor(t) and t.is_floating_point() else t for t in inputs)


def save_inputs(inputs: tuple, dtype: str, path: Path) -> None:
    write_tensors(path, [t.detach().contiguous().numpy() for t in _cast(inputs, dtype)])


def _quantize(module, example: tuple, calibration: list[tuple] | None, dynamic: bool):
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer, get_symmetric_quantization_config)  # executorch: ~3 s, quantizing only
    from torchao.quantization.pt2e.quantize_pt2e import (  # torchao: quantizing only
        convert_pt2e, prepare_pt2e)

    quantizer = XNNPACKQuantizer().set_global(
        get_symmetric_quantization_config(is_per_channel=True, is_dynamic=dynamic))
    captured = torch.export.export(module, example).module()
    prepared = prepare_pt2e(captured, quantizer)
    for batch in (calibration or [example]):
        prepared(*batch)
    return convert_pt2e(prepared)


def _partitioners(dtype: str) -> list:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import (
        XnnpackDynamicallyQuantizedPartitioner,  # executorch: ~3 s, only lowering needs it
        XnnpackPartitioner)

    if dtype == "int8_dynamic":
        return [XnnpackDynamicallyQuantizedPartitioner(), XnnpackPartitioner()]
    return [XnnpackPartitioner()]


def _partition(edge_program) -> tuple[int, dict[str, int]]:
    """How lowering split the program: XNNPACK delegates, and the operators left outside."""
    delegates = sum(1 for n in edge_program.graph_module.graph.nodes if n.op == "get_attr"
                    and str(n.target).startswith("lowered_module"))
    return delegates, _outside_delegate(edge_program)


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


def _run_pte(program, inputs: tuple) -> list:
    loaded, _data = _loaded(program)    # the data must outlive the calls
    return loaded.forward(inputs)


# The tag every constant gets with weights="ptd": ExecuTorch writes its data to model.ptd
# (programs.exported.PTD), as export_llm's export.foundation_weights_file does for a Llama.
PTD_TAG = "model"


def _weights_apart(exported, inputs: tuple, **export_kw):
    """``exported`` exported again with every constant tagged for the ``.ptd``: those the
    delegate takes (XNNPACK's packed weights) through ExecuTorch's pass on the unlifted module,
    the others through ``to_executorch``'s config (:func:`_to_executorch`)."""
    from executorch.exir.passes.external_constants_pass import (  # executorch: exports only
        delegate_external_constants_pass_unlifted)

    module = exported.module()
    delegate_external_constants_pass_unlifted(module, gen_tag_fn=lambda node: PTD_TAG)
    return torch.export.export(module, inputs, **export_kw)


def _to_executorch(edge, weights: str):
    """The ExecuTorch program; with ``weights="ptd"`` its constants go to the ``.ptd``."""
    from executorch.exir import ExecutorchBackendConfig  # executorch: exports only

    if weights == "pte":
        return edge.to_executorch()
    return edge.to_executorch(ExecutorchBackendConfig(external_constants=lambda node: PTD_TAG))


def data_file_bytes(program) -> bytes | None:
    """The program's ``.ptd`` bytes, None when its weights are in the ``.pte``."""
    _ = program.buffer     # serialises the program, which fills its tensor data
    data = program._tensor_data or {}
    return bytes(data[PTD_TAG]) if PTD_TAG in data else None


def _loaded(program):
    """The exported program loaded from memory with its ``.ptd`` when it has one, and those
    bytes: the runtime reads them in place, so the caller keeps them while it runs it."""
    from executorch.extension.pybindings.portable_lib import (  # executorch: exports only
        _load_for_executorch_from_buffer)

    data = data_file_bytes(program)
    return _load_for_executorch_from_buffer(program.buffer, data_map_buffer=data), data


class LlmQuantize(NamedTuple):
    """How one quantizer of the scheme table (``llm.schemes.QUANTIZERS``) is applied in an
    export: ``quantize(module, scheme, definition)`` returns the quantized module and how to
    reset its KV cache; ``strict`` is torch.export's mode for the module it returns."""

    stage: str
    quantize: Callable[[Any, Scheme, ModelDef], tuple[Any, Callable[[], None] | None]]
    strict: bool


def _quantize_torchao(module, scheme: Scheme, definition: ModelDef):
    """torchao's 8da{4,8}w on every Linear, in place, as ``export_llama -qmode`` does
    (``examples/models/llama/source_transformation/quantize.py``): a grouped scheme skips a
    Linear whose input size the group does not divide."""
    from torchao.quantization import (  # torchao: only a quantized export needs it
        Int8DynamicActivationIntxWeightConfig, quantize_)
    from torchao.quantization.granularity import PerAxis, PerGroup  # torchao: quantizing only

    group = scheme.group_size

    def linear(m, fqn: str) -> bool:
        return isinstance(m, torch.nn.Linear) and (group is None or m.weight.shape[1] % group == 0)

    quantize_(module, Int8DynamicActivationIntxWeightConfig(
        weight_dtype=torch.int4 if scheme.weight_bits == 4 else torch.int8,
        weight_granularity=PerAxis(0) if group is None else PerGroup(group),
        intx_choose_qparams_algorithm="affine"), filter_fn=linear)
    return module, definition.llm.reset


def _quantize_pt2e(module, scheme: Scheme, definition: ModelDef):
    """PT2E dynamic quantization of every linear as ``export_llama --pt2e_quantize
    xnnpack_dynamic[_qc4]`` does (``extension/llm/export/quantizer_lib.py`` and
    ``builder.py``): per-channel weights, int4 as int8 in [-8, 7] (XNNPACK's qc4w). Its KV
    cache is the captured graph module's own buffers."""
    from executorch.backends.transforms.duplicate_dynamic_quant_chain import (  # executorch: 3 s
        DuplicateDynamicQuantChainPass)
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer, get_symmetric_quantization_config)  # executorch: ~3 s, quantizing only
    from torchao.quantization.pt2e.quantize_pt2e import (  # torchao: quantizing only
        convert_pt2e, prepare_pt2e)

    example, dynamic_shapes = tuple(definition.example_inputs), definition.llm.dynamic_shapes
    bits = {"weight_qmin": -8, "weight_qmax": 7} if scheme.weight_bits == 4 else {}
    quantizer = XNNPACKQuantizer().set_global(
        get_symmetric_quantization_config(is_per_channel=True, is_dynamic=True, **bits))
    with torch.nn.attention.sdpa_kernel([torch.nn.attention.SDPBackend.MATH]), torch.no_grad():
        captured = torch.export.export(module, example, dynamic_shapes=dynamic_shapes,
                                       strict=True).module()
        prepared = prepare_pt2e(captured, quantizer)
        prepared(*example)
        converted = convert_pt2e(prepared)
    DuplicateDynamicQuantChainPass()(converted)
    return converted, lambda: reset_kv_cache(converted)


# Each quantizer of the scheme table, applied: a new one is a function and a line here.
LLM_QUANTIZE: dict[str, LlmQuantize] = {
    TORCHAO: LlmQuantize("quantize", _quantize_torchao, strict=True),
    PT2E: LlmQuantize("quantize (PT2E)", _quantize_pt2e, strict=False),
}


def _steps(module, steps: list[tuple], reset) -> list:
    """Eager outputs of ``steps`` run in order on fresh state (the KV cache), which is then
    reset again: torch.export takes the buffers' values as the program's initial state."""
    if reset:
        reset()
    with torch.no_grad():
        outputs = [module(*step) for step in steps]
    if reset:
        reset()
    return outputs


# Warnings every LLM export raises, none of them about the user's model: ExecuTorch's Llama
# marks positions with torch._check_is_size (deprecated in torch 2.13); transformers' output
# capturing is a global dynamo reports as a side effect; the emitter notes that a KV cache's
# initial state is not serialized. Ignored here, so that a session run with warnings as errors
# (filterwarnings = error) can export an LLM.
_LLM_EXPORT_WARNINGS = ("_check_is_size will be removed",
                        "While compiling, we found certain side effects",
                        "Mutation on a buffer in the model is detected")


def export_llm(definition: ModelDef, scheme_name: str, at_stage: Callable[[str], None],
               weights: str = "pte"):
    """Lower an LLM in ``scheme_name``; return (ExecutorchProgramManager, info). Verified by
    running ``llm.verify_inputs`` (prefill, then decode) in one loaded program against the same
    steps on the eager model (quantized by torchao for a quantized scheme)."""
    with warnings.catch_warnings():
        for message in _LLM_EXPORT_WARNINGS:
            warnings.filterwarnings("ignore", message=message)
        return _export_llm(definition, scheme_name, at_stage, weights)


def _export_llm(definition: ModelDef, scheme_name: str, at_stage: Callable[[str], None],
                weights: str):
    from executorch.exir import (  # executorch: ~3 s, only lowering needs it
        EdgeCompileConfig, to_edge_transform_and_lower)

    scheme = parse_scheme(scheme_name)
    llm = definition.llm
    module = definition.module.eval()
    steps = [tuple(s) for s in (llm.verify_inputs or [definition.example_inputs])]
    reference = _steps(module, steps, llm.reset)
    quantized_reference = None
    example = tuple(definition.example_inputs)
    how = LLM_QUANTIZE[scheme.quantizer]
    if scheme.quantized:
        at_stage(how.stage)
        module, reset = how.quantize(module, scheme, definition)
        quantized_reference = _steps(module, steps, reset)
    at_stage("torch.export")
    # Plain attention as export_llama traces it (the math SDPA: no fused kernel to capture).
    with torch.nn.attention.sdpa_kernel([torch.nn.attention.SDPBackend.MATH]), torch.no_grad():
        exported = torch.export.export(module, example, dynamic_shapes=llm.dynamic_shapes,
                                       strict=how.strict)
        if weights == "ptd":
            exported = _weights_apart(exported, example, dynamic_shapes=llm.dynamic_shapes,
                                      strict=how.strict)
    at_stage("lower to XNNPACK")
    partitioners = _partitioners("int8_dynamic" if scheme.quantized else "fp32")
    edge = to_edge_transform_and_lower(
        exported, partitioner=partitioners, constant_methods=dict(llm.constant_methods),
        compile_config=EdgeCompileConfig(_check_ir_validity=False), generate_etrecord=True)
    delegates, portable = _partition(edge.exported_program())
    at_stage("to_executorch")
    program = _to_executorch(edge, weights)
    at_stage("verify against eager")
    loaded, _data = _loaded(program)    # the data must outlive the calls below
    outputs = [loaded.forward(step) for step in steps]
    target = quantized_reference or reference
    per_step = [_max_abs(o, r) for o, r in zip(outputs, target)]
    float_err = max(_max_abs(o, r)[0] for o, r in zip(outputs, reference))
    quant_err = max(_max_abs(q if isinstance(q, (tuple, list)) else (q,), r)[0]
                    for q, r in zip(quantized_reference, reference)) \
        if quantized_reference else None
    argmax = [[int(o[0].argmax()) for o in outputs],
              [int((r[0] if isinstance(r, (tuple, list)) else r).argmax()) for r in target]]
    info = {
        "partitioners": [type(p).__name__ for p in partitioners],
        "delegates": delegates,
        "portable_ops": portable,
        "reference": "quantized eager" if scheme.quantized else "eager",
        "max_abs_error": max(e for e, _ in per_step),
        "max_abs_eager": max(s for _, s in per_step),
        "max_abs_error_vs_float": float_err,
        "max_abs_quantization_error": quant_err,
        "input_shapes": [list(t.shape) for t in definition.example_inputs
                         if torch.is_tensor(t)],
        "llm": {"scheme": scheme.name, "weight_bits": scheme.weight_bits,
                "granularity": scheme.granularity, "quantizer": scheme.quantizer,
                "constant_methods": dict(llm.constant_methods),
                "verify_steps": [[list(t.shape) for t in s] for s in steps],
                "step_max_abs_error": [e for e, _ in per_step],
                # Greedy next tokens of the program and of its reference, per step.
                "argmax": argmax[0], "reference_argmax": argmax[1]},
    }
    return program, info


def export(definition: ModelDef, dtype: str, at_stage: Callable[[str], None],
           weights: str = "pte"):
    """Lower ``definition`` for XNNPACK in ``dtype``; return (ExecutorchProgramManager, info).
    ``weights="ptd"``: its constants go to a ``.ptd`` (:func:`data_file_bytes`)."""
    from executorch.exir import to_edge_transform_and_lower  # executorch: ~3 s, lowering only

    if definition.llm is not None:
        return export_llm(definition, dtype, at_stage, weights)

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
    if weights == "ptd":
        exported = _weights_apart(exported, inputs)
    at_stage("lower to XNNPACK")
    partitioners = _partitioners(dtype)
    edge = to_edge_transform_and_lower(exported, partitioner=partitioners, generate_etrecord=True)
    delegates, portable = _partition(edge.exported_program())
    at_stage("to_executorch")
    program = _to_executorch(edge, weights)
    at_stage("verify against eager")
    outputs = _run_pte(program, inputs)
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
