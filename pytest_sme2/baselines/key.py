"""What makes two measurements comparable, and what changed between them.

A measurement is described in three parts:

- **where it ran** — device kind, CPU/SoC, ABI, SME and SME2 capability, CPU set, emulated or
  not — and **what was asked** — model name, dtype, threads, runner name, measure. Together
  they are the :class:`BaselineKey`: one baseline file per key, and a baseline whose key
  differs is never compared silently (another CPU's times say nothing about this one).
- **what is under test** — the model's source, the export recipe, the exported program, the
  torch/executorch/torchao versions and the runner's build labels: the record
  :class:`~pytest_sme2.results.under_test.UnderTest`, worked out by :func:`under_test_of`
  and recorded with every block and every baseline session. A change there is what a
  performance gate exists to judge, so it never makes a baseline foreign: it is compared and
  shown ("changed since baseline: model source, executorch 1.5.1 -> 1.5.2").

Serial numbers and host names are in neither: another phone with the same SoC, or another CI
runner with the same CPU, shares the baseline. Nothing here imports torch.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from pytest_sme2.errors import Sme2Error
from pytest_sme2.programs.spec import is_pte
from pytest_sme2.results.codec import added, decode, encode
from pytest_sme2.results.under_test import VERSIONED, UnderTest
from pytest_sme2._util.versions import package_version
from pytest_sme2.programs.registry import get_model
from pytest_sme2.programs.export import recipe_digest
from pytest_sme2.programs.pte import content_hash

if TYPE_CHECKING:
    from pytest_sme2.results import BlockResult

MEASURE_TIME = "time"                       # Method::execute wall time (issue 13 adds more)

_WHERE = {"device_kind": "device kind", "cpu": "CPU/SoC", "abi": "ABI", "sme": "SME capability",
          "sme2": "SME2 capability", "cpu_set": "CPU set", "emulated": "emulated"}
_ASKED = {"model": "model", "dtype": "dtype", "threads": "threads", "runner": "runner",
          "measure": "measure", "depth": "context depth", "test": "test"}


def cpu_ranges(cpus: Iterable[int]) -> str:
    """[0, 1, 2, 5] -> "0-2,5": short and stable across processes."""
    out: list[str] = []
    ordered = sorted(set(int(c) for c in cpus))
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        out.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(out)


def _cpu_set(result: BlockResult) -> str:
    """The CPUs a benchmark could run on: the taskset mask it was pinned to, if recorded, else
    the process's allowed CPUs (a container limited to 2 of 8 cores is another machine)."""
    extra = result.device.extra
    mask = result.cpu_mask or extra.get("cpu_mask")
    if mask:
        return f"mask={mask}"
    allowed = extra.get("cpus_allowed")
    return cpu_ranges(allowed) if allowed else ""


@dataclass(frozen=True)
class BaselineKey:
    """Where it ran and what was asked: two measurements with one key are comparable."""

    device_kind: str
    cpu: str
    abi: str
    sme: bool | None
    sme2: bool | None
    cpu_set: str
    emulated: bool
    model: str
    dtype: str
    threads: int
    runner: str
    measure: str = MEASURE_TIME
    # An LLM's context depth (tokens in its KV cache before the timed prompt): decode at depth
    # 512 is another workload than at 0. Left out of the key's JSON at 0, so every key written
    # before it keeps its digest and file.
    depth: int = field(default=0, metadata=added())
    # The pytest test that measured it (its node id, a block's own suffix left out): two tests
    # of one model measure in their own ways (a comparison's pairs, a benchmark's one block),
    # and one must never set the other's level or noise floor. "" outside pytest; left out
    # of the key's JSON then, as depth at 0.
    test: str = field(default="", metadata=added())

    @classmethod
    def from_result(cls, result: BlockResult, measure: str = MEASURE_TIME) -> BaselineKey:
        dev = result.device
        return cls(device_kind=dev.kind, cpu=dev.cpu, abi=dev.abi, sme=dev.sme, sme2=dev.sme2,
                   cpu_set=_cpu_set(result), emulated=dev.emulated,
                   model=result.model, dtype=result.dtype, threads=int(result.threads),
                   runner=result.runner_name, measure=measure,
                   depth=result.depth,
                   test=result.benchmark if "::" in result.benchmark else "")

    to_dict = encode
    from_dict = classmethod(decode)

    @property
    def digest(self) -> str:
        """A stable hash: canonical JSON (sorted keys), so dict order never changes it."""
        canon = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canon.encode()).hexdigest()[:16]

    @property
    def stem(self) -> str:
        """The readable part of the file name, shared by every environment of one benchmark."""
        at = f"-d{self.depth}" if self.depth else ""
        raw = f"{self.model}-{self.dtype}-t{self.threads}{at}-{self.runner}"
        return re.sub(r"[^A-Za-z0-9._-]+", "_", raw)

    @property
    def filename(self) -> str:
        return f"{self.stem}-{self.digest[:10]}.json"

    def differences(self, now: BaselineKey) -> list[str]:
        """Why a baseline of key ``self`` cannot judge a measurement of key ``now``: one
        ``what baseline -> now`` per differing field, empty when the keys are equal."""
        out = [f"{label} {getattr(self, name)!r} -> {getattr(now, name)!r}"
               for name, label in {**_WHERE, **_ASKED}.items()
               if getattr(self, name) != getattr(now, name) and name != "test"]
        if self.test != now.test:
            was = repr(self.test) if self.test else \
                "(none: recorded before its key named the test, pooling every test's blocks)"
            out.append(f"test {was} -> {now.test!r}")
        return out


def under_test_of(result: BlockResult) -> UnderTest:
    """The result's record (``under_test``, set when it was measured), else worked out now:
    right in the process that measured it, where the export cache key guarantees that the
    current model source, recipe and versions made its program."""
    if result.under_test is not None:
        return result.under_test
    meta = _export_meta(result.pte)
    versions = meta.get("versions") if isinstance(meta.get("versions"), dict) else {}
    taken_as_is = is_pte(result.model)    # a user's .pte: no source or recipe of ours
    return UnderTest(export_key=result.export_key,
                     model_source=None if taken_as_is else _model_source(result.model),
                     recipe=None if taken_as_is else _recipe(),
                     program=_pte_hash(result.pte) if taken_as_is else
                     meta.get("program_sha256") or meta.get("pte_sha256"),
                     versions={p: str(versions.get(p) or package_version(p))
                               for p in VERSIONED},
                     runner_labels={str(k): str(v) for k, v in result.runner.labels.items()},
                     timing=result.timing.mode if result.timing else None)


def _export_meta(pte: str) -> dict[str, Any]:
    """The export's meta.json beside its .pte (versions, pte_sha256), or nothing."""
    try:
        doc = json.loads((Path(pte).parent / "meta.json").read_text())
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _pte_hash(pte: str) -> str | None:
    try:
        return content_hash(Path(pte))
    except OSError:
        return None


def _model_source(model: str) -> str | None:
    try:
        return get_model(model).source_digest()[:16]
    except (ImportError, Sme2Error, OSError):
        return None


def _recipe() -> str:
    return recipe_digest()[:16]
