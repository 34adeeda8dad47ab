"""Hand-made ExecuTorch program flatbuffers (``program.fbs``'s Program -> ExecutionPlan ->
EValue -> Tensor/Int), only as far as the metadata reader looks: fast tests of what a user's
.pte can be, without torch. The runtime refuses them (no instructions): that is one test too."""

from __future__ import annotations

from pathlib import Path

import flatbuffers

# KernelTypes union codes (flatbuffers' NONE is 0).
INT, TENSOR = 2, 5


def _tensor(b: flatbuffers.Builder, scalar_type: int, sizes: list[int]) -> int:
    b.StartVector(4, len(sizes), 4)
    for d in reversed(sizes):
        b.PrependInt32(d)
    vec = b.EndVector()
    b.StartObject(10)
    b.PrependInt8Slot(0, scalar_type, 0)
    b.PrependUOffsetTRelativeSlot(2, vec, 0)
    return b.EndObject()


def _int(b: flatbuffers.Builder, value: int) -> int:
    b.StartObject(1)
    b.PrependInt64Slot(0, value, 0)
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


def program_bytes(methods: dict[str, list[tuple]]) -> bytes:
    """``{"forward": [("tensor", scalar_type, [1, 3, 8, 8]), ("int", 4)]}`` -> .pte bytes."""
    b = flatbuffers.Builder(1024)
    plans = []
    for name, inputs in methods.items():
        values = []
        for item in inputs:
            if item[0] == "tensor":
                values.append(_evalue(b, TENSOR, _tensor(b, item[1], item[2])))
            else:
                values.append(_evalue(b, INT, _int(b, item[1])))
        values_vec = _offsets(b, values)
        b.StartVector(4, len(values), 4)
        for i in reversed(range(len(values))):
            b.PrependInt32(i)
        inputs_vec = b.EndVector()
        name_off = b.CreateString(name)
        b.StartObject(10)
        b.PrependUOffsetTRelativeSlot(0, name_off, 0)
        b.PrependUOffsetTRelativeSlot(2, values_vec, 0)
        b.PrependUOffsetTRelativeSlot(3, inputs_vec, 0)
        plans.append(b.EndObject())
    plans_vec = _offsets(b, plans)
    b.StartObject(8)
    b.PrependUOffsetTRelativeSlot(1, plans_vec, 0)
    b.Finish(b.EndObject(), file_identifier=b"ET12")
    return bytes(b.Output())


def write_program(path: Path, methods: dict[str, list[tuple]]) -> Path:
    path.write_bytes(program_bytes(methods))
    return path
