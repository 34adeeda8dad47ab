"""Read what the analysis needs from an ``.etrecord`` without torch: it is a zip of JSON files.

- ``delegate_map``: per method, delegate instruction id -> backend name;
- ``debug_handle_map``: per method, instruction id -> debug handle(s) of the graph nodes it runs;
- ``edge_dialect_exported_program/<method>``: the edge graph (torch.export's JSON), whose nodes
  carry ``debug_handle``, the operator ``target`` and ``nn_module_stack`` (module path).
"""

from __future__ import annotations

import json
import zipfile
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from pytest_sme2.errors import Sme2Error


class ETRecordError(Sme2Error):
    pass


@dataclass(frozen=True)
class InstructionInfo:
    backend: str | None               # delegate backend, None for a portable operator
    op_types: tuple[str, ...]         # edge operators this instruction runs, e.g. aten.linear
    module_paths: tuple[str, ...]     # innermost nn.Module path of each, e.g. features.0.0


@dataclass(frozen=True)
class ETRecordInfo:
    instructions: dict[int, InstructionInfo] = field(default_factory=dict)

    def get(self, instruction_id: int) -> InstructionInfo | None:
        return self.instructions.get(instruction_id)


def _op_type(target: str) -> str:
    # executorch.exir.dialects.edge.ops.aten.convolution.default -> aten.convolution.default
    marker = ".ops."
    return target.split(marker, 1)[1] if marker in target else target


def _module_path(stack: str | None) -> str:
    """Innermost entry of nn_module_stack ("key,path,type;key,path,type")."""
    if not stack:
        return ""
    last = stack.split(";")[-1].split(",")
    return last[1] if len(last) >= 3 else ""


def read_etrecord(path: str | Path, method: str = "forward") -> ETRecordInfo:
    """What the analysis needs from ``path``; a file version already read is not read again (a
    session analyses every block of a model against one .etrecord)."""
    path = Path(path)
    try:
        st = path.stat()
    except FileNotFoundError:
        raise ETRecordError(f"{path}: no such ETRecord file") from None
    except OSError:  # reading it says what is wrong
        return _read(path, method)
    return _read_version(str(path), st.st_size, st.st_mtime_ns, method)


@lru_cache(maxsize=32)
def _read_version(path: str, size: int, mtime_ns: int, method: str) -> ETRecordInfo:
    return _read(Path(path), method)


def _read(path: Path, method: str) -> ETRecordInfo:
    try:
        with zipfile.ZipFile(path) as z:
            names = set(z.namelist())
            handles = json.loads(z.read("debug_handle_map")).get(method, {})
            delegates = (json.loads(z.read("delegate_map")).get(method, {})
                         if "delegate_map" in names else {})
            graph_name = f"edge_dialect_exported_program/{method}"
            graph = json.loads(z.read(graph_name)) if graph_name in names else None
    except FileNotFoundError:
        raise ETRecordError(f"{path}: no such ETRecord file") from None
    except (zipfile.BadZipFile, KeyError, ValueError, OSError) as e:
        raise ETRecordError(f"{path}: not a readable ETRecord ({e}); re-export the model to "
                            "write a new one") from None

    by_handle: dict[int, tuple[str, str]] = {}
    if graph:
        for node in graph.get("graph_module", {}).get("graph", {}).get("nodes", []):
            meta = node.get("metadata", {})
            handle = meta.get("debug_handle")
            if handle is None:
                continue
            try:
                by_handle[int(handle)] = (_op_type(node.get("target", "")),
                                          _module_path(meta.get("nn_module_stack")))
            except ValueError:
                continue

    instructions: dict[int, InstructionInfo] = {}
    for key, value in handles.items():
        ids = value if isinstance(value, list) else [value]
        ops, mods = [], []
        for h in dict.fromkeys(ids):  # keep order, drop repeats
            op, mod = by_handle.get(int(h), ("", ""))
            if op and op != "executorch_call_delegate":
                ops.append(op)
                mods.append(mod)
        backend = delegates.get(key, {}).get("name") if key in delegates else None
        instructions[int(key)] = InstructionInfo(backend, tuple(ops), tuple(mods))
    return ETRecordInfo(instructions)
