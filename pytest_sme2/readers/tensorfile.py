"""The raw tensor file runners exchange: input and output tensors, contiguous little-endian
bytes concatenated in argument order, with a JSON sidecar (``<file>.json``) giving each tensor's
dtype and shape. C++ writes it with fwrite; numpy reads it without torch."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pytest_sme2.errors import Sme2Error

# ExecuTorch ScalarType codes -> numpy dtypes (executorch/schema/scalar_type.fbs).
SCALAR_TYPES = {0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "float16",
                6: "float32", 7: "float64", 11: "bool"}


@dataclass(frozen=True)
class TensorSpec:
    dtype: str
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        return int(np.dtype(self.dtype).itemsize * int(np.prod(self.shape, dtype=np.int64)))


def sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".json")


def write_tensors(path: Path, arrays: list[np.ndarray]) -> None:
    path = Path(path)
    with open(path, "wb") as fh:
        for a in arrays:
            fh.write(np.ascontiguousarray(a).tobytes())
    sidecar(path).write_text(json.dumps(
        {"tensors": [{"dtype": str(a.dtype), "shape": list(a.shape)} for a in arrays]}) + "\n")


def read_tensors(path: Path) -> list[np.ndarray]:
    path = Path(path)
    try:
        specs = [TensorSpec(t["dtype"], tuple(t["shape"]))
                 for t in json.loads(sidecar(path).read_text())["tensors"]]
        data = path.read_bytes()
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise Sme2Error(f"{path}: not a readable tensor file ({e})") from None
    if sum(s.nbytes for s in specs) != len(data):
        raise Sme2Error(f"{path}: holds {len(data)} bytes, its sidecar describes "
                        f"{sum(s.nbytes for s in specs)}")
    out, offset = [], 0
    for s in specs:
        out.append(np.frombuffer(data, dtype=s.dtype, count=int(np.prod(s.shape, dtype=np.int64)),
                                 offset=offset).reshape(s.shape))
        offset += s.nbytes
    return out
