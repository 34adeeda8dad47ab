"""What a ``.pte`` file's own metadata says about its methods: names, and each input's kind,
dtype and shape, read from the program flatbuffer with the ``flatbuffers`` runtime alone (no
torch, no executorch import: a file named on the command line is checked in milliseconds).

The layout is ExecuTorch's ``program.fbs`` (``file_identifier "ET12"``); the slots below are
the field positions of its tables. executorch ships generated readers for it, but importing
them imports ``executorch.exir`` and with it torch (~4 s).
"""

from __future__ import annotations

import mmap
import os
from dataclasses import dataclass
from pathlib import Path

import flatbuffers.table
from flatbuffers import encode, number_types

from pytest_sme2.errors import Sme2Error
from pytest_sme2.readers.tensorfile import SCALAR_TYPES

FILE_IDENTIFIER = b"ET12"
# program.fbs field positions (vtable slot = 4 + 2 * position; a union takes two positions).
_PROGRAM_EXECUTION_PLAN = 1
_PLAN_NAME, _PLAN_VALUES, _PLAN_INPUTS, _PLAN_OUTPUTS = 0, 2, 3, 4  # 1: container_meta_type
_PLAN_OPERATORS = 6                                                   # 5: chains
_OPERATOR_NAME, _OPERATOR_OVERLOAD = 0, 1
_EVALUE_TYPE, _EVALUE_VAL = 0, 1
_TENSOR_SCALAR_TYPE, _TENSOR_SIZES, _TENSOR_DYNAMISM = 0, 2, 8
_INT_VAL, _BOOL_VAL, _DOUBLE_VAL = 0, 0, 0
# union KernelTypes, in declaration order after flatbuffers' implicit NONE (0).
KINDS = ("NONE", "Null", "Int", "Bool", "Double", "Tensor", "String", "IntList", "DoubleList",
         "BoolList", "TensorList", "OptionalTensorList")


class PteProgramError(Sme2Error):
    pass


@dataclass(frozen=True)
class MethodInput:
    """One input of a method: a tensor (``dtype`` a numpy name, ``shape``) or a scalar whose
    value the program stores."""

    index: int
    kind: str                         # "Tensor", "Int", "Bool", "Double", "Null", ... (KINDS)
    dtype: str | None = None          # numpy dtype name; None: a scalar type numpy lacks
    scalar_type: int | None = None    # ExecuTorch ScalarType code
    shape: tuple[int, ...] = ()
    dynamic: bool = False             # shape_dynamism != STATIC: the sizes are upper bounds
    value: int | float | bool | None = None

    def describe(self) -> str:
        if self.kind != "Tensor":
            return f"input {self.index} ({self.kind})"
        dtype = self.dtype or f"ScalarType {self.scalar_type}"
        return f"input {self.index} (Tensor {dtype} {list(self.shape)})"


@dataclass(frozen=True)
class MethodSignature:
    name: str
    inputs: tuple[MethodInput, ...]
    # The method's outputs, described like inputs. A constant method (export's
    # ``constant_methods``, e.g. ``get_max_seq_len``) has no inputs and one Int/Bool/Double
    # output whose ``value`` the program stores.
    outputs: tuple[MethodInput, ...] = ()
    # The operators its instructions call outside any delegate, as the runtime looks them up
    # (``llama::custom_sdpa.out``, ``aten::add.out``), in the program's order.
    operators: tuple[str, ...] = ()

    @property
    def constant(self) -> int | float | bool | None:
        """The value a constant method returns, read from the program; None otherwise."""
        if self.inputs or len(self.outputs) != 1:
            return None
        out = self.outputs[0]
        return out.value if out.kind in ("Int", "Bool", "Double") else None


def _field(tab: flatbuffers.table.Table, position: int) -> int:
    return tab.Offset(4 + 2 * position)


def _table(tab: flatbuffers.table.Table, position: int) -> flatbuffers.table.Table | None:
    off = _field(tab, position)
    return flatbuffers.table.Table(tab.Bytes, tab.Indirect(off + tab.Pos)) if off else None


def _scalar(tab: flatbuffers.table.Table, position: int, flags, default):
    off = _field(tab, position)
    return tab.Get(flags, off + tab.Pos) if off else default


def _vector(tab: flatbuffers.table.Table, position: int) -> tuple[int, int]:
    """(start, length) of a vector field; (0, 0) when absent."""
    off = _field(tab, position)
    if not off:
        return 0, 0
    return tab.Vector(off), tab.VectorLen(off)


def _tables(tab: flatbuffers.table.Table, position: int) -> list[flatbuffers.table.Table]:
    start, n = _vector(tab, position)
    return [flatbuffers.table.Table(tab.Bytes, tab.Indirect(start + 4 * i)) for i in range(n)]


def _ints(tab: flatbuffers.table.Table, position: int, flags=number_types.Int32Flags) -> list:
    start, n = _vector(tab, position)
    return [tab.Get(flags, start + flags.bytewidth * i) for i in range(n)]


def _string(tab: flatbuffers.table.Table, position: int) -> str:
    off = _field(tab, position)
    return tab.String(off + tab.Pos).decode() if off else ""


def _operator(op: flatbuffers.table.Table) -> str:
    name, overload = _string(op, _OPERATOR_NAME), _string(op, _OPERATOR_OVERLOAD)
    return f"{name}.{overload}" if overload else name


def _input(index: int, value: flatbuffers.table.Table) -> MethodInput:
    kind_code = _scalar(value, _EVALUE_TYPE, number_types.Uint8Flags, 0)
    kind = KINDS[kind_code] if kind_code < len(KINDS) else f"type {kind_code}"
    val = _table(value, _EVALUE_VAL)
    if kind == "Tensor" and val is not None:
        code = _scalar(val, _TENSOR_SCALAR_TYPE, number_types.Int8Flags, 0)
        return MethodInput(index, kind, SCALAR_TYPES.get(code), code,
                           tuple(_ints(val, _TENSOR_SIZES)),
                           _scalar(val, _TENSOR_DYNAMISM, number_types.Int8Flags, 0) != 0)
    flags, default = {"Int": (number_types.Int64Flags, 0), "Bool": (number_types.BoolFlags, False),
                      "Double": (number_types.Float64Flags, 0.0)}.get(kind, (None, None))
    if flags is not None and val is not None:
        # flatbuffers leaves a field at its default (0, false) out of the table.
        return MethodInput(index, kind, value=_scalar(val, 0, flags, default))
    return MethodInput(index, kind)


def read_signatures(pte: Path) -> dict[str, MethodSignature]:
    """Every method of the program and its inputs, in argument order."""
    try:
        with open(pte, "rb") as fh:
            # Mapped, not read: a 1 GB program's methods are a few pages of it.
            data = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) \
                if os.fstat(fh.fileno()).st_size else b""
    except FileNotFoundError:
        raise PteProgramError(f"{pte}: no such file") from None
    except OSError as e:
        raise PteProgramError(f"{pte}: cannot read it ({e.strerror})") from None
    if len(data) < 8 or data[4:8] != FILE_IDENTIFIER:
        raise PteProgramError(f"{pte}: not an ExecuTorch program (no {FILE_IDENTIFIER.decode()} "
                              "identifier): export it with to_executorch() and write .buffer")
    try:
        root = flatbuffers.table.Table(data, encode.Get(number_types.UOffsetTFlags.packer_type,
                                                        data, 0))
        methods = {}
        for plan in _tables(root, _PROGRAM_EXECUTION_PLAN):
            name = _string(plan, _PLAN_NAME)
            values = _tables(plan, _PLAN_VALUES)
            inputs = tuple(_input(i, values[v]) for i, v in enumerate(_ints(plan, _PLAN_INPUTS)))
            outputs = tuple(_input(i, values[v])
                            for i, v in enumerate(_ints(plan, _PLAN_OUTPUTS)))
            operators = tuple(_operator(op) for op in _tables(plan, _PLAN_OPERATORS))
            methods[name] = MethodSignature(name, inputs, outputs, operators)
    except (IndexError, ValueError, UnicodeDecodeError) as e:
        raise PteProgramError(f"{pte}: damaged program flatbuffer ({e})") from None
    return methods


def forward_signature(pte: Path) -> MethodSignature:
    """The ``forward`` method, which every runner executes; one line when there is none."""
    methods = read_signatures(pte)
    if "forward" not in methods:
        names = ", ".join(sorted(methods)) or "none"
        raise PteProgramError(f"{pte}: the program has no 'forward' method (its methods: "
                              f"{names}); the runners execute 'forward'")
    return methods["forward"]
