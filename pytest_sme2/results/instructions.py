"""Instructions per ``Method::execute`` (:class:`InstructionCount`), as the count gives them
and results.json stores them (a block's ``instructions``). How they are counted:
:mod:`pytest_sme2.instructions.count`."""

from __future__ import annotations

from dataclasses import dataclass, field

from pytest_sme2.results.codec import added, decode, encode


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
    prefill: float | None = field(default=None, metadata=added("generation"))
    prompt_tokens: int | None = field(default=None, metadata=added("generation"))
    new_tokens: int | None = field(default=None, metadata=added("generation"))

    to_dict = encode
    from_dict = classmethod(decode)
