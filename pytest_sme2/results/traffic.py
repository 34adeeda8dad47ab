"""What an LLM's decode step reads from memory, and the device's copy bandwidth it is set
against (issue 38, part 6): :class:`DecodeTraffic`, on ``GenerationResult.traffic``. The bytes
come from the program (:mod:`pytest_sme2.readers.pte_traffic`), the bandwidth from the
device's probe (:mod:`pytest_sme2.devices.bandwidth`); the line is
:func:`pytest_sme2.analysis.traffic.bandwidth_line`'s."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from pytest_sme2.results.records import known_fields


@dataclass(frozen=True)
class DecodeTraffic:
    weight_bytes: int                   # weights one decode step touches (embedding: a row)
    kv_bytes_per_position: int | None   # the KV cache, all layers, K and V (None: not found)
    mean_position: float                # KV positions a decode step reads, mean over steps
    copy_gbps: float | None = None      # the device's measured copy bandwidth (read + written)
    copy_source: str = ""               # how it was had ("measured", "cached in ...") or why not
    # Which positions a step reads: "filled" (0 .. its own: custom SDPA), or "whole cache"
    # (plain attention reads every position of the static cache, whatever is in it).
    kv_reads: str = "filled"

    @property
    def bytes_per_token(self) -> float:
        return self.weight_bytes + (self.kv_bytes_per_position or 0) * self.mean_position

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: Mapping[str, Any] | None) -> DecodeTraffic | None:
        return cls(**known_fields(cls, d)) if d else None
