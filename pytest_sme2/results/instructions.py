"""Instructions per ``Method::execute`` (:class:`InstructionCount`), as the count gives them
and results.json stores them (a block's ``instructions``). How they are counted:
:mod:`pytest_sme2.instructions.count`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any



_GENERATION_KEYS = ("prefill", "prompt_tokens", "new_tokens")


@dataclass(frozen=True)
class InstructionCount:
    """Instructions per ``Method::execute`` of one model, dtype and thread count.

    ``per_execute`` leaves out the thread pool's own code (``deterministic_note`` says so, with
    how much it was); ``per_library`` lists every library, the pool included; ``hottest`` the
    ten functions with the most instructions of their own; ``per_operator`` what each kernel
    or delegate call of the method cost (inclusive), where the symbols name them."""

    per_execute: float
    executions: int                     # executions the slope spans (n_high - n_low)
    method: str                         # how it was counted
    threads: int
    hottest: list[tuple[str, float]]
    per_library: dict[str, float]
    deterministic_note: str
    per_operator: dict[str, float] = field(default_factory=dict)
    excluded: dict[str, float] = field(default_factory=dict)   # library -> per execute
    wall_s: float = 0.0                 # what counting cost (both processes, in parallel)
    valgrind: str = ""                  # "3.19.0"
    # An LLM's generation (pytest_sme2.instructions.count.count_generation): ``per_execute`` is
    # then per decode token (one decode execute; with no decode step, per prefill) and
    # ``prefill`` the instructions of one whole prefill of ``prompt_tokens`` tokens; None for a
    # forward pass.
    prefill: float | None = None
    prompt_tokens: int | None = None
    new_tokens: int | None = None

    @property
    def is_generation(self) -> bool:
        return self.prefill is not None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["hottest"] = [[name, value] for name, value in self.hottest]
        if self.prefill is None:     # a forward pass's count: the keys it always had
            for name in _GENERATION_KEYS:
                d.pop(name)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> InstructionCount:
        """What :meth:`to_dict` wrote; numbers as they were written (byte for byte)."""
        names = {f.name for f in fields(cls)}
        known = {k: v for k, v in d.items() if k in names}
        known["hottest"] = [(str(n), v) for n, v in d.get("hottest", [])]
        return cls(**known)
