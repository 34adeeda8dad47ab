"""Which runner measured a block (:class:`RunnerInfo`): name, kind and build labels, as runners
give it and results.json stores it (a block's ``runner_info``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any



@dataclass(frozen=True)
class RunnerInfo:
    """Identity of a runner as recorded with results: name, kind and build labels."""

    name: str
    kind: str = ""
    labels: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"name": self.name, "kind": self.kind, "labels": dict(self.labels)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RunnerInfo:
        return cls(name=d["name"], kind=d.get("kind", ""), labels=dict(d.get("labels") or {}))
