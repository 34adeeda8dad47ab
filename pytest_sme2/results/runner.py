"""Which runner measured a block (:class:`RunnerInfo`): name, kind and build labels, as runners
give it and results.json stores it (a block's ``runner_info``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from pytest_sme2.results.codec import decode, encode


@dataclass(frozen=True)
class RunnerInfo:
    """Identity of a runner as recorded with results: name, kind and build labels."""

    name: str
    kind: str = ""
    labels: dict[str, str] = field(default_factory=dict)

    to_dict = encode
    from_dict = classmethod(decode)
