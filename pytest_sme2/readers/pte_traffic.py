"""What one decode step of an LLM program must read from memory, read from the ``.pte`` (and its
``.ptd``) flatbuffer alone, no torch (issue 38, part 6):

* the weights it touches: every constant the program holds (``constant_buffer``, the constant
  segment, named data — where XNNPACK keeps its weights —, delegate blobs, and the ``.ptd``'s
  data), except the token embedding table, of which a step reads one row (the weight of an
  ``aten::embedding`` call);
* the KV cache per position: the program's mutable buffers (the non-constant tensors that come
  before forward's inputs, as ExecuTorch emits a method's buffers) with a dimension of the
  cache's length; bytes per position = their sizes over that length. Plain attention (ExecuTorch's
  Llama without ``--use_sdpa_with_kv_cache``) reads the whole static cache, masked, at every
  step (docs/llms.md, measured in docs/measurements/context-depth.md); a program with the
  ``llama::`` SDPA ops (:data:`POSITION_SDPA_OPS`) reads positions 0 .. p at position ``p``
  (layers x K and V x kv heads x head dim x dtype each).

A constant's data is in the ``.pte`` (``data_buffer_idx`` > 0, or a segment) or, in a program
whose weights live in a ``.ptd``, outside it (``extra_tensor_info.location`` EXTERNAL): the
embedding table is found in either place, so that only one row of it is counted.

The field positions are ``program.fbs``'s (as in :mod:`pytest_sme2.readers.pte_program`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import flatbuffers.table
from flatbuffers import encode, number_types as nt

from pytest_sme2.readers.pte_program import FILE_IDENTIFIER, PteProgramError

# program.fbs positions
_P_PLANS, _P_CONST_BUFFER, _P_DELEGATE_DATA, _P_SEGMENTS, _P_CONST_SEGMENT = 1, 2, 3, 4, 5
_P_MUTABLE, _P_NAMED_DATA = 6, 7
_PLAN_NAME, _PLAN_VALUES, _PLAN_INPUTS, _PLAN_CHAINS, _PLAN_OPERATORS = 0, 2, 3, 5, 6
_TENSOR_TYPE, _TENSOR_SIZES, _TENSOR_BUFFER, _TENSOR_ALLOC, _TENSOR_EXTRA = 0, 2, 5, 6, 9
_EXTRA_LOCATION, _EXTERNAL = 2, 1     # ExtraTensorInfo.location: TensorDataLocation.EXTERNAL
_EVALUE_TENSOR = 5          # union KernelTypes: Tensor
_INSTR_KERNEL_CALL = 1      # union InstructionArguments: KernelCall
ELEMENT_BYTES = {0: 1, 1: 1, 2: 2, 3: 4, 4: 8, 5: 2, 6: 4, 7: 8, 11: 1, 15: 2}  # 15: bfloat16
EMBEDDING_OPS = ("aten::embedding", "quantized_decomposed::embedding_byte",
                 "quantized_decomposed::embedding_4bit")
# Attention that reads the KV cache only up to the position (ExecuTorch's custom SDPA ops).
POSITION_SDPA_OPS = ("llama::custom_sdpa", "llama::sdpa_with_kv_cache")


@dataclass(frozen=True)
class DecodeBytes:
    """Bytes one decode step reads, as the program says."""

    weight_bytes: int               # weights touched per step (embedding: one row)
    kv_bytes_per_position: int | None  # None: no KV cache buffer found
    kv_buffers: int = 0             # mutable buffers found (K and V per layer)
    embedding_bytes: int = 0        # the embedding table, of which one row is counted
    # Plain attention reads every position of the static cache at every step; custom SDPA
    # only those up to the step's position.
    reads_whole_cache: bool = True


class _T:
    """A flatbuffer table with by-position accessors."""

    def __init__(self, buf: bytes, pos: int):
        self.t = flatbuffers.table.Table(buf, pos)

    def _off(self, i: int) -> int:
        return self.t.Offset(4 + 2 * i)

    def scalar(self, i: int, flags, default=0):
        off = self._off(i)
        return self.t.Get(flags, off + self.t.Pos) if off else default

    def table(self, i: int) -> _T | None:
        off = self._off(i)
        return _T(self.t.Bytes, self.t.Indirect(off + self.t.Pos)) if off else None

    def vlen(self, i: int) -> tuple[int, int]:
        off = self._off(i)
        return (self.t.Vector(off), self.t.VectorLen(off)) if off else (0, 0)

    def tables(self, i: int) -> list[_T]:
        start, n = self.vlen(i)
        return [_T(self.t.Bytes, self.t.Indirect(start + 4 * k)) for k in range(n)]

    def ints(self, i: int, flags=nt.Int32Flags) -> list[int]:
        start, n = self.vlen(i)
        return [self.t.Get(flags, start + flags.bytewidth * k) for k in range(n)]

    def string(self, i: int) -> str:
        off = self._off(i)
        return self.t.String(off + self.t.Pos).decode() if off else ""


def _tensor_bytes(t: _T) -> int:
    n = 1
    for s in t.ints(_TENSOR_SIZES):
        n *= s
    return n * ELEMENT_BYTES.get(t.scalar(_TENSOR_TYPE, nt.Int8Flags), 4)


def _constant_bytes(program: _T) -> int:
    total = sum(b.vlen(0)[1] for b in program.tables(_P_CONST_BUFFER))
    total += sum(d.vlen(0)[1] for d in program.tables(_P_DELEGATE_DATA))
    sizes = [s.scalar(1, nt.Uint64Flags) for s in program.tables(_P_SEGMENTS)]
    used = {n.scalar(1, nt.Uint32Flags) for n in program.tables(_P_NAMED_DATA)}
    const = program.table(_P_CONST_SEGMENT)
    if const is not None and const.vlen(1)[1]:
        used.add(const.scalar(0, nt.Uint32Flags))
    # Delegate blobs stored in segments: every segment that is not mutable data.
    mutable = {m.scalar(0, nt.Uint32Flags) for m in program.tables(_P_MUTABLE)}
    used |= set(range(len(sizes))) - mutable
    return total + sum(sizes[i] for i in used if i < len(sizes))


def _forward(program: _T, pte: Path) -> _T:
    for plan in program.tables(_P_PLANS):
        if plan.string(_PLAN_NAME) == "forward":
            return plan
    raise PteProgramError(f"{pte}: the program has no method 'forward'; is it an LLM?")


def _is_constant(tensor: _T) -> bool:
    """A tensor whose data the program holds: in the .pte, or outside it (a .ptd)."""
    if tensor.scalar(_TENSOR_BUFFER, nt.Uint32Flags):
        return True
    extra = tensor.table(_TENSOR_EXTRA)
    return extra is not None and extra.scalar(_EXTRA_LOCATION, nt.Int8Flags) == _EXTERNAL


def _operator_names(plan: _T) -> list[str]:
    return [o.string(0) for o in plan.tables(_PLAN_OPERATORS)]


def _embedding(plan: _T, values: list[_T]) -> tuple[int, int]:
    """(bytes, rows) of the constant tables an embedding call reads from (rows: the
    vocabulary, the first dimension)."""
    names = _operator_names(plan)
    total, rows = 0, 1
    for chain in plan.tables(_PLAN_CHAINS):
        for instr in chain.tables(2):
            call = instr.table(1) if instr.scalar(0, nt.Uint8Flags) == _INSTR_KERNEL_CALL else None
            if call is None or names[call.scalar(0, nt.Int32Flags)] not in EMBEDDING_OPS:
                continue
            args = call.ints(1)
            tensor = values[args[0]].table(1) if args else None
            if tensor is not None and _is_constant(tensor):
                total += _tensor_bytes(tensor)
                rows = max(rows, (tensor.ints(_TENSOR_SIZES) or [1])[0])
    return total, rows


def _kv_per_position(plan: _T, values: list[_T], context_len: int | None) -> tuple[int | None, int]:
    if not context_len:
        return None, 0
    inputs = plan.ints(_PLAN_INPUTS)
    first_input = min(inputs) if inputs else len(values)
    per_position, found = 0, 0
    for v in values[:first_input]:
        t = v.table(1) if v.scalar(0, nt.Uint8Flags) == _EVALUE_TENSOR else None
        if t is None or _is_constant(t) or t.table(_TENSOR_ALLOC) is None:
            continue
        if context_len in t.ints(_TENSOR_SIZES):
            per_position += _tensor_bytes(t) // context_len
            found += 1
    return (per_position, found) if found else (None, 0)


def decode_bytes(pte: Path, ptd: Path | None = None,
                 context_len: int | None = None) -> DecodeBytes:
    """What a decode step of ``pte`` reads; ``context_len``: the KV cache's length
    (``get_max_context_len``)."""
    buf = Path(pte).read_bytes()
    if buf[4:8] != FILE_IDENTIFIER:
        raise PteProgramError(f"{pte}: not an ExecuTorch program (no {FILE_IDENTIFIER.decode()} "
                              "identifier); pass a .pte file")
    program = _T(buf, encode.Get(nt.UOffsetTFlags.packer_type, buf, 0))
    plan = _forward(program, pte)
    values = plan.tables(_PLAN_VALUES)
    embedding, rows = _embedding(plan, values)
    weights = (_constant_bytes(program) + (Path(ptd).stat().st_size if ptd else 0)
               - embedding + embedding // rows)
    kv, found = _kv_per_position(plan, values, context_len)
    position_sdpa = any(n in POSITION_SDPA_OPS for n in _operator_names(plan))
    return DecodeBytes(weights, kv, found, embedding, reads_whole_cache=not position_sdpa)
