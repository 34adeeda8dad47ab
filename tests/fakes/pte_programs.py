"""Hand-made ExecuTorch program flatbuffers (``program.fbs``'s Program -> ExecutionPlan ->
EValue -> Tensor/Int), only as far as the metadata reader looks: fast tests of what a user's
.pte can be, without torch. The runtime refuses them (no instructions): that is one test too."""

from __future__ import annotations

from pathlib import Path

import flatbuffers

# KernelTypes union codes (flatbuffers' NONE is 0).
INT, BOOL, TENSOR = 2, 3, 5


def _tensor(b: flatbuffers.Builder, scalar_type: int, sizes: list[int],
            dynamic: bool = False) -> int:
    b.StartVector(4, len(sizes), 4)
    for d in reversed(sizes):
        b.PrependInt32(d)
    vec = b.EndVector()
    b.StartObject(10)
    b.PrependInt8Slot(0, scalar_type, 0)
    b.PrependUOffsetTRelativeSlot(2, vec, 0)
    b.PrependInt8Slot(8, 1 if dynamic else 0, 0)    # shape_dynamism: DYNAMIC_BOUND
    return b.EndObject()


def _int(b: flatbuffers.Builder, value: int) -> int:
    b.StartObject(1)
    b.PrependInt64Slot(0, value, 0)
    return b.EndObject()


def _bool(b: flatbuffers.Builder, value: bool) -> int:
    b.StartObject(1)
    b.PrependBoolSlot(0, value, False)      # false is left out, as flatc's builders do
    return b.EndObject()


def _evalue(b: flatbuffers.Builder, kind: int, val: int) -> int:
    b.StartObject(2)
    b.PrependUint8Slot(0, kind, 0)
    b.PrependUOffsetTRelativeSlot(1, val, 0)
    return b.EndObject()


def _offsets(b: flatbuffers.Builder, items: list[int]) -> int:
    b.StartVector(4, len(items), 4)
    for o in reversed(items):
        b.PrependUOffsetTRelative(o)
    return b.EndVector()


def _ints(b: flatbuffers.Builder, items) -> int:
    items = list(items)
    b.StartVector(4, len(items), 4)
    for i in reversed(items):
        b.PrependInt32(i)
    return b.EndVector()


def _value(b: flatbuffers.Builder, item: tuple) -> int:
    if item[0] == "tensor":
        return _evalue(b, TENSOR, _tensor(b, *item[1:]))
    if item[0] == "bool":
        return _evalue(b, BOOL, _bool(b, item[1]))
    return _evalue(b, INT, _int(b, item[1]))


def _operator(b: flatbuffers.Builder, name: str) -> int:
    """``"llama::custom_sdpa.out"`` as program.fbs's Operator (name, overload)."""
    op, _, overload = name.partition(".")
    name_off, overload_off = b.CreateString(op), b.CreateString(overload)
    b.StartObject(2)
    b.PrependUOffsetTRelativeSlot(0, name_off, 0)
    b.PrependUOffsetTRelativeSlot(1, overload_off, 0)
    return b.EndObject()


def program_bytes(methods: dict[str, list[tuple]],
                  constants: dict[str, int | bool] | None = None,
                  operators: list[str] | None = None) -> bytes:
    """``{"forward": [("tensor", scalar_type, [1, 3, 8, 8]), ("int", 4)]}`` -> .pte bytes
    (``("tensor", 4, [1, 127], True)``: a dynamic shape bounded by those sizes).
    ``constants``: constant methods (``{"get_max_seq_len": 128, "use_kv_cache": True}``), each
    a plan with no inputs and one Int or Bool output, as export's ``constant_methods`` writes.
    ``operators``: forward's operator table (``["aten::add.out", "llama::custom_sdpa.out"]``)."""
    b = flatbuffers.Builder(1024)
    plans = []
    plan_specs = [(name, inputs, []) for name, inputs in methods.items()]
    plan_specs += [(name, [], [("bool" if isinstance(v, bool) else "int", v)])
                   for name, v in (constants or {}).items()]
    for name, inputs, outputs in plan_specs:
        values = [_value(b, item) for item in [*inputs, *outputs]]
        values_vec = _offsets(b, values)
        inputs_vec = _ints(b, range(len(inputs)))
        outputs_vec = _ints(b, range(len(inputs), len(inputs) + len(outputs)))
        ops = [_operator(b, o) for o in operators or []] if name == "forward" else []
        ops_vec = _offsets(b, ops) if ops else None
        name_off = b.CreateString(name)
        b.StartObject(10)
        b.PrependUOffsetTRelativeSlot(0, name_off, 0)
        b.PrependUOffsetTRelativeSlot(2, values_vec, 0)
        b.PrependUOffsetTRelativeSlot(3, inputs_vec, 0)
        b.PrependUOffsetTRelativeSlot(4, outputs_vec, 0)
        if ops_vec is not None:
            b.PrependUOffsetTRelativeSlot(6, ops_vec, 0)
        plans.append(b.EndObject())
    plans_vec = _offsets(b, plans)
    b.StartObject(8)
    b.PrependUOffsetTRelativeSlot(1, plans_vec, 0)
    b.Finish(b.EndObject(), file_identifier=b"ET12")
    return bytes(b.Output())


def write_program(path: Path, methods: dict[str, list[tuple]],
                  constants: dict[str, int | bool] | None = None,
                  operators: list[str] | None = None) -> Path:
    path.write_bytes(program_bytes(methods, constants, operators))
    return path


def _llm_tensor(b: flatbuffers.Builder, scalar_type: int, sizes: list[int], *,
                buffer: int = 0, external: str | None = None, planned: bool = False) -> int:
    """A Tensor with its data in ``constant_buffer[buffer]``, outside the program (``external``:
    its name in the .ptd, ``extra_tensor_info.location`` EXTERNAL) or memory-planned (a mutable
    buffer: ``allocation_info`` set)."""
    sizes_vec = _ints(b, sizes)
    extra = alloc = None
    if external is not None:
        name = b.CreateString(external)
        b.StartObject(5)
        b.PrependUOffsetTRelativeSlot(1, name, 0)
        b.PrependInt8Slot(2, 1, 0)                      # TensorDataLocation.EXTERNAL
        extra = b.EndObject()
    if planned:
        b.StartObject(3)
        b.PrependUint32Slot(0, 1, 0)
        alloc = b.EndObject()
    b.StartObject(10)
    b.PrependInt8Slot(0, scalar_type, 0)
    b.PrependUOffsetTRelativeSlot(2, sizes_vec, 0)
    b.PrependUint32Slot(5, buffer, 0)
    if alloc is not None:
        b.PrependUOffsetTRelativeSlot(6, alloc, 0)
    if extra is not None:
        b.PrependUOffsetTRelativeSlot(9, extra, 0)
    return b.EndObject()


def _kernel_call(b: flatbuffers.Builder, op_index: int, args: list[int]) -> int:
    args_vec = _ints(b, args)
    b.StartObject(2)
    b.PrependInt32Slot(0, op_index, 0)
    b.PrependUOffsetTRelativeSlot(1, args_vec, 0)
    call = b.EndObject()
    b.StartObject(2)
    b.PrependUint8Slot(0, 1, 0)                         # InstructionArguments: KernelCall
    b.PrependUOffsetTRelativeSlot(1, call, 0)
    return b.EndObject()


def _buffer(b: flatbuffers.Builder, size: int) -> int:
    storage = b.CreateByteVector(bytes(size))
    b.StartObject(1)
    b.PrependUOffsetTRelativeSlot(0, storage, 0)
    return b.EndObject()


def llm_program_bytes(*, vocab: int, dim: int, context: int, other_weight_bytes: int,
                      embedding_in_ptd: bool = False, attention: str = "aten::bmm") -> bytes:
    """A decode step's program as :mod:`pytest_sme2.readers.pte_traffic` reads it: an fp32
    embedding table (``vocab`` x ``dim``) read by ``aten::embedding`` — in the program's constant
    buffer, or outside it (``embedding_in_ptd``: the .ptd holds it) —, ``other_weight_bytes`` of
    other weights in the program, a K and a V cache of ``context`` positions x 2 heads x 8 (fp32:
    64 B per position each), and an ``attention`` operator (``llama::custom_sdpa``: attention up
    to the position)."""
    b = flatbuffers.Builder(1024)
    fp32, int64 = 6, 4
    values = [_evalue(b, TENSOR, _llm_tensor(b, fp32, [1, context, 2, 8], planned=True)),
              _evalue(b, TENSOR, _llm_tensor(b, fp32, [1, context, 2, 8], planned=True)),
              _evalue(b, TENSOR, _llm_tensor(
                  b, fp32, [vocab, dim], buffer=0 if embedding_in_ptd else 2,
                  external="tok_embeddings.weight" if embedding_in_ptd else None)),
              _evalue(b, TENSOR, _llm_tensor(b, int64, [1, 1]))]
    values_vec = _offsets(b, values)
    inputs_vec = _ints(b, [3])
    instructions = _offsets(b, [_kernel_call(b, 0, [2, 3]), _kernel_call(b, 1, [0, 1])])
    b.StartObject(4)
    b.PrependUOffsetTRelativeSlot(2, instructions, 0)
    chains = _offsets(b, [b.EndObject()])
    operators = []
    for op in ("aten::embedding", attention):
        name = b.CreateString(op)
        b.StartObject(2)
        b.PrependUOffsetTRelativeSlot(0, name, 0)
        operators.append(b.EndObject())
    operators_vec = _offsets(b, operators)
    name_off = b.CreateString("forward")
    b.StartObject(10)
    b.PrependUOffsetTRelativeSlot(0, name_off, 0)
    b.PrependUOffsetTRelativeSlot(2, values_vec, 0)
    b.PrependUOffsetTRelativeSlot(3, inputs_vec, 0)
    b.PrependUOffsetTRelativeSlot(5, chains, 0)
    b.PrependUOffsetTRelativeSlot(6, operators_vec, 0)
    plans_vec = _offsets(b, [b.EndObject()])
    table = 0 if embedding_in_ptd else vocab * dim * 4
    buffers = _offsets(b, [_buffer(b, 0), _buffer(b, other_weight_bytes), _buffer(b, table)])
    b.StartObject(8)
    b.PrependUOffsetTRelativeSlot(1, plans_vec, 0)
    b.PrependUOffsetTRelativeSlot(2, buffers, 0)
    b.Finish(b.EndObject(), file_identifier=b"ET12")
    return bytes(b.Output())
