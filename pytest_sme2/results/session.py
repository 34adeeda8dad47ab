"""results.json's ``session``: what the session was (versions, configuration, the saving
session's id, where in the history it sits, its runners), as one typed record.

The loader reads it (:meth:`SessionInfo.from_json`); everything else reads its attributes. A key
this version does not know is kept in ``extra``, and :meth:`SessionInfo.to_json` gives back the
document's ``session`` as it was read, keys in their order."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Mapping


@dataclass
class SessionInfo:
    versions: Any = None                   # {package: version}; None: not recorded
    config: dict[str, Any] | None = field(default_factory=dict)   # None only as read
    baseline_session_id: str | None = None  # the id baseline files give a session that saved
    identity: dict[str, Any] | None = field(default_factory=dict)   # commit, branch, time, ci
    runners: dict[str, dict[str, Any]] | None = field(default_factory=dict)  # kind, labels, path
    device: dict[str, Any] | None = None   # documents that recorded one device for the session
    # The machine's speeds as the probe saw them across the session (MachineStates.to_dict());
    # None in documents before it.
    machine: dict[str, Any] | None = None
    # A session cut short (Ctrl-C): {"by": ..., "in_flight": the test then running or None,
    # "comparison": whether it was a comparison}; None: it ran to its end.
    interrupted: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)       # keys this version does not know
    order: tuple[str, ...] = field(default=(), repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any] | None) -> SessionInfo:
        d = dict(d or {})
        names = {f.name for f in fields(cls)} - {"extra", "order"}
        known = {k: v for k, v in d.items() if k in names}
        return cls(**known, extra={k: v for k, v in d.items() if k not in names},
                   order=tuple(d))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        defaults = SessionInfo()
        for key in (*self.order, *(f.name for f in fields(self))):
            if key in out or key in ("extra", "order"):
                continue
            if key in self.extra:
                out[key] = self.extra[key]
            elif hasattr(defaults, key) and (key in self.order or
                                             getattr(self, key) != getattr(defaults, key)):
                out[key] = getattr(self, key)
        out.update({k: v for k, v in self.extra.items() if k not in out})
        return out
